package openapi

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

func typeConverter(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	tc, err := managedfields.NewTypeConverter(testSpec(t).Models(), false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	return tc
}

func testPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func toTyped(t *testing.T, tc managedfields.TypeConverter, obj runtime.Object) *typed.TypedValue {
	t.Helper()
	tv, err := tc.ObjectToTyped(obj)
	if err != nil {
		t.Fatalf("ObjectToTyped(%T): %v", obj, err)
	}
	return tv
}

func TestTypeConverterConvertsObjects(t *testing.T) {
	tc := typeConverter(t)
	// A port without protocol needs the protocol default ("TCP") of the list's second key.
	toTyped(t, tc, testPod(corev1.Container{Name: "app", Image: "nginx",
		Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 80, Protocol: corev1.ProtocolUDP}}}))
	replicas := int32(3)
	toTyped(t, tc, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: testPod(corev1.Container{Name: "app", Image: "nginx"}).Spec},
		},
	})
}

func TestTypeConverterRejectsDuplicateListKeys(t *testing.T) {
	tc := typeConverter(t)
	_, err := tc.ObjectToTyped(testPod(corev1.Container{Name: "app"}, corev1.Container{Name: "app"}))
	if err == nil {
		t.Fatal("two containers named app converted; containers is a map list keyed by name")
	}
}

// TestTypeConverterMergesByKey checks the list semantics server-side apply gets: containers merge by name, and
// command, an atomic list, is replaced whole.
func TestTypeConverterMergesByKey(t *testing.T) {
	tc := typeConverter(t)
	live := toTyped(t, tc, testPod(corev1.Container{Name: "app", Image: "nginx", Command: []string{"a", "b"}}))
	applied := toTyped(t, tc, testPod(
		corev1.Container{Name: "app", Command: []string{"c"}},
		corev1.Container{Name: "sidecar", Image: "envoy"}))
	merged, err := live.Merge(applied)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(
		obj.(runtime.Unstructured).UnstructuredContent(), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers
	if len(c) != 2 || c[0].Name != "app" || c[0].Image != "nginx" || len(c[0].Command) != 1 || c[1].Name != "sidecar" {
		t.Errorf("merged containers = %+v, want app (image nginx, command [c]) and sidecar", c)
	}
	set, err := applied.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	path := fieldpath.MakePathOrDie("spec", "containers", fieldpath.KeyByFields("name", "sidecar"), "image")
	if !set.Has(path) {
		t.Errorf("field set %v lacks %v", set, path)
	}
}
