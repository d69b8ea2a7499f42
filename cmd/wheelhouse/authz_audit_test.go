package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// The Kubernetes API's auditor caches cluster → team. ForgetCluster drops a cluster's entry (issue 34, item 2a:
// a deleted cluster's id taken by another team sent the new owner's records to the previous team's log), and the
// cache is bounded in time and size.
func TestKubeAuditorForgetsClusters(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	// The tenancy store's own cluster cache is off: what is cached here is the auditor's alone.
	ten, err := tenancy.Open(ctx, tenancy.Config{URL: url, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ten.Close)
	if _, err := ten.Bootstrap(ctx, tenancy.BootstrapConfig{}); err != nil {
		t.Fatal(err)
	}
	admin, err := ten.UserByEmail(ctx, "admin@localhost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ten.CreateTeam(ctx, admin.ID, "other", "Other"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	moveTo := func(team string) { // the id "default" now names a cluster of team
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE clusters SET team_id = $1 WHERE id = 'default'`, team); err != nil {
			t.Fatal(err)
		}
	}

	w := ten.NewAuditWriter(tenancy.AuditWriterConfig{FlushInterval: time.Hour})
	a := newKubeAuditor(ten, w)
	now := time.Now()
	a.now = func() time.Time { return now }
	record := func(cluster, path string) {
		a.Record(kubeapi.AuditRecord{Cluster: cluster, Verb: "create", Resource: "configmaps", Path: path, Code: 201})
	}
	record("default", "/cached")
	moveTo("other")
	record("default", "/still-cached") // within the TTL and not forgotten: the cached team
	a.ForgetCluster("default")
	record("default", "/after-forget") // the cluster's new team
	moveTo("default")
	now = now.Add(auditorTeamTTL)
	record("default", "/after-ttl") // expired: looked up again
	a.ForgetCluster("never-seen")   // any id, any time

	// At most max entries are held.
	a.max = 2
	for _, id := range []string{"c1", "c2", "c3"} {
		if _, err := ten.CreateCluster(ctx, "default", id, id, "", ""); err != nil {
			t.Fatal(err)
		}
		record(id, "/"+id)
	}
	a.mu.Lock()
	held := len(a.teams)
	a.mu.Unlock()
	if held > 2 {
		t.Errorf("the auditor holds %d clusters, more than its bound of 2", held)
	}
	w.Close()

	want := map[string][]string{
		"default": {"/c3", "/c2", "/c1", "/after-ttl", "/still-cached", "/cached"},
		"other":   {"/after-forget"},
	}
	for team, paths := range want {
		evs, err := ten.AuditLog(ctx, tenancy.AuditQuery{TeamID: team})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Resource)
		}
		if diff := cmp.Diff(paths, got); diff != "" {
			t.Errorf("team %s's audit log (-want +got):\n%s", team, diff)
		}
	}
}
