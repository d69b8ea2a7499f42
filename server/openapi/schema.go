package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Extension names Kubernetes puts in its OpenAPI schemas.
const (
	extGVK            = "x-kubernetes-group-version-kind"
	extAction         = "x-kubernetes-action"
	extPatchStrategy  = "x-kubernetes-patch-strategy"
	extPatchMergeKey  = "x-kubernetes-patch-merge-key"
	extListType       = "x-kubernetes-list-type"
	extListMapKeys    = "x-kubernetes-list-map-keys"
	extMapType        = "x-kubernetes-map-type"
	extIntOrString    = "x-kubernetes-int-or-string"
	definitionsPrefix = "#/definitions/"
)

// scalarTyper is implemented by the types that serialize as a JSON scalar (Quantity, Time, IntOrString, ...).
type scalarTyper interface {
	OpenAPISchemaType() []string
	OpenAPISchemaFormat() string
}

// oneOfTyper gives a scalar type's alternatives in OpenAPI v3 (Quantity: string or number).
type oneOfTyper interface{ OpenAPIV3OneOfTypes() []string }

// swaggerDocer is implemented by the k8s.io types: field descriptions by JSON name, "" for the type's own.
type swaggerDocer interface{ SwaggerDoc() map[string]string }

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// scalarDocs describe the scalar types, which have no SwaggerDoc.
var scalarDocs = map[string]string{
	"io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity is a fixed-point number with an optional " +
		"suffix, written as a string (\"500m\", \"1.5Gi\", \"2e3\") or a number. Binary suffixes are Ki, Mi, Gi, Ti, " +
		"Pi and Ei; decimal suffixes are m, k, M, G, T, P and E.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time": "Time is a timestamp, written in RFC 3339 form " +
		"(\"2006-01-02T15:04:05Z\") with second precision.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime is a timestamp with microsecond precision, " +
		"written in RFC 3339 form (\"2006-01-02T15:04:05.000000Z\").",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Duration": "Duration is a length of time written as a Go duration " +
		"string (\"1h30m\", \"90s\").",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString holds either an integer or a string " +
		"(a port number or a port name, an absolute number or a percentage).",
}

// builder turns Go types into definitions by reflection. Definitions are kept in their canonical form: Swagger 2.0
// references ("#/definitions/NAME") with description and default beside them, which is what the server-side apply
// type converter reads. The v2 and v3 documents are derived from it.
type builder struct {
	defs  map[string]*spec.Schema
	names map[reflect.Type]string // the types defined so far
	types map[string]reflect.Type // the inverse, to catch two types with one name
	oneOf map[string][]string     // OpenAPI v3 alternatives of scalar definitions
	v3    map[string]*spec.Schema // definitions converted to OpenAPI v3, by v3Definition
	err   error                   // the first failure
}

func newBuilder() *builder {
	return &builder{
		defs:  map[string]*spec.Schema{},
		names: map[reflect.Type]string{},
		types: map[string]reflect.Type{},
		oneOf: map[string][]string{},
		v3:    map[string]*spec.Schema{},
	}
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// isDefinition reports whether a type gets a definition of its own: named structs and named scalar types.
// Other named types (type Protocol string, type ResourceList map[...]...) are written inline, as upstream does.
func isDefinition(t reflect.Type) bool {
	if t.Name() == "" || t == timeType {
		return false
	}
	if _, ok := reflect.Zero(t).Interface().(scalarTyper); ok {
		return true
	}
	return t.Kind() == reflect.Struct
}

// define returns the definition name of t (see isDefinition), building the definition on first use.
func (b *builder) define(t reflect.Type) string {
	if name, ok := b.names[t]; ok {
		return name
	}
	name := modelName(t)
	if other, ok := b.types[name]; ok {
		b.fail(fmt.Errorf("openapi: types %v and %v are both named %s", other, t, name))
		return name
	}
	b.names[t], b.types[name] = name, t
	s := &spec.Schema{}
	b.defs[name] = s // before building, so that recursive types find it
	if st, ok := reflect.Zero(t).Interface().(scalarTyper); ok {
		*s = b.scalarSchema(name, st)
	} else {
		*s = b.structSchema(t)
	}
	return name
}

func (b *builder) scalarSchema(name string, st scalarTyper) spec.Schema {
	s := spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        st.OpenAPISchemaType(),
		Format:      st.OpenAPISchemaFormat(),
		Description: scalarDocs[name],
	}}
	if o, ok := st.(oneOfTyper); ok {
		b.oneOf[name] = o.OpenAPIV3OneOfTypes()
	}
	if s.Format == "int-or-string" {
		s.AddExtension(extIntOrString, true)
	}
	return s
}

func (b *builder) structSchema(t reflect.Type) spec.Schema {
	s := spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        spec.StringOrArray{"object"},
		Description: docsOf(t)[""],
		Properties:  map[string]spec.Schema{},
	}}
	b.addFields(&s, t)
	if len(s.Properties) == 0 {
		s.Properties = nil
	}
	if mt := markersOf(t).MapType; mt != "" {
		s.AddExtension(extMapType, mt)
	}
	return s
}

// addFields adds t's fields to s as encoding/json sees them: embedded structs without a JSON name are inlined.
func (b *builder) addFields(s *spec.Schema, t reflect.Type) {
	docs, marks := docsOf(t), markersOf(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := deref(f.Type); et.Kind() == reflect.Struct {
				b.addFields(s, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m := marks.Fields[name]
		omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
		prop := b.fieldSchema(f.Type)
		prop.Description = docs[name]
		addFieldExtensions(&prop, f.Tag, m)
		if def := m.defaultValue(); def != nil {
			prop.Default = def
		} else {
			prop.Default = enforcedDefault(f.Type, omitempty)
		}
		s.Properties[name] = prop
		if (!omitempty || m.Required) && !m.Optional {
			s.Required = append(s.Required, name)
		}
	}
}

// addFieldExtensions copies the merge strategy struct tags and the list and map markers of a field.
func addFieldExtensions(s *spec.Schema, tag reflect.StructTag, m fieldMarkers) {
	if v := tag.Get("patchStrategy"); v != "" {
		s.AddExtension(extPatchStrategy, v)
	}
	if v := tag.Get("patchMergeKey"); v != "" {
		s.AddExtension(extPatchMergeKey, v)
	}
	if m.ListType != "" {
		s.AddExtension(extListType, m.ListType)
	}
	if len(m.ListMapKeys) > 0 {
		keys := make([]any, len(m.ListMapKeys))
		for i, k := range m.ListMapKeys {
			keys[i] = k
		}
		s.AddExtension(extListMapKeys, keys)
	}
	if m.MapType != "" {
		s.AddExtension(extMapType, m.MapType)
	}
}

// fieldSchema is the schema of a value of type t: a reference for definition types, else inline.
func (b *builder) fieldSchema(t reflect.Type) spec.Schema {
	t = deref(t)
	if isDefinition(t) {
		return refSchema(b.define(t))
	}
	var s spec.Schema
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return primitive("string", "byte")
		}
		items := b.fieldSchema(t.Elem())
		items.Default = enforcedDefault(t.Elem(), false)
		s = spec.Schema{SchemaProps: spec.SchemaProps{
			Type:  spec.StringOrArray{"array"},
			Items: &spec.SchemaOrArray{Schema: &items},
		}}
	case reflect.Map:
		values := b.fieldSchema(t.Elem())
		values.Default = enforcedDefault(t.Elem(), false)
		s = spec.Schema{SchemaProps: spec.SchemaProps{
			Type:                 spec.StringOrArray{"object"},
			AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &values},
		}}
	case reflect.Struct:
		if t == timeType {
			return primitive("string", "date-time")
		}
		s = b.structSchema(t) // an anonymous struct
	case reflect.Interface:
		s = primitive("object", "")
	default:
		typ, format, ok := kindFormat(t.Kind())
		if !ok {
			b.fail(fmt.Errorf("openapi: %v has no OpenAPI form", t))
		}
		s = primitive(typ, format)
	}
	for _, v := range enumOf(t) {
		s.Enum = append(s.Enum, v)
	}
	return s
}

// kindFormat maps Go's basic kinds to OpenAPI types and formats as Kubernetes does.
func kindFormat(k reflect.Kind) (typ, format string, ok bool) {
	switch k {
	case reflect.String:
		return "string", "", true
	case reflect.Bool:
		return "boolean", "", true
	case reflect.Int8, reflect.Uint8:
		return "integer", "byte", true
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint16:
		return "integer", "int32", true
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer", "int64", true
	case reflect.Float32:
		return "number", "float", true
	case reflect.Float64:
		return "number", "double", true
	}
	return "", "", false
}

// enforcedDefault is the default Kubernetes states for a field without a +default marker: the JSON decoder's
// result for an absent value. Structs default to {}, and scalars without omitempty to their zero value; types
// with their own decoding, pointers, maps and slices have none.
func enforcedDefault(t reflect.Type, omitempty bool) any {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return enforcedDefault(t.Field(0).Type, omitempty)
		}
		if t == timeType {
			return nil
		}
		return map[string]any{}
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	}
	if omitempty {
		return nil
	}
	switch typ, _, _ := kindFormat(t.Kind()); typ {
	case "string":
		return ""
	case "boolean":
		return false
	case "integer", "number":
		return 0
	}
	return nil
}

func docsOf(t reflect.Type) map[string]string {
	if d, ok := reflect.Zero(t).Interface().(swaggerDocer); ok {
		return d.SwaggerDoc()
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func refSchema(name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(definitionsPrefix + name)}}
}

func primitive(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}
