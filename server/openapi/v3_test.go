package openapi

import (
	"strings"
	"testing"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func v3Root(t *testing.T, s *Spec) (openapi.Client, openapi3.Root) {
	t.Helper()
	client := newDiscovery(t, newTestServer(t, s)).OpenAPIV3()
	return client, openapi3.NewRoot(client)
}

func gvSpec(t *testing.T, root openapi3.Root, gv schema.GroupVersion) *spec3.OpenAPI {
	t.Helper()
	doc, err := root.GVSpec(gv)
	if err != nil {
		t.Fatalf("GVSpec(%v): %v", gv, err)
	}
	return doc
}

// resolve follows a reference, direct or in a single-element allOf, to a component schema.
func resolve(t *testing.T, doc *spec3.OpenAPI, s spec.Schema) *spec.Schema {
	t.Helper()
	ref := s.Ref.String()
	if ref == "" && len(s.AllOf) == 1 {
		ref = s.AllOf[0].Ref.String()
	}
	name, ok := strings.CutPrefix(ref, componentsPrefix)
	target := doc.Components.Schemas[name]
	if !ok || target == nil {
		t.Fatalf("reference %q does not resolve", ref)
	}
	return target
}

// TestV3ForClientGo reads the documents through client-go's openapi and openapi3 packages, as kubectl explain
// does, from a server whose API lives under a path prefix.
func TestV3ForClientGo(t *testing.T) {
	client, root := v3Root(t, testSpec(t))
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]schema.GroupVersion{appsv1.SchemeGroupVersion, corev1.SchemeGroupVersion}, gvs); diff != "" {
		t.Errorf("GroupVersions (-want +got):\n%s", diff)
	}
	paths, err := client.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if u := paths["apis/apps/v1"].ServerRelativeURL(); !strings.HasPrefix(u, "/openapi/v3/apis/apps/v1?hash=") {
		t.Errorf("apps/v1 URL = %q, want it under the client's prefix with a hash", u)
	}

	doc := gvSpec(t, root, appsv1.SchemeGroupVersion)
	deployment := doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"]
	if deployment == nil {
		t.Fatal("no io.k8s.api.apps.v1.Deployment")
	}
	want := []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}}
	if diff := cmp.Diff(want, deployment.Extensions[extGVK]); diff != "" {
		t.Errorf("Deployment %s (-want +got):\n%s", extGVK, diff)
	}
	deploymentSpec := resolve(t, doc, deployment.Properties["spec"])
	replicas := deploymentSpec.Properties["replicas"]
	if got, want := replicas.Description, (appsv1.DeploymentSpec{}).SwaggerDoc()["replicas"]; got != want || got == "" {
		t.Errorf("spec.replicas description = %q, want %q", got, want)
	}
	if !replicas.Type.Contains("integer") || replicas.Format != "int32" {
		t.Errorf("spec.replicas = %v %q", replicas.Type, replicas.Format)
	}
	if _, ok := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]; !ok {
		t.Error("no /scale path")
	}
	for path := range doc.Paths.Paths {
		if !strings.HasPrefix(path, "/apis/apps/v1/") {
			t.Errorf("apps/v1 document has path %s", path)
		}
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.core.v1.ConfigMap"]; ok {
		t.Error("apps/v1 document has core/v1 ConfigMap, which none of its paths reach")
	}
}

// TestV3Protobuf fetches a group version's document in gnostic protobuf form.
func TestV3Protobuf(t *testing.T) {
	client, _ := v3Root(t, testSpec(t))
	paths, err := client.Paths()
	if err != nil {
		t.Fatal(err)
	}
	data, err := paths["api/v1"].Schema(openapi.ContentTypeOpenAPIV3PB)
	if err != nil {
		t.Fatal(err)
	}
	var doc openapi_v3.Document
	if err := proto.Unmarshal(data, &doc); err != nil {
		t.Fatalf("unmarshal protobuf: %v", err)
	}
	found := false
	for _, s := range doc.GetComponents().GetSchemas().GetAdditionalProperties() {
		found = found || s.GetName() == "io.k8s.api.core.v1.Pod"
	}
	if doc.GetOpenapi() != "3.0.0" || !found {
		t.Errorf("protobuf document: openapi %q, Pod found %v", doc.GetOpenapi(), found)
	}
}

// TestV3PatchHasFieldValidation checks what kubectl's QueryParamVerifierV3 checks before it leaves field
// validation to the server: every PATCH operation of a kind lists fieldValidation among its own parameters.
func TestV3PatchHasFieldValidation(t *testing.T) {
	_, root := v3Root(t, testSpec(t))
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Namespace"),
		corev1.SchemeGroupVersion.WithKind("ConfigMap"), appsv1.SchemeGroupVersion.WithKind("Deployment"),
	} {
		doc := gvSpec(t, root, gvk.GroupVersion())
		patches := 0
		for path, item := range doc.Paths.Paths {
			op := item.Patch
			if op == nil {
				continue
			}
			var opGVK map[string]string
			if err := op.Extensions.GetObject(extGVK, &opGVK); err != nil {
				t.Fatalf("%s PATCH %s: %v", path, extGVK, err)
			}
			if opGVK["group"] != gvk.Group || opGVK["version"] != gvk.Version || opGVK["kind"] != gvk.Kind {
				continue
			}
			patches++
			if !hasParam(op.Parameters, "fieldValidation") {
				t.Errorf("%s PATCH lacks fieldValidation", path)
			}
			if op.RequestBody == nil || op.RequestBody.Content["application/apply-patch+yaml"] == nil {
				t.Errorf("%s PATCH does not take apply patches", path)
			}
		}
		if patches == 0 {
			t.Errorf("no PATCH operation for %v", gvk)
		}
	}
}

func hasParam(params []*spec3.Parameter, name string) bool {
	for _, p := range params {
		if p.Name == name {
			return true
		}
	}
	return false
}

// TestV3ResourceOperations checks the operations of a resource with every verb and both subresources.
func TestV3ResourceOperations(t *testing.T) {
	_, root := v3Root(t, testSpec(t))
	doc := gvSpec(t, root, appsv1.SchemeGroupVersion)
	want := map[string][]string{
		"/apis/apps/v1/":            {"get getAppsV1APIResources"},
		"/apis/apps/v1/deployments": {"get listAppsV1DeploymentForAllNamespaces list"},
		"/apis/apps/v1/namespaces/{namespace}/deployments": {
			"get listAppsV1NamespacedDeployment list", "post createAppsV1NamespacedDeployment post",
			"delete deleteAppsV1CollectionNamespacedDeployment deletecollection"},
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": {
			"get readAppsV1NamespacedDeployment get", "put replaceAppsV1NamespacedDeployment put",
			"patch patchAppsV1NamespacedDeployment patch", "delete deleteAppsV1NamespacedDeployment delete"},
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status": {
			"get readAppsV1NamespacedDeploymentStatus get", "put replaceAppsV1NamespacedDeploymentStatus put",
			"patch patchAppsV1NamespacedDeploymentStatus patch"},
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale": {
			"get readAppsV1NamespacedDeploymentScale get", "put replaceAppsV1NamespacedDeploymentScale put",
			"patch patchAppsV1NamespacedDeploymentScale patch"},
	}
	got := map[string][]string{}
	for path, item := range doc.Paths.Paths {
		for _, m := range []struct {
			method string
			op     *spec3.Operation
		}{{"get", item.Get}, {"post", item.Post}, {"put", item.Put}, {"patch", item.Patch}, {"delete", item.Delete}} {
			if m.op != nil {
				action, _ := m.op.Extensions[extAction].(string)
				got[path] = append(got[path], strings.TrimSpace(m.method+" "+m.op.OperationId+" "+action))
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	// Services do not serve deletecollection in testRegistry.
	core := gvSpec(t, root, corev1.SchemeGroupVersion)
	if core.Paths.Paths["/api/v1/namespaces/{namespace}/services"].Delete != nil {
		t.Error("services has a deletecollection operation it does not serve")
	}
}
