package openapi

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// testRegistry serves pods (with /status), configmaps, services (with /status), namespaces (cluster-scoped) and
// deployments (with /status and /scale).
func testRegistry(t testing.TB) *resources.Registry {
	t.Helper()
	reg, err := resources.New(
		&resources.Resource{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Namespaced: true,
			Status: true, New: func() runtime.Object { return &corev1.Pod{} },
			NewList: func() runtime.Object { return &corev1.PodList{} }},
		&resources.Resource{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Plural: "configmaps",
			Namespaced: true, New: func() runtime.Object { return &corev1.ConfigMap{} },
			NewList: func() runtime.Object { return &corev1.ConfigMapList{} }},
		&resources.Resource{GVK: corev1.SchemeGroupVersion.WithKind("Service"), Plural: "services",
			Namespaced: true, Status: true, New: func() runtime.Object { return &corev1.Service{} },
			NewList: func() runtime.Object { return &corev1.ServiceList{} },
			Verbs:   []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
		&resources.Resource{GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Plural: "namespaces",
			Status: true, New: func() runtime.Object { return &corev1.Namespace{} },
			NewList: func() runtime.Object { return &corev1.NamespaceList{} }},
		&resources.Resource{GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Plural: "deployments",
			Namespaced: true, Status: true, New: func() runtime.Object { return &appsv1.Deployment{} },
			NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
			Scale: &resources.Scale{
				Get:    func(runtime.Object) autoscalingv1.ScaleSpec { return autoscalingv1.ScaleSpec{} },
				Status: func(runtime.Object) autoscalingv1.ScaleStatus { return autoscalingv1.ScaleStatus{} },
				Set:    func(runtime.Object, int32) {},
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// testSpec builds the Spec of testRegistry.
func testSpec(t testing.TB) *Spec {
	t.Helper()
	s, err := Build(testRegistry(t), "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
