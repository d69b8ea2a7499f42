package watchcache

import (
	"errors"
	"slices"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// A deleted cluster leaves nothing in the cache: its own collections and every cross-cluster collection holding
// its objects are dropped (the store deletes a cluster without events), their watches end with ErrReset, and
// a fresh cross-cluster collection holds the other clusters only. Cross-cluster collections without its objects
// stay.
func TestDropClusterResetsCrossClusterCollections(t *testing.T) {
	e := newEnv(t, Config{})
	e.create(t, "ns", "a", "1") // in c1
	other := store.Key{Cluster: "c2", Resource: "configmaps", Namespace: "ns", Name: "b"}
	if _, err := e.st.Create(t.Context(), other, value("2")); err != nil {
		t.Fatal(err)
	}
	own := e.collection(t)
	all := Kind{Resource: "configmaps", Type: "v1/ConfigMap"}
	cross, err := e.cache.Collection(t.Context(), all, decode)
	if err != nil {
		t.Fatal(err)
	}
	untouched, err := e.cache.Collection(t.Context(), Kind{Resource: "secrets", Type: "v1/Secret"}, decode)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cross.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := e.st.DeleteCluster(t.Context(), "c1"); err != nil {
		t.Fatal(err)
	}
	e.cache.DropCluster("c1")
	if _, err := w.Next(t.Context(), nil); !errors.Is(err, ErrReset) {
		t.Fatalf("the cross-cluster watch ended with %v, want ErrReset", err)
	}
	if own.failed() == nil {
		t.Error("the deleted cluster's own collection is still live")
	}
	if untouched.failed() != nil || e.cache.Peek(Kind{Resource: "secrets", Type: "v1/Secret"}) != untouched {
		t.Error("a cross-cluster collection without the cluster's objects was dropped")
	}
	fresh, err := e.cache.Collection(t.Context(), all, decode)
	if err != nil {
		t.Fatal(err)
	}
	if fresh == cross {
		t.Fatal("the cross-cluster collection was not replaced")
	}
	if got, _ := fresh.ListIn("c1", ""); len(got) != 0 {
		t.Errorf("the fresh collection holds the deleted cluster's %v", names(got))
	}
	if got, _ := fresh.ListIn("c2", ""); !slices.Equal(names(got), []string{"ns/b"}) {
		t.Errorf("the fresh collection holds %v of c2, want ns/b", names(got))
	}
	// Again: nothing of c1 is held any more, so nothing is dropped.
	e.cache.DropCluster("c1")
	if e.cache.Peek(all) != fresh {
		t.Error("a second DropCluster dropped the fresh cross-cluster collection")
	}
}
