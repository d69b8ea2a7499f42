package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func countOwned(t *testing.T, cs kubernetes.Interface, rs *appsv1.ReplicaSet) (owned, active int) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(rs.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == rs.UID {
			owned++
			if p.DeletionTimestamp == nil {
				active++
			}
		}
	}
	return owned, active
}

func TestReplicaSet(t *testing.T) {
	d := newDeps(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	cs := admin(t, d, "c1")
	bg := t.Context()
	labels := map[string]string{"app": "web"}
	three := int32(3)
	rs, err := cs.AppsV1().ReplicaSets("default").Create(bg, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exactly := func(n int) func() bool {
		return func() bool { owned, active := countOwned(t, cs, rs); return owned == n && active == n }
	}
	eventually(t, "3 pods", exactly(3))
	eventually(t, "status.replicas 3", func() bool {
		got, err := cs.AppsV1().ReplicaSets("default").Get(bg, "web", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 3 && got.Status.ObservedGeneration == got.Generation
	})
	// Scale down, then a deleted pod is replaced.
	if _, err := cs.AppsV1().ReplicaSets("default").Patch(bg, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1 pod after scaling down", exactly(1))
	pods, _ := cs.CoreV1().Pods("default").List(bg, metav1.ListOptions{})
	if err := cs.CoreV1().Pods("default").Delete(bg, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted pod replaced", exactly(1))
	// A matching orphan is adopted (and, being one too many, one pod goes).
	if _, err := cs.CoreV1().Pods("default").Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the orphan adopted, one pod kept", func() bool {
		all, _ := cs.CoreV1().Pods("default").List(bg, metav1.ListOptions{})
		owned, active := countOwned(t, cs, rs)
		return len(all.Items) == 1 && owned == 1 && active == 1
	})
	// Deleting the ReplicaSet takes its pods with it (the garbage collector).
	if err := cs.AppsV1().ReplicaSets("default").Delete(bg, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pods collected", func() bool {
		all, err := cs.CoreV1().Pods("default").List(bg, metav1.ListOptions{})
		return err == nil && len(all.Items) == 0
	})
}

func TestSlowStartBatch(t *testing.T) {
	var calls atomic.Int32
	ok := func(context.Context) error { calls.Add(1); return nil }
	if n, err := slowStartBatch(t.Context(), 10, ok); n != 10 || err != nil || calls.Load() != 10 {
		t.Fatalf("all succeed: %d, %v, %d calls", n, err, calls.Load())
	}
	// The 4th call fails: batches 1 and 2 succeed (3 calls), the batch of 4 runs whole and stops the rest.
	calls.Store(0)
	failing := func(context.Context) error {
		if calls.Add(1) == 4 {
			return errors.New("refused")
		}
		return nil
	}
	n, err := slowStartBatch(t.Context(), 100, failing)
	if err == nil || n != 6 || calls.Load() != 7 {
		t.Fatalf("a failure: %d succeeded, %v, %d calls; want 6, refused, 7", n, err, calls.Load())
	}
}
