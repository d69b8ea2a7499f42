package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// lookupGVK finds the model with a GVK the way kubectl's openapi.Resources does.
func lookupGVK(models proto.Models, gvk schema.GroupVersionKind) proto.Schema {
	for _, name := range models.ListModels() {
		m := models.LookupModel(name)
		list, _ := m.GetExtensions()[extGVK].([]any)
		for _, v := range list {
			var g, ver, k any
			switch e := v.(type) {
			case map[string]any:
				g, ver, k = e["group"], e["version"], e["kind"]
			case map[any]any:
				g, ver, k = e["group"], e["version"], e["kind"]
			}
			if g == gvk.Group && ver == gvk.Version && k == gvk.Kind {
				return m
			}
		}
	}
	return nil
}

// TestV2ProtobufForKubectl reads the v2 document as kubectl does: client-go discovery asks for gnostic protobuf and
// kube-openapi's proto package parses it.
func TestV2ProtobufForKubectl(t *testing.T) {
	doc, err := newDiscovery(t, newTestServer(t, testSpec(t))).OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("NewOpenAPIData: %v", err)
	}
	pod, ok := lookupGVK(models, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}).(*proto.Kind)
	if !ok {
		t.Fatal("no Pod kind with its group-version-kind")
	}
	specRef, ok := pod.Fields["spec"].(proto.Reference)
	if !ok || specRef.Reference() != "io.k8s.api.core.v1.PodSpec" || specRef.GetDescription() == "" {
		t.Fatalf("Pod.spec = %#v, want a described reference to PodSpec", pod.Fields["spec"])
	}
	podSpec := specRef.SubSchema().(*proto.Kind)
	containers, ok := podSpec.Fields["containers"].(*proto.Array)
	if !ok {
		t.Fatalf("PodSpec.containers = %#v, want an array", podSpec.Fields["containers"])
	}
	ext := containers.GetExtensions()
	if ext[extPatchStrategy] != "merge" || ext[extPatchMergeKey] != "name" {
		t.Errorf("PodSpec.containers extensions = %v, want patch strategy merge, merge key name", ext)
	}
	if !podSpec.IsRequired("containers") {
		t.Error("PodSpec.containers is not required")
	}
	if lookupGVK(models, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) == nil {
		t.Error("no Deployment kind")
	}
}

// TestV2JSONRoundTrip decodes the JSON document into spec.Swagger and encodes it again, unchanged.
func TestV2JSONRoundTrip(t *testing.T) {
	s := testSpec(t)
	srv := newTestServer(t, s)
	resp, err := http.Get(srv.URL + testPrefix + "/openapi/v2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(body, &sw); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if sw.Swagger != "2.0" || len(sw.Definitions) != len(s.Models()) {
		t.Errorf("swagger %q with %d definitions, want 2.0 with %d", sw.Swagger, len(sw.Definitions), len(s.Models()))
	}
	again, err := json.Marshal(&sw)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("round trip changed the document (-served +re-encoded):\n%s", diff)
	}
	op := sw.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"].Patch
	if op == nil || op.ID != "patchCoreV1NamespacedPod" || op.Extensions[extAction] != "patch" {
		t.Fatalf("pod PATCH operation = %+v", op)
	}
	if diff := cmp.Diff(patchMedia, op.Consumes); diff != "" {
		t.Errorf("PATCH consumes (-want +got):\n%s", diff)
	}
	for _, d := range sw.Definitions {
		for name, p := range d.Properties {
			if p.Default != nil {
				t.Fatalf("property %s has a default; the v2 document has none", name)
			}
		}
	}
}
