package tenancy

import (
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
