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
