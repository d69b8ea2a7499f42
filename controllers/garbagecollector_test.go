package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestGarbageCollector(t *testing.T) {
	d := newDeps(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	cs := admin(t, d, "c1")
	bg := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")
	mk := func(name string, owners ...*corev1.ConfigMap) *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, o := range owners {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap",
				Name: o.Name, UID: o.UID})
		}
		out, err := cms.Create(bg, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	gone := func(name string) func() bool {
		return func() bool {
			_, err := cms.Get(bg, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	del := func(name string, p metav1.DeletionPropagation) {
		t.Helper()
		if err := cms.Delete(bg, name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
			t.Fatal(err)
		}
	}

	// Background: the owner goes at once, its dependent after it.
	owner := mk("owner")
	mk("dep", owner)
	del("owner", metav1.DeletePropagationBackground)
	eventually(t, "the background owner's dependent collected", gone("dep"))

	// Orphan: the owner goes once its dependent no longer refers to it; the dependent stays.
	owner2 := mk("owner2")
	mk("dep2", owner2)
	del("owner2", metav1.DeletePropagationOrphan)
	eventually(t, "the orphaning owner removed", gone("owner2"))
	dep2, err := cms.Get(bg, "dep2", metav1.GetOptions{})
	if err != nil || len(dep2.OwnerReferences) != 0 {
		t.Fatalf("orphaned dependent: %+v %v", dep2, err)
	}

	// Foreground: dependents (and theirs) go first, then the owner.
	owner3 := mk("owner3")
	dep3 := mk("dep3", owner3)
	mk("dep3b", dep3)
	del("owner3", metav1.DeletePropagationForeground)
	for _, n := range []string{"dep3b", "dep3", "owner3"} {
		eventually(t, n+" removed by the foreground deletion", gone(n))
	}

	// A cycle of blocking references (a → c → b → a, each owned by the next): a foreground deletion of one
	// deletes the others in the foreground and must not wait forever (the conformance test "should not be
	// blocked by dependency circle").
	t.Run("dependency circle", func(t *testing.T) {
		yes := true
		names := []string{"circle-a", "circle-b", "circle-c"}
		made := map[string]*corev1.ConfigMap{}
		for _, name := range names {
			made[name] = mk(name)
		}
		for i, name := range names {
			owner := made[names[(i+2)%3]]
			cm, err := cms.Get(bg, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
				BlockOwnerDeletion: &yes}}
			if _, err := cms.Update(bg, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		del("circle-a", metav1.DeletePropagationForeground)
		for _, n := range names {
			eventually(t, n+" removed", gone(n))
		}
	})

	// Dangling: an object whose only owner never existed is collected; one with a living owner left keeps it.
	mk("dangling", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: types.UID("00000000-0000-0000-0000-000000000001")}})
	eventually(t, "the dangling dependent collected", gone("dangling"))
	alive := mk("alive")
	mk("two-owners", alive, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: types.UID("00000000-0000-0000-0000-000000000002")}})
	eventually(t, "the reference to a missing owner dropped", func() bool {
		cm, err := cms.Get(bg, "two-owners", metav1.GetOptions{})
		return err == nil && len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == alive.UID
	})

	// Clusters are separate graphs: a reference in c2 to an object of c1 (its UID) has no owner in c2.
	c2 := admin(t, d, "c2").CoreV1().ConfigMaps("default")
	if _, err := c2.Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cross", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "alive", UID: alive.UID}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a dependent in c2 of an owner in c1 collected", func() bool {
		_, err := c2.Get(bg, "cross", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := cms.Get(bg, "alive", metav1.GetOptions{}); err != nil {
		t.Fatalf("the owner in c1: %v", err)
	}
}
