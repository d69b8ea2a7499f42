package kubeapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodGeneration: a pod's generation starts at 1 whatever the client sends, follows spec changes, and is
// bumped once more when its graceful deletion begins (upstream's, which the conformance suite's Pod Generation
// tests check); so is an object's whose deletion a finalizer holds.
func TestPodGeneration(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 100},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Generation != 1 {
		t.Fatalf("generation on create = %d, want 1", created.Generation)
	}
	// Bound to a node, the pod's deletion is graceful.
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Generation != 1 {
		t.Fatalf("generation after binding = %d, want 1", bound.Generation)
	}
	for _, c := range bound.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.ObservedGeneration != 1 {
			t.Errorf("PodScheduled observedGeneration = %d, want 1", c.ObservedGeneration)
		}
	}
	patched, err := pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":600}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Generation != 2 {
		t.Fatalf("generation after a spec change = %d, want 2", patched.Generation)
	}
	grace := int64(60)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deleting, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if deleting.DeletionTimestamp == nil || deleting.Generation != 3 {
		t.Fatalf("graceful deletion: deletionTimestamp %v generation %d, want set and 3", deleting.DeletionTimestamp, deleting.Generation)
	}
	// A shorter grace period is no new deletion.
	shorter := int64(30)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &shorter}); err != nil {
		t.Fatal(err)
	}
	if again, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil || again.Generation != 3 {
		t.Fatalf("generation after shortening the grace period: %v %v, want 3", again, err)
	}

	// An unbound pod held by a finalizer: its deletion begins (and bumps the generation) without grace.
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := pods.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := pods.Get(ctx, "held", metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil || got.Generation != 2 {
		t.Fatalf("finalizer-held deletion: %v %v, want deletionTimestamp set and generation 2", got, err)
	}
	// ConfigMaps have no generation: none appears.
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "c", metav1.GetOptions{}); err != nil || got.Generation != cm.Generation {
		t.Fatalf("configmap generation after deletion began: %v %v, want %d", got, err, cm.Generation)
	}
}
