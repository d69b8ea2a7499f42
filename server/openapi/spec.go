package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// Definition names of the meta types every document uses.
var (
	nameStatus          = modelName(reflect.TypeFor[metav1.Status]())
	nameDeleteOptions   = modelName(reflect.TypeFor[metav1.DeleteOptions]())
	namePatch           = modelName(reflect.TypeFor[metav1.Patch]())
	nameAPIResourceList = modelName(reflect.TypeFor[metav1.APIResourceList]())
	scaleGVK            = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
)

// Spec is the OpenAPI description of a registry's resources: the v2 document, one v3 document per group version
// and the models server-side apply reads. It is immutable once built and safe for concurrent use.
type Spec struct {
	models map[string]*spec.Schema
	v2     *document
	v3     map[string]*document // by group version path: "api/v1", "apis/apps/v1"
}

// Build describes every resource of reg. version is the API server version the documents report in
// info.version ("v1.37.2"). Build fails only when a type cannot be described (two Go types with one definition
// name, a field of a kind JSON cannot carry); for the k8s.io/api types it does not fail.
func Build(reg *resources.Registry, version string) (*Spec, error) {
	b := newBuilder()
	names := map[*resources.Resource]resourceNames{}
	for _, r := range reg.All() {
		n := resourceNames{kind: b.define(deref(reflect.TypeOf(r.New())))}
		addGVK(b.defs[n.kind], r.GVK)
		if r.NewList != nil {
			n.list = b.define(deref(reflect.TypeOf(r.NewList())))
			addGVK(b.defs[n.list], r.GVK.GroupVersion().WithKind(r.GVK.Kind+"List"))
		}
		if r.Scale != nil {
			n.scale = b.define(reflect.TypeFor[autoscalingv1.Scale]())
		}
		names[r] = n
	}
	if err := defineMeta(b, reg.GroupVersions()); err != nil {
		return nil, err
	}
	if scale, ok := b.defs[modelName(reflect.TypeFor[autoscalingv1.Scale]())]; ok {
		addGVK(scale, scaleGVK)
	}
	s := &Spec{models: b.defs, v3: map[string]*document{}}
	var all []route
	for _, gv := range reg.GroupVersions() {
		routes := groupRoutes(gv, reg.InGroupVersion(gv), names)
		all = append(all, routes...)
		doc, err := v3Document(b, routes, version)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", gvPath(gv), err)
		}
		s.v3[gvPath(gv)] = doc
	}
	doc, err := v2Document(b, all, version)
	if err != nil {
		return nil, fmt.Errorf("openapi: v2: %w", err)
	}
	s.v2 = doc
	return s, nil
}

// defineMeta adds the meta.k8s.io types the operations use, with the kinds Kubernetes gives them: Status is
// core/v1's, DeleteOptions and WatchEvent are every served group version's.
func defineMeta(b *builder, gvs []schema.GroupVersion) error {
	addGVK(b.defs[b.define(reflect.TypeFor[metav1.Status]())], schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	sorted := slices.Clone(gvs)
	slices.SortFunc(sorted, func(a, b schema.GroupVersion) int {
		return strings.Compare(a.Group+"/"+a.Version, b.Group+"/"+b.Version)
	})
	for _, t := range []reflect.Type{reflect.TypeFor[metav1.DeleteOptions](), reflect.TypeFor[metav1.WatchEvent]()} {
		def := b.defs[b.define(t)]
		for _, gv := range sorted {
			addGVK(def, gv.WithKind(t.Name()))
		}
	}
	b.define(reflect.TypeFor[metav1.Patch]())
	b.define(reflect.TypeFor[metav1.APIResourceList]())
	return b.err
}

// addGVK appends gvk to a definition's x-kubernetes-group-version-kind list, in the generic form
// ([]any of map[string]any) that the type converter and kubectl read.
func addGVK(s *spec.Schema, gvk schema.GroupVersionKind) {
	list, _ := s.Extensions[extGVK].([]any)
	for _, v := range list {
		if m := v.(map[string]any); m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
			return
		}
	}
	s.AddExtension(extGVK, append(list, gvkMap(gvk)))
}

func gvkMap(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

// Models returns every definition by name, in Swagger 2.0 form ("#/definitions/NAME" references) with the
// defaults the published v2 document leaves out: the input managedfields.NewTypeConverter expects. The caller
// must not modify it.
func (s *Spec) Models() map[string]*spec.Schema { return s.models }

// GroupVersions returns the paths of the v3 documents ("api/v1", "apis/apps/v1"), sorted.
func (s *Spec) GroupVersions() []string {
	paths := make([]string, 0, len(s.v3))
	for p := range s.v3 {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}
