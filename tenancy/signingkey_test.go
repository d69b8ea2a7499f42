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

func TestSharedCAKeepsTheFirst(t *testing.T) {
	db := newTestDB(t)
	a, b := db.open(t, nil), db.open(t, nil)
	c1, k1, err := a.SharedCA(t.Context(), []byte("cert-a"), []byte("key-a"))
	if err != nil || string(c1) != "cert-a" || string(k1) != "key-a" {
		t.Fatalf("first: %s %s %v", c1, k1, err)
	}
	c2, k2, err := b.SharedCA(t.Context(), []byte("cert-b"), []byte("key-b"))
	if err != nil || string(c2) != "cert-a" || string(k2) != "key-a" {
		t.Fatalf("second replica got %s %s %v, want the first CA", c2, k2, err)
	}
	_, _, err = a.SharedCA(t.Context(), nil, nil)
	wantErr(t, err, ErrInvalid)
}
