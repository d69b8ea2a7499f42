package rbac

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeRestrictionPodStatus is the unit half of issue 34 item 12: through pods/status a node could relabel
// its pod (and so draw a Service's traffic), or change its finalizers and annotations. A node may change the
// status of its pod and nothing of its metadata; anyone else may (upstream's status strategy allows it).
func TestNodeRestrictionPodStatus(t *testing.T) {
	stored := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", ResourceVersion: "7",
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}, Finalizers: []string{"example.com/keep"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u1"}}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	change := func(f func(p *corev1.Pod)) *corev1.Pod {
		p := stored.DeepCopy()
		p.ResourceVersion = ""
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Subresource: "status"}}
		f(p)
		return p
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		forbid string // "" for allowed, else what the message names
	}{
		{"status", change(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.PodIP = corev1.PodRunning, "10.244.1.5"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), ""},
		{"add a label", change(func(p *corev1.Pod) { p.Labels["tier"] = "db" }), "labels"},
		{"change a label", change(func(p *corev1.Pod) { p.Labels["app"] = "payments" }), "labels"},
		{"drop the labels", change(func(p *corev1.Pod) { p.Labels = nil }), "labels"},
		{"annotations", change(func(p *corev1.Pod) { p.Annotations["note"] = "y" }), "annotations"},
		{"remove finalizers", change(func(p *corev1.Pod) { p.Finalizers = nil }), "finalizers"},
		{"add a finalizer", change(func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, "x/y") }), "finalizers"},
		{"owner references", change(func(p *corev1.Pod) { p.OwnerReferences = nil }), "owner references"},
		{"generateName", change(func(p *corev1.Pod) { p.GenerateName = "x-" }), "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckNodeRestriction("system:node:n1", []string{NodesGroup}, "UPDATE", tc.pod, stored)
			switch {
			case tc.forbid == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.forbid != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot update "+tc.forbid)):
				t.Fatalf("err = %v, want forbidden naming %s", err, tc.forbid)
			}
			if err := CheckNodeRestriction("admin@localhost", nil, "UPDATE", tc.pod, stored); err != nil {
				t.Errorf("a user is refused: %v", err)
			}
		})
	}
	if err := CheckNodeRestriction("system:node:n1", []string{NodesGroup}, "CREATE", stored, nil); !apierrors.IsForbidden(err) {
		t.Errorf("a node creating a pod: %v, want forbidden", err)
	}
}
