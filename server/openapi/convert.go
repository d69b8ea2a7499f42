package openapi

import (
	"strings"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

const componentsPrefix = "#/components/schemas/"

// transform returns a copy of s with f applied to s and every schema nested in it, innermost first. Nested maps and
// slices are copied; s itself is not modified.
func transform(s spec.Schema, f func(spec.Schema) spec.Schema) spec.Schema {
	if s.Properties != nil {
		props := make(map[string]spec.Schema, len(s.Properties))
		for k, p := range s.Properties {
			props[k] = transform(p, f)
		}
		s.Properties = props
	}
	if s.Items != nil && s.Items.Schema != nil {
		items := transform(*s.Items.Schema, f)
		s.Items = &spec.SchemaOrArray{Schema: &items}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		values := transform(*s.AdditionalProperties.Schema, f)
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &values}
	}
	s.AllOf = transformAll(s.AllOf, f)
	s.OneOf = transformAll(s.OneOf, f)
	return f(s)
}

func transformAll(list []spec.Schema, f func(spec.Schema) spec.Schema) []spec.Schema {
	if list == nil {
		return nil
	}
	out := make([]spec.Schema, len(list))
	for i, s := range list {
		out[i] = transform(s, f)
	}
	return out
}

// visitRefs calls fn with the definition name of every reference in s.
func visitRefs(s *spec.Schema, fn func(name string)) {
	if ref := s.Ref.String(); ref != "" {
		fn(refName(ref))
	}
	for _, p := range s.Properties {
		visitRefs(&p, fn)
	}
	if s.Items != nil && s.Items.Schema != nil {
		visitRefs(s.Items.Schema, fn)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		visitRefs(s.AdditionalProperties.Schema, fn)
	}
	for i := range s.AllOf {
		visitRefs(&s.AllOf[i], fn)
	}
	for i := range s.OneOf {
		visitRefs(&s.OneOf[i], fn)
	}
}

func refName(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

// closure returns the names of the definitions roots refer to, directly or through other definitions.
func closure(defs map[string]*spec.Schema, roots []string) map[string]bool {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if d, ok := defs[name]; ok {
			visitRefs(d, visit)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return seen
}

// pruneDefault drops a schema's default: the published v2 document has none, as in Kubernetes, because
// Swagger 2.0 clients validate defaults differently.
func pruneDefault(s spec.Schema) spec.Schema {
	s.Default = nil
	return s
}

// toV3Ref rewrites a reference for OpenAPI 3.0: it points into components/schemas, and a reference with
// siblings (description, default, extensions) is wrapped in a single-element allOf, since OpenAPI 3.0 ignores
// the siblings of $ref.
func toV3Ref(s spec.Schema) spec.Schema {
	ref := s.Ref.String()
	if ref == "" {
		return s
	}
	target := spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(componentsPrefix + refName(ref))}}
	if s.Description == "" && s.Default == nil && len(s.Extensions) == 0 && !s.Nullable {
		return target
	}
	s.Ref = spec.Ref{}
	s.AllOf = []spec.Schema{target}
	return s
}

// v3Definition converts a canonical definition to its OpenAPI 3.0 form: references rewritten and scalar types
// with alternatives (Quantity, IntOrString) described by oneOf.
// Conversions are kept in b, as most definitions are in several documents.
func v3Definition(b *builder, name string) *spec.Schema {
	if s, ok := b.v3[name]; ok {
		return s
	}
	s := transform(*b.defs[name], toV3Ref)
	if types, ok := b.oneOf[name]; ok {
		s.Type = nil
		s.OneOf = make([]spec.Schema, len(types))
		for i, t := range types {
			s.OneOf[i] = primitive(t, "")
		}
	}
	b.v3[name] = &s
	return &s
}
