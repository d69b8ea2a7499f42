package controllers

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestNamespaceDeletionEmptiesThenRemovesIt(t *testing.T) {
	d := newDeps(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	cs := admin(t, d, "c1")
	bg := t.Context()
	for _, ns := range []string{"doomed", "held"} {
		if _, err := cs.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	if _, err := cs.AppsV1().Deployments("doomed").Create(bg, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := cs.CoreV1().ConfigMaps("doomed").Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Pods("doomed").Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A finalizer someone else owns holds its namespace until it is removed.
	if _, err := cs.CoreV1().ConfigMaps("held").Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep",
		Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"doomed", "held"} {
		if err := cs.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(ns string) func() bool {
		return func() bool {
			_, err := cs.CoreV1().Namespaces().Get(bg, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	eventually(t, "namespace doomed removed", gone("doomed"))
	if l, err := cs.CoreV1().ConfigMaps("doomed").List(bg, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("configmaps left in a removed namespace: %v %v", l, err)
	}
	if l, err := cs.AppsV1().Deployments("doomed").List(bg, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("deployments left: %v %v", l, err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(bg, "held", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("held namespace: %v %v", ns, err)
	}
	if _, err := cs.CoreV1().ConfigMaps("held").Patch(bg, "keep", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace held removed after its last finalizer", gone("held"))
}

// TestNamespaceDeletesPodsFirst: while a pod of a terminating namespace remains (a finalizer holds it), the rest
// of the namespace's content stays, and the namespace's conditions say what remains and why (upstream's ordered
// namespace deletion; the conformance suite's OrderedNamespaceDeletion test reads the conditions).
func TestNamespaceDeletesPodsFirst(t *testing.T) {
	d := newDeps(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	cs := admin(t, d, "c1")
	bg := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ordered"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ordered").Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ordered").Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "used"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(bg, "ordered", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cond := func(ns *corev1.Namespace, typ corev1.NamespaceConditionType) *corev1.NamespaceCondition {
		for i := range ns.Status.Conditions {
			if ns.Status.Conditions[i].Type == typ {
				return &ns.Status.Conditions[i]
			}
		}
		return nil
	}
	var ns *corev1.Namespace
	eventually(t, "the namespace reports the pod its finalizer holds", func() bool {
		var err error
		ns, err = cs.CoreV1().Namespaces().Get(bg, "ordered", metav1.GetOptions{})
		c := func(typ corev1.NamespaceConditionType) *corev1.NamespaceCondition {
			if err != nil {
				return nil
			}
			return cond(ns, typ)
		}
		f := c(corev1.NamespaceFinalizersRemaining)
		return f != nil && f.Status == corev1.ConditionTrue && c(corev1.NamespaceDeletionContentFailure) != nil
	})
	want := map[corev1.NamespaceConditionType]struct {
		status corev1.ConditionStatus
		reason string
	}{
		corev1.NamespaceDeletionDiscoveryFailure: {corev1.ConditionFalse, "ResourcesDiscovered"},
		corev1.NamespaceDeletionGVParsingFailure: {corev1.ConditionFalse, "ParsedGroupVersions"},
		corev1.NamespaceDeletionContentFailure:   {corev1.ConditionFalse, "ContentDeleted"},
		corev1.NamespaceContentRemaining:         {corev1.ConditionTrue, "SomeResourcesRemain"},
		corev1.NamespaceFinalizersRemaining:      {corev1.ConditionTrue, "SomeFinalizersRemain"},
	}
	for typ, w := range want {
		c := cond(ns, typ)
		if c == nil || c.Status != w.status || c.Reason != w.reason || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s = %+v, want status %s reason %s", typ, c, w.status, w.reason)
		}
	}
	if c := cond(ns, corev1.NamespaceFinalizersRemaining); c != nil && c.Message != "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances" {
		t.Errorf("FinalizersRemaining message = %q", c.Message)
	}
	if c := cond(ns, corev1.NamespaceContentRemaining); c != nil && c.Message != "Some resources are remaining: pods has 1 resource instances" {
		t.Errorf("ContentRemaining message = %q", c.Message)
	}
	// The pass that wrote those conditions found the pod remaining and left the rest alone: the ConfigMap the pod
	// may use is still there.
	if _, err := cs.CoreV1().ConfigMaps("ordered").Get(bg, "used", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap went before the pod: %v", err)
	}
	if p, err := cs.CoreV1().Pods("ordered").Get(bg, "p", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("the pod is not being deleted: %v %v", p, err)
	}
	if _, err := cs.CoreV1().Pods("ordered").Patch(bg, "p", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace removed once its pod is gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(bg, "ordered", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
