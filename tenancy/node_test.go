package tenancy

import (
	"strings"
	"testing"
	"time"
)

func TestJoinNodeAndAuthenticate(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	res := bootstrap(t, s, BootstrapConfig{})
	ctx := t.Context()
	jt, _, err := s.CreateJoinToken(ctx, DefaultCluster, res.AdminID, "rack", time.Time{}, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	cred, nc, err := s.JoinNode(ctx, jt, "worker-1")
	if err != nil || !strings.HasPrefix(cred, NodeCredentialPrefix) || nc.NodeName != "worker-1" || nc.ClusterID != DefaultCluster {
		t.Fatalf("JoinNode: %q %+v %v", cred, nc, err)
	}
	if node, _, err := s.AuthenticateNode(ctx, cred, DefaultCluster); err != nil || node != "worker-1" {
		t.Fatalf("AuthenticateNode: %q %v", node, err)
	}
	// The name is taken while its credential lives: a join token cannot take over an existing node.
	_, _, err = s.JoinNode(ctx, jt, "worker-1")
	wantErr(t, err, ErrConflict)
	// Another cluster does not exist for this credential.
	db.exec(t, "INSERT INTO clusters (id, team_id, name) VALUES ('other', 'default', 'other')")
	_, _, err = s.AuthenticateNode(ctx, cred, "other")
	wantErr(t, err, ErrNotFound)
	for _, bad := range []string{"", "whn_short", "whp_" + cred[4:], typo(cred)} {
		_, _, err = s.AuthenticateNode(ctx, bad, DefaultCluster)
		wantErr(t, err, ErrUnauthenticated)
	}
	_, _, err = s.JoinNode(ctx, jt, "Not_A_Name")
	wantErr(t, err, ErrInvalid)
	_, _, err = s.JoinNode(ctx, "K10::abcdef.nope", "worker-9")
	wantErr(t, err, ErrUnauthenticated)
	// Revocation: refused at once, and the name may join again (the token's second and last use).
	if err := s.RevokeNodeCredential(ctx, DefaultCluster, "worker-1"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.AuthenticateNode(ctx, cred, DefaultCluster)
	wantErr(t, err, ErrUnauthenticated)
	wantErr(t, s.RevokeNodeCredential(ctx, DefaultCluster, "worker-1"), ErrNotFound)
	cred2, _, err := s.JoinNode(ctx, jt, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if node, _, err := s.AuthenticateNode(ctx, cred2, DefaultCluster); err != nil || node != "worker-1" {
		t.Fatalf("re-joined: %q %v", node, err)
	}
	_, _, err = s.JoinNode(ctx, jt, "worker-2") // max uses reached
	wantErr(t, err, ErrUnauthenticated)
	list, err := s.NodeCredentials(ctx, DefaultCluster)
	if err != nil || len(list) != 2 || list[0].RevokedAt.IsZero() == list[1].RevokedAt.IsZero() {
		t.Fatalf("NodeCredentials: %+v %v", list, err)
	}
}
