package openapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// route is one URL path and its operations, in a form both the v2 and the v3 documents are written from.
type route struct {
	path   string
	params []param // shared by every operation
	ops    []operation
}

// operation is one method on a route.
type operation struct {
	method      string // lower case: get, post, put, patch, delete
	id          string // operationId: listCoreV1NamespacedPod
	description string
	action      string // x-kubernetes-action: get, list, post, put, patch, delete, deletecollection
	gvk         schema.GroupVersionKind
	params      []param
	body        string   // definition name of the request body, "" for none
	consumes    []string // request media types; nil for any
	produces    []string
	responses   []response
	tag         string
}

type response struct {
	code        int
	description string
	definition  string // "" for none
}

// param is a path or query parameter.
type param struct {
	name, in, typ, description string
	required                   bool
}

// Media types of requests and responses.
var (
	jsonYAML      = []string{"application/json", "application/yaml"}
	listMedia     = []string{"application/json", "application/yaml", "application/json;stream=watch"}
	patchMedia    = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
	statusResults = []response{{http.StatusOK, "OK", nameStatus}, {http.StatusAccepted, "Accepted", nameStatus}}
)

// Query parameters, as the Kubernetes API server takes them.
var (
	paramPretty = param{name: "pretty", in: "query", typ: "string",
		description: "If 'true', the output is pretty printed."}
	paramDryRun = param{name: "dryRun", in: "query", typ: "string",
		description: "When present, the change is validated but not persisted. The only valid value is All: " +
			"every dry run stage is processed."}
	paramFieldManager = param{name: "fieldManager", in: "query", typ: "string",
		description: "The name of the actor or entity making the change, recorded in metadata.managedFields. " +
			"At most 128 printable characters; required for apply patches."}
	paramFieldValidation = param{name: "fieldValidation", in: "query", typ: "string",
		description: "How the server treats unknown and duplicate fields in the request body: Ignore drops " +
			"them silently, Warn (the default) drops them and sends a warning header for each, Strict rejects " +
			"the request with a BadRequest naming them all."}
	paramForce = param{name: "force", in: "query", typ: "boolean",
		description: "Force an apply patch to take ownership of fields other managers own. Must be unset for " +
			"other patch types."}
	paramLabelSelector = param{name: "labelSelector", in: "query", typ: "string",
		description: "Select objects by their labels (\"app=web,tier!=cache\"). Defaults to everything."}
	paramFieldSelector = param{name: "fieldSelector", in: "query", typ: "string",
		description: "Select objects by their fields (\"metadata.name=web\"). Defaults to everything."}
	paramLimit = param{name: "limit", in: "query", typ: "integer",
		description: "The largest number of items to return. When more exist, metadata.continue of the list " +
			"holds the token that fetches the next chunk."}
	paramContinue = param{name: "continue", in: "query", typ: "string",
		description: "The continue token of the previous chunk of a limited list."}
	paramResourceVersion = param{name: "resourceVersion", in: "query", typ: "string",
		description: "Which version of the collection the list is served from, or a watch starts after. " +
			"Unset: the latest."}
	paramResourceVersionMatch = param{name: "resourceVersionMatch", in: "query", typ: "string",
		description: "How resourceVersion applies to a list: Exact or NotOlderThan."}
	paramTimeoutSeconds = param{name: "timeoutSeconds", in: "query", typ: "integer",
		description: "How long a list or watch call may last, in seconds."}
	paramWatch = param{name: "watch", in: "query", typ: "boolean",
		description: "Watch for changes and stream them as WatchEvents instead of listing."}
	paramBookmarks = param{name: "allowWatchBookmarks", in: "query", typ: "boolean",
		description: "Ask a watch for BOOKMARK events, which only advance the resource version."}
	paramGracePeriod = param{name: "gracePeriodSeconds", in: "query", typ: "integer",
		description: "Seconds before the object is deleted; zero deletes it at once. Unset: the kind's default."}
	paramOrphan = param{name: "orphanDependents", in: "query", typ: "boolean",
		description: "Deprecated: use propagationPolicy. Whether dependents are orphaned."}
	paramPropagation = param{name: "propagationPolicy", in: "query", typ: "string",
		description: "Whether and how dependents are garbage collected: Orphan, Background or Foreground."}
)

var (
	writeParams  = []param{paramDryRun, paramFieldManager, paramFieldValidation}
	patchParams  = []param{paramDryRun, paramFieldManager, paramFieldValidation, paramForce}
	deleteParams = []param{paramDryRun, paramGracePeriod, paramOrphan, paramPropagation}
	listParams   = []param{paramBookmarks, paramContinue, paramFieldSelector, paramLabelSelector, paramLimit,
		paramResourceVersion, paramResourceVersionMatch, paramTimeoutSeconds, paramWatch}
	deleteCollectionParams = []param{paramContinue, paramDryRun, paramFieldSelector, paramGracePeriod,
		paramLabelSelector, paramLimit, paramOrphan, paramPropagation, paramResourceVersion,
		paramResourceVersionMatch, paramTimeoutSeconds}
)

// resourceNames are the definition names a resource's operations refer to.
type resourceNames struct {
	kind, list, scale string
}

// groupRoutes returns the routes of one group version: its resource list at the root and every resource's
// collection, item and subresource paths, as the Kubernetes API server lays them out.
func groupRoutes(gv schema.GroupVersion, rs []*resources.Resource, names map[*resources.Resource]resourceNames) []route {
	prefix := "/" + gvPath(gv)
	routes := []route{{path: prefix + "/", ops: []operation{{
		method: "get", id: "get" + gvCamel(gv) + "APIResources", action: "",
		description: "get available resources", produces: jsonYAML, tag: gvTag(gv),
		responses: []response{{http.StatusOK, "OK", nameAPIResourceList}},
	}}}}
	for _, r := range rs {
		routes = append(routes, resourceRoutes(prefix, r, names[r])...)
	}
	return routes
}

func resourceRoutes(prefix string, r *resources.Resource, n resourceNames) []route {
	o := opNamer{gv: gvCamel(r.GVK.GroupVersion()), kind: r.GVK.Kind, tag: gvTag(r.GVK.GroupVersion()),
		gvk: r.GVK}
	collection := prefix + "/" + r.Plural
	scope := []param{paramPretty}
	if r.Namespaced {
		o.scope = "Namespaced"
		collection = prefix + "/namespaces/{namespace}/" + r.Plural
		scope = []param{{name: "namespace", in: "path", typ: "string", required: true,
			description: "The namespace of the object."}, paramPretty}
	}
	item := append([]param{{name: "name", in: "path", typ: "string", required: true,
		description: "The name of the " + r.GVK.Kind + "."}}, scope...)
	var routes []route
	add := func(path string, params []param, ops ...operation) {
		var served []operation
		for _, op := range ops {
			if op.method != "" {
				served = append(served, op)
			}
		}
		if len(served) > 0 {
			routes = append(routes, route{path: path, params: params, ops: served})
		}
	}
	has := r.HasVerb
	add(collection, scope,
		when(has("list"), o.list("", n.list)),
		when(has("create"), o.create(n.kind)),
		when(has("deletecollection"), o.deleteCollection()))
	add(collection+"/{name}", item,
		when(has("get"), o.read("", n.kind)),
		when(has("update"), o.replace("", n.kind)),
		when(has("patch"), o.patch("", n.kind)),
		when(has("delete"), o.delete()))
	if r.Status {
		add(collection+"/{name}/status", item,
			when(has("get"), o.read("Status", n.kind)),
			when(has("update"), o.replace("Status", n.kind)),
			when(has("patch"), o.patch("Status", n.kind)))
	}
	for _, sub := range slices.Sorted(maps.Keys(r.UpdateSubresources)) {
		// Upstream's operation IDs capitalize only the first letter (readCoreV1NamespacedPodEphemeralcontainers).
		camel := strings.ToUpper(sub[:1]) + sub[1:]
		add(collection+"/{name}/"+sub, item,
			when(has("get"), o.read(camel, n.kind)),
			when(has("update"), o.replace(camel, n.kind)),
			when(has("patch"), o.patch(camel, n.kind)))
	}
	if r.Scale != nil {
		s := o
		s.gvk = scaleGVK
		add(collection+"/{name}/scale", item,
			when(has("get"), s.read("Scale", n.scale)),
			when(has("update"), s.replace("Scale", n.scale)),
			when(has("patch"), s.patch("Scale", n.scale)))
	}
	if r.Namespaced && has("list") {
		all := o
		all.scope, all.suffix = "", "ForAllNamespaces"
		add(prefix+"/"+r.Plural, []param{paramPretty}, all.list("", n.list))
	}
	return routes
}

// when returns op if ok, else the zero operation, which resourceRoutes drops.
func when(ok bool, op operation) operation {
	if !ok {
		return operation{}
	}
	return op
}

// opNamer writes the operations of one resource with Kubernetes' operation IDs.
type opNamer struct {
	gv, kind, scope, suffix, tag string
	gvk                          schema.GroupVersionKind
}

func (o opNamer) op(method, verb, action, sub, description string) operation {
	return operation{method: method, action: action, tag: o.tag, gvk: o.gvk, description: description,
		id: verb + o.gv + o.scope + o.kind + sub + o.suffix, produces: jsonYAML}
}

func (o opNamer) list(sub, list string) operation {
	op := o.op("get", "list", "list", sub, "list or watch objects of kind "+o.kind)
	op.params, op.produces = listParams, listMedia
	op.responses = []response{{http.StatusOK, "OK", list}}
	return op
}

func (o opNamer) create(kind string) operation {
	op := o.op("post", "create", "post", "", "create a "+o.kind)
	op.params, op.body = writeParams, kind
	op.responses = []response{{http.StatusOK, "OK", kind}, {http.StatusCreated, "Created", kind},
		{http.StatusAccepted, "Accepted", kind}}
	return op
}

func (o opNamer) deleteCollection() operation {
	op := o.op("delete", "delete", "deletecollection", "", "delete collection of "+o.kind)
	op.id = "delete" + o.gv + "Collection" + o.scope + o.kind
	op.params, op.body, op.responses = deleteCollectionParams, nameDeleteOptions, statusResults[:1]
	return op
}

func (o opNamer) read(sub, kind string) operation {
	op := o.op("get", "read", "get", sub, subDescription("read", sub, "the specified "+o.kind))
	op.responses = []response{{http.StatusOK, "OK", kind}}
	return op
}

func (o opNamer) replace(sub, kind string) operation {
	op := o.op("put", "replace", "put", sub, subDescription("replace", sub, "the specified "+o.kind))
	op.params, op.body = writeParams, kind
	op.responses = []response{{http.StatusOK, "OK", kind}, {http.StatusCreated, "Created", kind}}
	return op
}

func (o opNamer) patch(sub, kind string) operation {
	op := o.op("patch", "patch", "patch", sub, subDescription("partially update", sub, "the specified "+o.kind))
	op.params, op.body, op.consumes = patchParams, namePatch, patchMedia
	op.responses = []response{{http.StatusOK, "OK", kind}, {http.StatusCreated, "Created", kind}}
	return op
}

func (o opNamer) delete() operation {
	op := o.op("delete", "delete", "delete", "", "delete a "+o.kind)
	op.params, op.body, op.responses = deleteParams, nameDeleteOptions, statusResults
	return op
}

// subDescription: "read the specified Pod", "read status of the specified Pod".
func subDescription(verb, sub, object string) string {
	if sub == "" {
		return verb + " " + object
	}
	return verb + " " + strings.ToLower(sub) + " of " + object
}
