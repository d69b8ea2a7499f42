package tenancy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestClusters(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s, _ := withAdminToken(t, db, clock)
	db.exec(t, "INSERT INTO clusters (id, team_id, name, service_cidr) VALUES ('b-prod', $1, 'prod', '10.100.0.0/16')", DefaultTeam)
	cs, err := s.Clusters(t.Context())
	if err != nil || len(cs) != 2 || cs[0].ID != "b-prod" || cs[1].ID != DefaultCluster || cs[0].ServiceCIDR.String() != "10.100.0.0/16" {
		t.Fatalf("Clusters = %+v, %v", cs, err)
	}
	for _, id := range []string{"nope", "Not-A-DNS-Label", "", "a/b"} {
		_, err := s.Cluster(t.Context(), id)
		wantErr(t, err, ErrNotFound)
	}

	// Cached: a deleted cluster is served until the TTL passes.
	if _, err := s.Cluster(t.Context(), "b-prod"); err != nil {
		t.Fatal(err)
	}
	db.exec(t, "DELETE FROM clusters WHERE id = 'b-prod'")
	clock.Advance(9 * time.Second)
	if c, err := s.Cluster(t.Context(), "b-prod"); err != nil || c.Name != "prod" {
		t.Errorf("cached Cluster = %+v, %v", c, err)
	}
	clock.Advance(time.Second)
	_, err = s.Cluster(t.Context(), "b-prod")
	wantErr(t, err, ErrNotFound)
}

func TestClusterInvalidIDNeedsNoDatabase(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	s.Close()
	_, err := s.Cluster(t.Context(), "Bad_ID")
	wantErr(t, err, ErrNotFound)
	_, err = s.Cluster(t.Context(), "good-id")
	wantErr(t, err, ErrClosed)
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(t.Context(), Config{})
	if err == nil {
		t.Error("Open without a URL succeeded")
	}
	_, err = Open(t.Context(), Config{URL: "::not a url::"})
	wantErr(t, err, ErrInvalid)
	_, err = Open(t.Context(), Config{URL: "postgres://postgres@127.0.0.1:1/none?connect_timeout=5"})
	wantErr(t, err, ErrUnavailable)
}

func TestOpenUnmigratedDatabase(t *testing.T) {
	_, err := Open(t.Context(), Config{URL: pgtest.NewEmptyDatabase(t)})
	wantErr(t, err, ErrInternal)
}

func TestCreateCluster(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	newTeam(t, s, alice, "acme")
	newTeam(t, s, alice, "other")
	c, err := s.CreateCluster(ctx, "acme", "prod", "Production", "", "")
	if err != nil || c.ID != "prod" || c.TeamID != "acme" || c.Name != "Production" || !c.CreatedAt.Equal(clock.Now()) ||
		c.ServiceCIDR.String() != DefaultServiceCIDR || c.PodCIDR.String() != DefaultPodCIDR {
		t.Fatalf("CreateCluster = %+v, %v", c, err)
	}
	c, err = s.CreateCluster(ctx, "acme", "dev", "", "172.20.0.0/28", "172.16.0.0/16")
	if err != nil || c.Name != "dev" || c.ServiceCIDR.String() != "172.20.0.0/28" || c.PodCIDR.String() != "172.16.0.0/16" {
		t.Fatalf("CreateCluster with networks = %+v, %v", c, err)
	}
	if got, err := s.Cluster(ctx, "dev"); err != nil || got.ServiceCIDR != c.ServiceCIDR || got.Name != "dev" {
		t.Errorf("Cluster(dev) = %+v, %v", got, err)
	}
	if _, err := s.CreateCluster(ctx, "other", "prod-2", "Production", "10.0.0.0/8", "11.0.0.0/24"); err != nil {
		t.Errorf("the same name in another team, widest and narrowest networks: %v", err)
	}

	for _, tc := range []struct {
		name, team, id, clusterName, svc, pod string
		want                                  error
	}{
		{"id taken", "acme", "prod", "x", "", "", ErrConflict},
		{"id taken by another team", "other", "dev", "x", "", "", ErrConflict},
		{"name taken in the team", "acme", "p2", "Production", "", "", ErrConflict},
		{"default name taken", "acme", "p3", "dev", "", "", ErrConflict},
		{"unknown team", "nope", "c1", "", "", "", ErrNotFound},
		{"malformed team", "No", "c1", "", "", "", ErrNotFound},
		{"bad id", "acme", "C1", "", "", "", ErrInvalid},
		{"long id", "acme", strings.Repeat("c", 64), "", "", "", ErrInvalid},
		{"bad name", "acme", "c1", "a\tb", "", "", ErrInvalid},
		{"long name", "acme", "c1", strings.Repeat("n", MaxNameLen+1), "", "", ErrInvalid},
		{"garbage service CIDR", "acme", "c1", "", "nope", "", ErrInvalid},
		{"address without prefix", "acme", "c1", "", "10.0.0.0", "", ErrInvalid},
		{"IPv6 service CIDR", "acme", "c1", "", "fd00::/108", "", ErrInvalid},
		{"IPv4-mapped IPv6", "acme", "c1", "", "::ffff:10.0.0.0/108", "", ErrInvalid},
		{"host bits set", "acme", "c1", "", "10.96.0.1/12", "", ErrInvalid},
		{"service /7", "acme", "c1", "", "10.0.0.0/7", "", ErrInvalid},
		{"service /29", "acme", "c1", "", "10.0.0.0/29", "", ErrInvalid},
		{"pod /25", "acme", "c1", "", "", "10.244.0.0/25", ErrInvalid},
		{"pod /7", "acme", "c1", "", "", "10.0.0.0/7", ErrInvalid},
		{"IPv6 pod CIDR", "acme", "c1", "", "", "fd00::/64", ErrInvalid},
		{"overlap", "acme", "c1", "", "10.0.0.0/8", "10.1.0.0/16", ErrInvalid},
		{"same network", "acme", "c1", "", "10.1.0.0/16", "10.1.0.0/16", ErrInvalid},
		{"overlaps the default pod CIDR", "acme", "c1", "", "10.244.0.0/20", "", ErrInvalid},
		{"overlaps the default service CIDR", "acme", "c1", "", "", "10.96.0.0/16", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateCluster(ctx, tc.team, tc.id, tc.clusterName, tc.svc, tc.pod)
			wantErr(t, err, tc.want)
		})
	}
	if n := db.count(t, "clusters"); n != 3 {
		t.Errorf("%d clusters, want 3", n)
	}
}

// TestDefaultCIDRsMatchSchema: CreateCluster's defaults are the columns' defaults.
func TestDefaultCIDRsMatchSchema(t *testing.T) {
	db := newTestDB(t)
	db.exec(t, "INSERT INTO teams (id, name) VALUES ('t', 't')")
	var svc, pod string
	if err := db.conn.QueryRow(t.Context(), `INSERT INTO clusters (id, team_id, name) VALUES ('c', 't', 'c')
		RETURNING service_cidr::text, pod_cidr::text`).Scan(&svc, &pod); err != nil {
		t.Fatal(err)
	}
	if svc != DefaultServiceCIDR || pod != DefaultPodCIDR {
		t.Errorf("schema defaults %s and %s, constants %s and %s", svc, pod, DefaultServiceCIDR, DefaultPodCIDR)
	}
}

// TestCreateClusterOfDeletedID: a cluster deleted elsewhere cannot be created again under its id by another team,
// and the attempt drops the deleted cluster from this Store's cache.
func TestCreateClusterOfDeletedID(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, newFakeClock())
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	newTeam(t, s, alice, "a")
	newTeam(t, s, alice, "b")
	if _, err := s.CreateCluster(ctx, "a", "c", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Cluster(ctx, "c"); err != nil || c.TeamID != "a" {
		t.Fatal(c, err)
	}
	db.exec(t, "DELETE FROM clusters WHERE id = 'c'")
	_, err := s.CreateCluster(ctx, "b", "c", "", "", "")
	wantErr(t, err, ErrConflict)
	if c, err := s.Cluster(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cluster(c) = %+v, %v; want ErrNotFound", c, err)
	}
}

func TestClustersOf(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	newTeam(t, s, alice, "acme")
	newTeam(t, s, alice, "empty")
	for _, id := range []string{"b", "a-b", "ab", "a"} {
		if _, err := s.CreateCluster(ctx, "acme", id, "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.ClustersOf(ctx, "acme")
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if err != nil || strings.Join(ids, " ") != "a a-b ab b" {
		t.Errorf("ClustersOf = %v, %v", ids, err)
	}
	if cs, err := s.ClustersOf(ctx, "empty"); err != nil || cs == nil || len(cs) != 0 {
		t.Errorf("ClustersOf(empty) = %v, %v", cs, err)
	}
	for _, team := range []string{"nope", "NOPE"} {
		_, err := s.ClustersOf(ctx, team)
		wantErr(t, err, ErrNotFound)
	}
}

func TestDeleteCluster(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	ctx := t.Context()
	if _, err := s.Cluster(ctx, DefaultCluster); err != nil { // cached
		t.Fatal(err)
	}
	if _, _, err := s.CreateJoinToken(ctx, DefaultCluster, res.AdminID, "", time.Time{}, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(ctx, DefaultCluster); err != nil {
		t.Fatal(err)
	}
	_, err := s.Cluster(ctx, DefaultCluster)
	wantErr(t, err, ErrNotFound)
	if n := db.count(t, "join_tokens"); n != 0 {
		t.Errorf("%d join tokens left", n)
	}
	if _, err := s.Team(ctx, DefaultTeam); err != nil {
		t.Errorf("the team went with its cluster: %v", err)
	}
	wantErr(t, s.DeleteCluster(ctx, DefaultCluster), ErrNotFound)
	wantErr(t, s.DeleteCluster(ctx, "Bad"), ErrNotFound)
}
