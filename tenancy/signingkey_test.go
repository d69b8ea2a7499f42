package tenancy

import (
	"crypto/ecdsa"
	"sync"
	"testing"
)

func TestSigningKeyIsCreatedOnceAndShared(t *testing.T) {
	db := newTestDB(t)
	a := db.open(t, nil)
	bootstrap(t, a, BootstrapConfig{})
	b := db.open(t, nil) // another replica
	keys := make([]*ecdsa.PrivateKey, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			k, err := s.SigningKey(t.Context(), DefaultCluster)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k.(*ecdsa.PrivateKey)
		})
	}
	wg.Wait()
	for i := range keys {
		if keys[i] == nil || !keys[i].Equal(keys[0]) {
			t.Fatalf("replicas disagree on the signing key (%d)", i)
		}
	}
	_, err := a.SigningKey(t.Context(), "no-such-cluster")
	wantErr(t, err, ErrNotFound)
	_, err = a.SigningKey(t.Context(), "Not Valid")
	wantErr(t, err, ErrNotFound)
	if n := db.count(t, "cluster_signing_keys"); n != 1 {
		t.Fatalf("%d keys stored, want 1", n)
	}
}
