package openapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// TestEphemeralContainersPaths: pods/ephemeralcontainers is in the document with upstream's operation IDs
// (clients generated from upstream's document call these).
func TestEphemeralContainersPaths(t *testing.T) {
	s, err := Build(resources.Default(), "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	_, root := v3Root(t, s)
	doc := gvSpec(t, root, corev1.SchemeGroupVersion)
	item := doc.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}/ephemeralcontainers"]
	if item == nil {
		t.Fatal("no path for pods/ephemeralcontainers")
	}
	for method, want := range map[string]string{"get": "readCoreV1NamespacedPodEphemeralcontainers",
		"put": "replaceCoreV1NamespacedPodEphemeralcontainers", "patch": "patchCoreV1NamespacedPodEphemeralcontainers"} {
		op := map[string]string{"get": opID(item.Get), "put": opID(item.Put), "patch": opID(item.Patch)}[method]
		if op != want {
			t.Errorf("%s: operation %q, want %q", method, op, want)
		}
	}
	if item.Post != nil || item.Delete != nil {
		t.Error("pods/ephemeralcontainers documents a create or a delete")
	}
}

func opID(op *spec3.Operation) string {
	if op == nil {
		return ""
	}
	return op.OperationId
}
