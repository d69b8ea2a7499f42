package tenancy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A deleted cluster's id is never used again, whether the cluster or its team was deleted.
func TestClusterIDsAreNotReused(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, nil)
	if _, err := s.CreateCluster(t.Context(), DefaultTeam, "once", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(t.Context(), "once"); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateCluster(t.Context(), DefaultTeam, "once", "", "", "")
	wantErr(t, err, ErrConflict)

	// Another team may not take it either, nor an id whose team was deleted with it.
	if _, err := s.CreateTeam(t.Context(), res.AdminID, "other", "Other"); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateCluster(t.Context(), "other", "once", "", "", "")
	wantErr(t, err, ErrConflict)
	if _, err := s.CreateCluster(t.Context(), "other", "with-team", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTeam(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateCluster(t.Context(), DefaultTeam, "with-team", "", "", "")
	wantErr(t, err, ErrConflict)
	for _, id := range []string{"once", "with-team"} {
		if ok, err := s.ClusterTombstoned(t.Context(), id); err != nil || !ok {
			t.Errorf("ClusterTombstoned(%s) = %v, %v", id, ok, err)
		}
	}
	if ok, err := s.ClusterTombstoned(t.Context(), DefaultCluster); err != nil || ok {
		t.Errorf("ClusterTombstoned(default) = %v, %v for a live cluster", ok, err)
	}
}

// A database whose teams were all deleted gets its default team back at the next start, but not the default
// cluster's id once that was deleted.
func TestBootstrapSkipsTombstonedDefaultCluster(t *testing.T) {
	db := newTestDB(t)
	s, _ := withAdminToken(t, db, nil)
	if _, err := s.DeleteTeam(t.Context(), DefaultTeam); err != nil {
		t.Fatal(err)
	}
	res := bootstrap(t, s, BootstrapConfig{})
	if !res.TeamCreated || res.ClusterCreated {
		t.Fatalf("Bootstrap = team created %v, cluster created %v; want the team only", res.TeamCreated, res.ClusterCreated)
	}
	if n := db.count(t, "clusters"); n != 0 {
		t.Errorf("%d clusters after bootstrap, want 0", n)
	}
}

// follower runs FollowAccessEvents on s and collects what it delivers.
type follower struct {
	mu  sync.Mutex // guards got
	got []AccessEvent
}

func follow(t *testing.T, s *Store) *follower {
	t.Helper()
	f := &follower{}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.FollowAccessEvents(ctx, AccessFollowConfig{Poll: 200 * time.Millisecond, Started: func() { close(started) }},
			func(e AccessEvent) {
				f.mu.Lock()
				f.got = append(f.got, e)
				f.mu.Unlock()
			})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("FollowAccessEvents returned %v, want context.Canceled", err)
		}
	})
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not start")
	}
	return f
}

type accessKey struct {
	Kind             AccessKind
	Cluster, Subject string
}

// wait polls until the follower has n events and returns them without ids and times.
func (f *follower) wait(t *testing.T, n int) []accessKey {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		got := append([]AccessEvent(nil), f.got...)
		f.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			out := make([]accessKey, len(got))
			for i, e := range got {
				if i > 0 && e.ID <= got[i-1].ID {
					t.Errorf("event %d has id %d after %d: not in log order", i, e.ID, got[i-1].ID)
				}
				out[i] = accessKey{e.Kind, e.Cluster, e.Subject}
			}
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every change that takes access away reaches a follower, whichever path made it (the Store's calls, a
// cascade, plain SQL), and nothing else does.
func TestFollowAccessEvents(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, nil)
	ctx := t.Context()
	bob, err := s.CreateUser(ctx, "bob@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTeam(ctx, res.AdminID, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	db.exec(t, "INSERT INTO memberships (team_id, user_id, role) VALUES ('acme', $1, 'member'), ($2, $1, 'viewer')", bob.ID, DefaultTeam)
	if _, err := s.CreateCluster(ctx, "acme", "acme-prod", "", "", ""); err != nil {
		t.Fatal(err)
	}
	_, tok, err := s.CreateToken(ctx, bob.ID, "ci", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	db.exec(t, `INSERT INTO node_credentials (cluster_id, node_name, hash, created_at)
		VALUES ('acme-prod', 'n1', sha256('a'), now()), ('acme-prod', 'n2', sha256('b'), now()), ('default', 'n3', sha256('c'), now())`)

	f := follow(t, s)
	// Changes that take nothing away are not events.
	db.exec(t, "UPDATE api_tokens SET last_used_at = now() WHERE id = $1", tok.ID)
	db.exec(t, "UPDATE users SET password_changed_at = now() WHERE id = $1", bob.ID)
	db.exec(t, "UPDATE node_credentials SET last_used_at = now()")
	if err := s.SetDisabled(ctx, bob.ID, false); err != nil {
		t.Fatal(err)
	}

	if err := s.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRole(ctx, "acme", bob.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeNodeCredential(ctx, "acme-prod", "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(ctx, DefaultTeam, bob.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDisabled(ctx, bob.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(ctx, DefaultCluster); err != nil { // cascades to n3's credential
		t.Fatal(err)
	}
	if _, err := s.DeleteTeam(ctx, "acme"); err != nil { // cascades to the cluster, n2, bob's membership
		t.Fatal(err)
	}
	want := []accessKey{
		{AccessUser, "", bob.ID},
		{AccessUser, "", bob.ID},
		{AccessNode, "acme-prod", "n1"},
		{AccessUser, "", bob.ID},
		{AccessUser, "", bob.ID},
	}
	// A deletion's cascade: the cluster, its live credentials, a team's members — in whatever order
	// PostgreSQL's cascade visits them.
	cascades := [][]accessKey{
		{{AccessNode, DefaultCluster, "n3"}, {AccessCluster, DefaultCluster, ""}},
		{{AccessCluster, "acme-prod", ""}, {AccessNode, "acme-prod", "n2"}, {AccessUser, "", bob.ID}, {AccessUser, "", res.AdminID}},
	}
	got := f.wait(t, len(want)+len(cascades[0])+len(cascades[1]))
	if diff := cmp.Diff(want, got[:min(len(got), len(want))]); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	got = got[len(want):]
	for _, c := range cascades {
		part := got[:min(len(got), len(c))]
		got = got[len(part):]
		sortKeys := cmpopts.SortSlices(func(a, b accessKey) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
		if diff := cmp.Diff(c, part, sortKeys); diff != "" {
			t.Errorf("cascade events (-want +got):\n%s", diff)
		}
	}
	if len(got) > 0 {
		t.Errorf("unexpected events %v", got)
	}
}

// Events committed while the follower's connection is gone are delivered once it is back.
func TestFollowAccessEventsSurvivesLostConnection(t *testing.T) {
	db := newTestDB(t)
	s, _ := withAdminToken(t, db, nil)
	f := follow(t, s)
	if err := s.DeleteCluster(t.Context(), DefaultCluster); err != nil {
		t.Fatal(err)
	}
	f.wait(t, 1)
	for i := range 3 {
		db.exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", accessApplicationName)
		db.exec(t, "SELECT wh_access_event('node', 'c', $1)", string(rune('a'+i)))
	}
	got := f.wait(t, 4)
	want := []accessKey{{AccessCluster, DefaultCluster, ""}, {AccessNode, "c", "a"}, {AccessNode, "c", "b"}, {AccessNode, "c", "c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// The log keeps Retention of events; the follower prunes older ones.
func TestFollowAccessEventsPrunes(t *testing.T) {
	db := newTestDB(t)
	s, _ := withAdminToken(t, db, nil)
	db.exec(t, "INSERT INTO access_events (kind, cluster, at) VALUES ('cluster', 'old', now() - interval '2 days'), ('cluster', 'new', now())")
	f := follow(t, s)
	db.exec(t, "SELECT wh_access_event('cluster', 'later', '')")
	if got := f.wait(t, 1); len(got) != 1 || got[0].Cluster != "later" {
		t.Fatalf("events %v, want only the one committed after the start", got)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var old int
		if err := db.conn.QueryRow(t.Context(), "SELECT count(*) FROM access_events WHERE cluster = 'old'").Scan(&old); err != nil {
			t.Fatal(err)
		}
		if old == 0 || time.Now().After(deadline) {
			break
		}
	}
	var clusters []string
	rows, err := db.conn.Query(t.Context(), "SELECT cluster FROM access_events ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	if diff := cmp.Diff([]string{"new", "later"}, clusters); diff != "" {
		t.Errorf("log after pruning (-want +got):\n%s", diff)
	}
}
