package tenancy

import (
	"strings"
	"testing"
	"time"
)

// TestJoinNodeChecksTokenFirst is the regression test of issue 34 item 9: JoinNode looked the token's cluster
// up by the token's id alone and answered ErrConflict for a node name that had joined before it checked the
// secret, so anyone who saw a token id (it is not secret: it is listed and logged) could probe a cluster's node
// names. Every bad token is now ErrUnauthenticated whatever the name, and a conflict costs no use.
func TestJoinNodeChecksTokenFirst(t *testing.T) {
	db, s, clock, _ := joinFixture(t)
	ctx := t.Context()
	good, _ := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
	if _, _, err := s.JoinNode(ctx, good, "worker-1"); err != nil {
		t.Fatal(err)
	}
	_, id, secret, _ := ParseJoinToken(good)
	wrongSecret := "K10" + testCAHash + "::" + id + "." + strings.Repeat("x", len(secret))
	expiring, _ := mustJoinToken(t, s, DefaultCluster, clock.Now().Add(time.Minute), 0)
	revoked, rjt := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
	if err := s.RevokeJoinToken(ctx, DefaultCluster, rjt.ID); err != nil {
		t.Fatal(err)
	}
	usedUp, _ := mustJoinToken(t, s, DefaultCluster, time.Time{}, 1)
	if _, _, err := s.JoinNode(ctx, usedUp, "worker-2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute) // expiring has expired
	for _, tc := range []struct{ name, token string }{
		{"wrong secret", wrongSecret},
		{"expired", expiring},
		{"revoked", revoked},
		{"used up", usedUp},
		{"unknown id", "K10::zzzzzz." + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, node := range []string{"worker-1", "worker-2", "never-joined"} {
				_, _, err := s.JoinNode(ctx, tc.token, node)
				wantErr(t, err, ErrUnauthenticated)
				if strings.Contains(err.Error(), node) {
					t.Errorf("the error names the node: %v", err)
				}
			}
		})
	}
	// With a valid token, a taken name is a conflict (the token is the authentication), and costs no use.
	limited, ljt := mustJoinToken(t, s, DefaultCluster, time.Time{}, 1)
	_, _, err := s.JoinNode(ctx, limited, "worker-1")
	wantErr(t, err, ErrConflict)
	var uses int
	if err := db.conn.QueryRow(ctx, "SELECT uses FROM join_tokens WHERE id = $1", ljt.ID).Scan(&uses); err != nil || uses != 0 {
		t.Fatalf("uses after a conflict = %d, %v; want 0", uses, err)
	}
	if _, _, err := s.JoinNode(ctx, limited, "worker-3"); err != nil {
		t.Fatalf("the one use left after a conflict: %v", err)
	}
}
