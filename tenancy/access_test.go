package tenancy

import (
	"testing"
	"time"
)

// TestAuthenticateCluster: the caller's role in the cluster's team, read fresh on every call; another team's
// cluster and an unknown cluster look the same (ErrNotFound); a bad token is ErrUnauthenticated whatever the
// cluster.
func TestAuthenticateCluster(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s, res := withAdminToken(t, db, clock)
	ctx := t.Context()
	db.exec(t, "UPDATE wh_meta SET rev = 42 WHERE id = 1")
	a, err := s.AuthenticateCluster(ctx, res.Token, DefaultCluster)
	if err != nil || a.Role != RoleOwner || a.Email != AdminEmail || !a.Admin || a.Revision != 42 {
		t.Fatalf("admin on the default cluster: %+v %v", a, err)
	}
	db.exec(t, "INSERT INTO teams (id, name) VALUES ('other', 'Other')")
	db.exec(t, "INSERT INTO clusters (id, team_id, name) VALUES ('theirs', 'other', 'theirs')")
	for _, cluster := range []string{"theirs", "no-such-cluster"} {
		_, err := s.AuthenticateCluster(ctx, res.Token, cluster)
		wantErr(t, err, ErrNotFound)
	}
	_, err = s.AuthenticateCluster(ctx, typo(res.Token), "theirs")
	wantErr(t, err, ErrUnauthenticated)

	// Membership changes take effect on the next call (no cache).
	db.exec(t, "INSERT INTO memberships (team_id, user_id, role) VALUES ('other', $1, 'viewer')", res.AdminID)
	if a, err := s.AuthenticateCluster(ctx, res.Token, "theirs"); err != nil || a.Role != RoleViewer || a.Admin {
		t.Fatalf("after joining as viewer: %+v %v", a, err)
	}
	db.exec(t, "UPDATE memberships SET role = 'member' WHERE team_id = 'other'")
	if a, err := s.AuthenticateCluster(ctx, res.Token, "theirs"); err != nil || a.Role != RoleMember {
		t.Fatalf("after the role change: %+v %v", a, err)
	}
	db.exec(t, "DELETE FROM memberships WHERE team_id = 'other'")
	_, err = s.AuthenticateCluster(ctx, res.Token, "theirs")
	wantErr(t, err, ErrNotFound)

	// Revocation and expiry, also at once.
	tmp, tok, err := s.CreateToken(ctx, res.AdminID, "tmp", clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateCluster(ctx, tmp, DefaultCluster); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	_, err = s.AuthenticateCluster(ctx, tmp, DefaultCluster)
	wantErr(t, err, ErrUnauthenticated)
	db.exec(t, "UPDATE api_tokens SET revoked_at = now() WHERE id = $1", tok.ID)
	_, err = s.AuthenticateCluster(ctx, tmp, DefaultCluster)
	wantErr(t, err, ErrUnauthenticated)
	db.exec(t, "UPDATE users SET disabled = true WHERE id = $1", res.AdminID)
	_, err = s.AuthenticateCluster(ctx, res.Token, DefaultCluster)
	wantErr(t, err, ErrUnauthenticated)
}
