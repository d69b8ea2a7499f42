package openapi

import (
	"reflect"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// modelNamer is implemented by the k8s.io types, which know their Kubernetes OpenAPI names.
type modelNamer interface{ OpenAPIModelName() string }

// modelName is the definition name of a named Go type as Kubernetes spells it: the type's own OpenAPIModelName,
// else its package path in reverse-domain form ("k8s.io/api/core/v1".Pod → "io.k8s.api.core.v1.Pod").
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(modelNamer); ok {
		if name := n.OpenAPIModelName(); name != "" {
			return name
		}
	}
	pkg := t.PkgPath()
	host, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	name := strings.Join(labels, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

// gvCamel is a group version as Kubernetes spells it in operation IDs: "CoreV1", "AppsV1",
// "RbacAuthorizationV1" (a trailing ".k8s.io" is dropped, each label capitalized).
func gvCamel(gv schema.GroupVersion) string {
	group := "core"
	if gv.Group != "" {
		group = strings.TrimSuffix(gv.Group, ".k8s.io")
	}
	var b strings.Builder
	for _, label := range strings.FieldsFunc(group, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(capitalize(label))
	}
	b.WriteString(capitalize(gv.Version))
	return b.String()
}

// gvTag is the operation tag of a group version: "core_v1", "apps_v1", "rbacAuthorization_v1".
func gvTag(gv schema.GroupVersion) string {
	camel := strings.TrimSuffix(gvCamel(gv), capitalize(gv.Version))
	r := []rune(camel)
	r[0] = unicode.ToLower(r[0])
	return string(r) + "_" + gv.Version
}

// gvPath is the URL path of a group version without the leading slash: "api/v1", "apis/apps/v1". It keys the
// OpenAPI v3 documents.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
