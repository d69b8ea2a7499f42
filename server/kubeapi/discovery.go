package kubeapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// serveNonResource answers discovery, OpenAPI and /version below the cluster prefix.
func (rq *request) serveNonResource() error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource")
	}
	p := rq.info.parts
	reg := rq.api.cfg.Registry
	switch {
	case len(p) == 1 && p[0] == "version":
		return rq.writeJSON(rq.api.cfg.Version)
	case len(p) == 1 && p[0] == "api":
		if rq.out.as == "APIGroupDiscoveryList" {
			return rq.writeAggregated(true)
		}
		rq.write(http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"}, ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: rq.r.Host}}})
		return nil
	case len(p) == 1 && p[0] == "apis":
		if rq.out.as == "APIGroupDiscoveryList" {
			return rq.writeAggregated(false)
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range groups(reg) {
			if g.Name != "" {
				list.Groups = append(list.Groups, g)
			}
		}
		rq.write(http.StatusOK, list)
		return nil
	case len(p) == 2 && p[0] == "apis":
		for _, g := range groups(reg) {
			if g.Name == p[1] && g.Name != "" {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				rq.write(http.StatusOK, &g)
				return nil
			}
		}
	case len(p) == 2 && p[0] == "api", len(p) == 3 && p[0] == "apis":
		gv := schema.GroupVersion{Version: p[len(p)-1]}
		if p[0] == "apis" {
			gv.Group = p[1]
		}
		if list := resourceList(reg, gv); list != nil {
			rq.write(http.StatusOK, list)
			return nil
		}
	case len(p) >= 2 && p[0] == "openapi" && rq.api.cfg.OpenAPI != nil:
		return rq.serveOpenAPI(p[1:])
	case len(p) == 2 && p[0] == ".well-known" && p[1] == "openid-configuration" && rq.api.cfg.ServiceAccountTokens != nil:
		return rq.writeJSONAs("application/json", satoken.OpenIDConfiguration())
	case strings.Join(p, "/") == strings.TrimPrefix(satoken.JWKSPath, "/") && rq.api.cfg.ServiceAccountTokens != nil:
		keys, err := rq.api.cfg.ServiceAccountTokens.JWKS(rq.ctx, rq.cluster.ID)
		if err != nil {
			return internal(err)
		}
		return rq.writeJSONAs("application/jwk-set+json", keys)
	}
	return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

func (rq *request) serveOpenAPI(p []string) error {
	o := rq.api.cfg.OpenAPI
	switch {
	case len(p) == 1 && p[0] == "v2":
		o.ServeV2(rq.w, rq.r)
	case len(p) == 1 && p[0] == "v3":
		o.ServeV3Root(rq.w, rq.r, rq.prefix)
	case len(p) > 1 && p[0] == "v3":
		o.ServeV3GroupVersion(rq.w, rq.r, rq.prefix, strings.Join(p[1:], "/"))
	default:
		return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	}
	return nil
}

// groups lists the served API groups with their versions, core ("") first.
func groups(reg *resources.Registry) []metav1.APIGroup {
	var out []metav1.APIGroup
	for _, gv := range reg.GroupVersions() {
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if n := len(out); n > 0 && out[n-1].Name == gv.Group {
			out[n-1].Versions = append(out[n-1].Versions, gvd)
			continue
		}
		out = append(out, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{gvd},
			PreferredVersion: gvd})
	}
	return out
}

// resourceList is the APIResourceList of gv, or nil when gv is not served.
func resourceList(reg *resources.Registry, gv schema.GroupVersion) *metav1.APIResourceList {
	rs := reg.InGroupVersion(gv)
	if len(rs) == 0 {
		return nil
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String()}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Plural, SingularName: r.Singular,
			Namespaced: r.Namespaced, Kind: r.GVK.Kind, Verbs: r.ServedVerbs(), ShortNames: r.ShortNames,
			Categories: r.Categories})
		for _, s := range subresources(r) {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Plural + "/" + s.name,
				Namespaced: r.Namespaced, Kind: s.kind.Kind, Group: s.kind.Group, Version: s.kind.Version,
				Verbs: s.verbs})
		}
	}
	return list
}

// subresource is one served subresource of a resource.
type subresource struct {
	name  string
	kind  schema.GroupVersionKind
	verbs []string
}

func subresources(r *resources.Resource) []subresource {
	var out []subresource
	if r.Status {
		out = append(out, subresource{"status", r.GVK, []string{"get", "patch", "update"}})
	}
	if r.Resize != nil {
		out = append(out, subresource{"resize", r.GVK, []string{"get", "patch", "update"}})
	}
	if r.Scale != nil {
		out = append(out, subresource{"scale", schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			[]string{"get", "patch", "update"}})
	}
	if r.Storage == "serviceaccounts" {
		out = append(out, subresource{"token", schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1",
			Kind: "TokenRequest"}, []string{"create"}})
	}
	if r.Storage == "namespaces" {
		out = append(out, subresource{"finalize", r.GVK, []string{"update"}})
	}
	if r.Storage == "pods" {
		out = append(out, subresource{"binding", schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, []string{"create"}})
	}
	for _, name := range slices.Sorted(maps.Keys(r.UpdateSubresources)) {
		out = append(out, subresource{name, r.GVK, []string{"get", "patch", "update"}})
	}
	if r.GVK.Group == "" {
		for _, name := range slices.Sorted(maps.Keys(connectSubresources[r.Storage])) {
			kind := schema.GroupVersionKind{Version: "v1", Kind: connectKinds[r.Storage+"/"+name]}
			out = append(out, subresource{name, kind, connectSubresources[r.Storage][name]})
		}
	}
	return out
}

// writeAggregated serves aggregated discovery (apidiscovery.k8s.io/v2) for /api (core) or /apis.
func (rq *request) writeAggregated(core bool) error {
	list := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList",
		APIVersion: "apidiscovery.k8s.io/v2"}}
	reg := rq.api.cfg.Registry
	for _, g := range groups(reg) {
		if (g.Name == "") != core {
			continue
		}
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range g.Versions {
			gd.Versions = append(gd.Versions, versionDiscovery(reg, schema.GroupVersion{Group: g.Name, Version: v.Version}))
		}
		list.Items = append(list.Items, gd)
	}
	rq.write(http.StatusOK, list)
	return nil
}

func versionDiscovery(reg *resources.Registry, gv schema.GroupVersion) apidiscoveryv2.APIVersionDiscovery {
	vd := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	for _, r := range reg.InGroupVersion(gv) {
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		rd := apidiscoveryv2.APIResourceDiscovery{Resource: r.Plural, SingularResource: r.Singular, Scope: scope,
			ResponseKind: &metav1.GroupVersionKind{Group: r.GVK.Group, Version: r.GVK.Version, Kind: r.GVK.Kind},
			Verbs:        r.ServedVerbs(), ShortNames: r.ShortNames, Categories: r.Categories}
		for _, s := range subresources(r) {
			rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: s.name,
				ResponseKind: &metav1.GroupVersionKind{Group: s.kind.Group, Version: s.kind.Version, Kind: s.kind.Kind},
				Verbs:        s.verbs})
		}
		vd.Resources = append(vd.Resources, rd)
	}
	return vd
}

// writeJSON writes a plain JSON document (for /version, which is not a runtime.Object).
func (rq *request) writeJSON(v any) error { return rq.writeJSONAs("application/json", v) }

// writeJSONAs writes v as JSON with the given content type (the OIDC documents have their own).
func (rq *request) writeJSONAs(contentType string, v any) error {
	b, err := jsonMarshal(v)
	if err != nil {
		return internal(err)
	}
	rq.w.Header().Set("Content-Type", contentType)
	rq.w.WriteHeader(http.StatusOK)
	_, _ = rq.w.Write(b)
	return nil
}

// statusErr is an API error with an explicit code and reason.
func statusErr(code int, reason metav1.StatusReason, msg string) error {
	return &apiStatusError{metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}}
}

type apiStatusError struct{ st metav1.Status }

func (e *apiStatusError) Error() string         { return e.st.Message }
func (e *apiStatusError) Status() metav1.Status { return e.st }

var _ runtime.Object = (*metav1.Status)(nil)
