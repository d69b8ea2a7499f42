package kubeapi

import (
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requestInfo is what the URL of a Kubernetes API request names, after the /clusters/<id> prefix.
type requestInfo struct {
	// resource is true for /api/<v>/... and /apis/<g>/<v>/... paths that name a resource (not discovery).
	resource    bool
	verb        string // get, list, watch, create, update, patch, delete, deletecollection
	gv          schema.GroupVersion
	namespace   string
	plural      string
	name        string
	subresource string
	// parts is the path below the prefix, split on "/", for discovery and OpenAPI routing.
	parts []string
}

// parseRequestInfo reads a path below the cluster prefix ("/api/v1/namespaces/x/pods/y") the way the upstream
// API server's RequestInfoFactory does, including the deprecated /watch/ prefix.
func parseRequestInfo(method, path string, watchParam bool) requestInfo {
	parts := splitPath(path)
	ri := requestInfo{parts: parts}
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		ri.gv = schema.GroupVersion{Version: parts[1]}
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		ri.gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
		rest = parts[3:]
	default:
		return ri
	}
	watchPrefix := false
	if len(rest) > 0 && rest[0] == "watch" {
		watchPrefix, rest = true, rest[1:]
	}
	if len(rest) == 0 {
		return ri
	}
	ri.resource = true
	if rest[0] == "namespaces" && len(rest) > 2 && !(len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize")) {
		// /namespaces/<ns>/<resource>...; /namespaces/<ns> alone is the namespace object.
		ri.namespace, rest = rest[1], rest[2:]
	}
	named := rest
	if len(rest) > 2 && rest[2] == "proxy" {
		named = rest[:3] // below <name>/proxy is the proxied request's path, which may have empty segments
	}
	if slices.Contains(named, "") { // an empty segment ("/api/v1//x", ".../pods//status") names no resource
		return requestInfo{parts: parts}
	}
	ri.plural = rest[0]
	if len(rest) > 1 {
		ri.name = rest[1]
	}
	if len(rest) > 2 {
		ri.subresource = strings.Join(rest[2:], "/")
		if rest[2] == "proxy" { // nodes/<name>/proxy/<path>: the path is the proxied request's
			ri.subresource = "proxy"
		}
	}
	ri.verb = verbFor(method, ri.name != "", watchParam || watchPrefix)
	return ri
}

func verbFor(method string, named, watch bool) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return ""
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
