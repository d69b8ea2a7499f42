package tenancy

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestClusterCAIsCreatedOnceSharedAndGoesWithItsCluster(t *testing.T) {
	db := newTestDB(t)
	a := db.open(t, nil)
	bootstrap(t, a, BootstrapConfig{})
	b := db.open(t, nil) // another replica
	var made atomic.Int32
	fresh := func() ([]byte, []byte, error) {
		n := made.Add(1)
		return fmt.Appendf(nil, "cert-%d", n), fmt.Appendf(nil, "key-%d", n), nil
	}
	certs := make([]string, 8)
	var wg sync.WaitGroup
	for i := range certs {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			c, k, err := s.ClusterCA(t.Context(), DefaultCluster, fresh)
			if err != nil {
				t.Error(err)
				return
			}
			if string(k) != "key-"+string(c)[len("cert-"):] {
				t.Errorf("certificate %s came with key %s", c, k)
			}
			certs[i] = string(c)
		})
	}
	wg.Wait()
	for i := range certs {
		if certs[i] == "" || certs[i] != certs[0] {
			t.Fatalf("replicas disagree on the cluster's CA: %q", certs)
		}
	}
	if n := db.count(t, "cluster_cas"); n != 1 {
		t.Fatalf("%d CAs stored, want 1", n)
	}
	// Once stored, fresh is not asked again.
	before := made.Load()
	if _, _, err := a.ClusterCA(t.Context(), DefaultCluster, fresh); err != nil || made.Load() != before {
		t.Fatalf("a second read made a CA (%d → %d) or failed: %v", before, made.Load(), err)
	}

	_, _, err := a.ClusterCA(t.Context(), "no-such-cluster", fresh)
	wantErr(t, err, ErrNotFound)
	_, _, err = a.ClusterCA(t.Context(), "Not Valid", fresh)
	wantErr(t, err, ErrNotFound)
	boom := errors.New("no entropy")
	c2, err := a.CreateCluster(t.Context(), DefaultTeam, "second", "Second", "", "")
	if err != nil {
		t.Fatal(err)
	}
	other := c2.ID
	_, _, err = a.ClusterCA(t.Context(), other, func() ([]byte, []byte, error) { return nil, nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("a failing generator: %v", err)
	}
	if _, _, err := a.ClusterCA(t.Context(), other, fresh); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteCluster(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if n := db.count(t, "cluster_cas"); n != 1 {
		t.Fatalf("%d CAs stored after the cluster's deletion, want 1", n)
	}
}
