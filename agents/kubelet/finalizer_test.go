package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestDeletedPodKeptByFinalizer: a deleted pod that a finalizer keeps in the API is stopped like any deleted pod,
// and its status says so — containers terminated, a terminal phase — as upstream's kubelet writes before its final
// delete. It stayed "Running" with ready containers, which the conformance test OrderedNamespaceDeletion caught.
func TestDeletedPodKeptByFinalizer(t *testing.T) {
	e := newPodEnv(t)
	p := simple("kept", corev1.RestartPolicyAlways)
	p.Finalizers = []string{"example.com/keep"}
	e.create(p)
	e.until("kept running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "kept")
	if err := e.admin.CoreV1().Pods("default").Delete(t.Context(), "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.until("kept stopped, its status terminal", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) &&
			len(cs) == 1 && cs[0].State.Terminated != nil && !cs[0].Ready
	}, "kept")
	// The finalizer's owner lets go: the object goes.
	if _, err := e.admin.CoreV1().Pods("default").Patch(t.Context(), "kept", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
