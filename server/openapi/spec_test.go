package openapi

import (
	"bytes"
	"reflect"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// def returns a model or fails the test.
func def(t *testing.T, s *Spec, name string) *spec.Schema {
	t.Helper()
	d, ok := s.Models()[name]
	if !ok {
		t.Fatalf("no definition %s", name)
	}
	return d
}

// prop returns a property of a model or fails the test.
func prop(t *testing.T, s *Spec, name, field string) spec.Schema {
	t.Helper()
	p, ok := def(t, s, name).Properties[field]
	if !ok {
		t.Fatalf("%s has no property %s", name, field)
	}
	return p
}

func TestDefinitionNames(t *testing.T) {
	s := testSpec(t)
	for _, name := range []string{
		"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.core.v1.PodSpec",
		"io.k8s.api.apps.v1.Deployment", "io.k8s.api.autoscaling.v1.Scale",
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
		"io.k8s.apimachinery.pkg.api.resource.Quantity", "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
		"io.k8s.apimachinery.pkg.runtime.RawExtension", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
		"io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
		"io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
	} {
		def(t, s, name)
	}
}

func TestModelNameWithoutGeneratedName(t *testing.T) {
	type Widget struct{}
	if got, want := modelName(reflect.TypeFor[Widget]()),
		"com.github.wheelhouse-dev.wheelhouse.server.openapi.Widget"; got != want {
		t.Errorf("modelName = %q, want %q", got, want)
	}
}

func TestGroupVersionKinds(t *testing.T) {
	s := testSpec(t)
	for name, want := range map[string][]any{
		"io.k8s.api.core.v1.Pod":                      {gvkMap(corev1.SchemeGroupVersion.WithKind("Pod"))},
		"io.k8s.api.apps.v1.DeploymentList":           {map[string]any{"group": "apps", "version": "v1", "kind": "DeploymentList"}},
		"io.k8s.api.autoscaling.v1.Scale":             {map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.Status": {map[string]any{"group": "", "version": "v1", "kind": "Status"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions": {
			map[string]any{"group": "", "version": "v1", "kind": "DeleteOptions"},
			map[string]any{"group": "apps", "version": "v1", "kind": "DeleteOptions"},
		},
		"io.k8s.api.core.v1.PodSpec": nil,
	} {
		got, _ := def(t, s, name).Extensions[extGVK].([]any)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", name, extGVK, diff)
		}
	}
}

func TestFieldSchemas(t *testing.T) {
	s := testSpec(t)
	tests := []struct {
		name, def, field string
		check            func(spec.Schema) bool
	}{
		{"ref with description", "io.k8s.api.core.v1.Pod", "spec", func(p spec.Schema) bool {
			return p.Ref.String() == "#/definitions/io.k8s.api.core.v1.PodSpec" && p.Description != ""
		}},
		{"inlined TypeMeta", "io.k8s.api.core.v1.Pod", "apiVersion", func(p spec.Schema) bool {
			return p.Type.Contains("string") && p.Description != ""
		}},
		{"int32", "io.k8s.api.apps.v1.DeploymentSpec", "replicas", func(p spec.Schema) bool {
			return p.Type.Contains("integer") && p.Format == "int32"
		}},
		{"int64", "io.k8s.api.core.v1.PodSpec", "activeDeadlineSeconds", func(p spec.Schema) bool {
			return p.Type.Contains("integer") && p.Format == "int64"
		}},
		{"map of strings", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "labels", func(p spec.Schema) bool {
			return p.Type.Contains("object") && p.AdditionalProperties.Schema.Type.Contains("string")
		}},
		{"bytes", "io.k8s.api.core.v1.ConfigMap", "binaryData", func(p spec.Schema) bool {
			v := p.AdditionalProperties.Schema
			return v.Type.Contains("string") && v.Format == "byte"
		}},
		{"map of quantities", "io.k8s.api.core.v1.ResourceRequirements", "limits", func(p spec.Schema) bool {
			return p.AdditionalProperties.Schema.Ref.String() == "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"
		}},
		{"time", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp", func(p spec.Schema) bool {
			return p.Ref.String() == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time" && p.Default == nil
		}},
		{"enum", "io.k8s.api.core.v1.ContainerPort", "protocol", func(p spec.Schema) bool {
			return cmp.Equal(p.Enum, []any{"SCTP", "TCP", "UDP"}) && p.Default == "TCP"
		}},
		{"struct default", "io.k8s.api.core.v1.Pod", "spec", func(p spec.Schema) bool {
			return cmp.Equal(p.Default, map[string]any{})
		}},
		{"zero default", "io.k8s.api.core.v1.Container", "name", func(p spec.Schema) bool { return p.Default == "" }},
		{"patch strategy", "io.k8s.api.core.v1.PodSpec", "containers", func(p spec.Schema) bool {
			return p.Extensions[extPatchStrategy] == "merge" && p.Extensions[extPatchMergeKey] == "name"
		}},
		{"list map keys", "io.k8s.api.core.v1.Container", "ports", func(p spec.Schema) bool {
			return p.Extensions[extListType] == "map" &&
				cmp.Equal(p.Extensions[extListMapKeys], []any{"containerPort", "protocol"})
		}},
		{"service ports", "io.k8s.api.core.v1.ServiceSpec", "ports", func(p spec.Schema) bool {
			return cmp.Equal(p.Extensions[extListMapKeys], []any{"port", "protocol"})
		}},
		{"set", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", func(p spec.Schema) bool {
			return p.Extensions[extListType] == "set"
		}},
		{"atomic list", "io.k8s.api.core.v1.Container", "command", func(p spec.Schema) bool {
			return p.Extensions[extListType] == "atomic"
		}},
		{"atomic map", "io.k8s.api.core.v1.PodSpec", "nodeSelector", func(p spec.Schema) bool {
			return p.Extensions[extMapType] == "atomic"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p := prop(t, s, tt.def, tt.field); !tt.check(p) {
				t.Errorf("%s.%s = %#v", tt.def, tt.field, p)
			}
		})
	}
}

func TestScalarDefinitions(t *testing.T) {
	s := testSpec(t)
	for name, want := range map[string][2]string{
		"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"string", ""},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"string", "int-or-string"},
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       {"string", "date-time"},
		"io.k8s.apimachinery.pkg.runtime.RawExtension":    {"object", ""},
	} {
		d := def(t, s, name)
		if !d.Type.Contains(want[0]) || d.Format != want[1] || len(d.Properties) != 0 {
			t.Errorf("%s: type %v format %q properties %d, want %s %q none", name, d.Type, d.Format,
				len(d.Properties), want[0], want[1])
		}
	}
	if def(t, s, "io.k8s.apimachinery.pkg.util.intstr.IntOrString").Extensions[extIntOrString] != true {
		t.Errorf("IntOrString lacks %s", extIntOrString)
	}
	if def(t, s, "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector").Extensions[extMapType] != "atomic" {
		t.Errorf("LabelSelector is not %s: atomic", extMapType)
	}
}

func TestRequired(t *testing.T) {
	s := testSpec(t)
	for name, want := range map[string][]string{
		"io.k8s.api.core.v1.Pod":                          nil,
		"io.k8s.api.core.v1.PodSpec":                      {"containers"},
		"io.k8s.api.core.v1.Container":                    {"name"},
		"io.k8s.api.core.v1.ContainerPort":                {"containerPort"},
		"io.k8s.api.apps.v1.DeploymentSpec":               {"selector", "template"},
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": nil,
		"io.k8s.api.core.v1.ServicePort":                  {"port"},
		// type and status are +optional without omitempty: not required, as upstream.
		"io.k8s.api.apps.v1.DeploymentCondition": nil,
		// spec is +required with omitempty: required, as upstream.
		"io.k8s.api.apps.v1.Deployment": {"spec"},
	} {
		if diff := cmp.Diff(want, def(t, s, name).Required); diff != "" {
			t.Errorf("%s required (-want +got):\n%s", name, diff)
		}
	}
}

func TestDescriptions(t *testing.T) {
	s := testSpec(t)
	if got, want := def(t, s, "io.k8s.api.core.v1.Pod").Description, (corev1.Pod{}).SwaggerDoc()[""]; got != want {
		t.Errorf("Pod description = %q, want %q", got, want)
	}
	if got, want := prop(t, s, "io.k8s.api.core.v1.PodSpec", "containers").Description,
		(corev1.PodSpec{}).SwaggerDoc()["containers"]; got != want || got == "" {
		t.Errorf("PodSpec.containers description = %q, want %q", got, want)
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	a, b := testSpec(t), testSpec(t)
	if !bytes.Equal(a.v2.json.body, b.v2.json.body) {
		t.Error("two builds wrote different v2 documents")
	}
	for gv, doc := range a.v3 {
		if doc.hash != b.v3[gv].hash {
			t.Errorf("two builds wrote different %s documents", gv)
		}
	}
}

func TestV3DocumentsHoldTheirGroupVersion(t *testing.T) {
	s := testSpec(t)
	if diff := cmp.Diff([]string{"api/v1", "apis/apps/v1"}, s.GroupVersions()); diff != "" {
		t.Errorf("GroupVersions (-want +got):\n%s", diff)
	}
}

// TestDefaultRegistry builds the registry the server serves, whatever kinds it holds, and checks that every
// client reads the result: the type converter takes every kind, and the protobuf forms parse.
func TestDefaultRegistry(t *testing.T) {
	reg := resources.Default()
	s, err := Build(reg, "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(s.Models(), false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	for _, r := range reg.All() {
		obj := r.New()
		name := modelName(reflect.TypeOf(obj).Elem())
		gvks, _ := def(t, s, name).Extensions[extGVK].([]any)
		if !containsGVK(gvks, gvkMap(r.GVK)) {
			t.Errorf("%s lacks %v in %s", name, r.GVK, extGVK)
		}
		obj.GetObjectKind().SetGroupVersionKind(r.GVK)
		if _, err := tc.ObjectToTyped(obj); err != nil {
			t.Errorf("ObjectToTyped(%v): %v", r.GVK, err)
		}
	}
	pb, err := s.v2.proto()
	if err != nil {
		t.Fatalf("v2 protobuf: %v", err)
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(pb.body, &doc); err != nil {
		t.Fatal(err)
	}
	if _, err := openapiproto.NewOpenAPIData(&doc); err != nil {
		t.Errorf("NewOpenAPIData: %v", err)
	}
	for gv, d := range s.v3 {
		if _, err := d.proto(); err != nil {
			t.Errorf("%s protobuf: %v", gv, err)
		}
	}
}

func containsGVK(list []any, gvk map[string]any) bool {
	for _, v := range list {
		if cmp.Equal(v, gvk) {
			return true
		}
	}
	return false
}
