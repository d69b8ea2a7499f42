// Package openapi describes the resources of a server/resources Registry in OpenAPI, the way the Kubernetes API
// server does, for kubectl (explain, client-side apply, validation), client-go and server-side apply.
//
// # Building
//
// Build reflects over the k8s.io/api Go types the registry serves (Resource.New and NewList, with the meta.k8s.io
// types every API uses) and writes:
//
//   - definitions named as Kubernetes names them ("io.k8s.api.core.v1.Pod"), with the descriptions of the
//     types' SwaggerDoc methods, fields named by their json tags (embedded structs inlined), scalar types
//     (Quantity, IntOrString, Time, MicroTime, Duration) as strings with their formats, maps as
//     additionalProperties and []byte as base64 strings;
//   - the extensions clients rely on: x-kubernetes-group-version-kind on every served kind and its list (and on
//     Status, DeleteOptions, WatchEvent and autoscaling/v1 Scale), x-kubernetes-patch-strategy and
//     x-kubernetes-patch-merge-key from the patchStrategy and patchMergeKey struct tags, and
//     x-kubernetes-list-type, x-kubernetes-list-map-keys and x-kubernetes-map-type from the +listType,
//     +listMapKey, +mapType and +structType comment markers;
//   - required fields as Kubernetes computes them (no omitempty, unless marked +optional; +required always),
//     defaults from +default markers and from Go's zero values, and the values of +enum types.
//
// Reflection cannot see comments, so the markers come from zz_generated.markers.go, which markergen writes from
// the k8s.io/api and k8s.io/apimachinery sources (go generate; a test fails when it is stale). Types it has not
// seen are described without markers: their lists are atomic for server-side apply unless their struct tags
// give a merge key.
//
// Operations follow the API server's layout for every resource: list, create and deletecollection on the
// collection, get, replace, patch and delete on the item, the same on /status and /scale (get, replace, patch),
// list across namespaces for namespaced resources and the group version's resource list at its root. Each
// carries operationId ("listCoreV1NamespacedPod"), x-kubernetes-action, x-kubernetes-group-version-kind and its
// path and query parameters, always inline. Create, replace and patch take dryRun, fieldManager and
// fieldValidation; kubectl looks for fieldValidation on the PATCH operations of the v3 document before it leaves
// field validation to the server.
// Only the verbs the resource serves are described. Watch paths are not.
//
// # Documents
//
// The Swagger 2.0 document has every definition, without defaults (as Kubernetes publishes it); each group
// version's OpenAPI 3.0 document has its paths and the definitions they reach, with defaults, and references
// that have siblings wrapped in allOf. Paths are the API's own ("/api/v1/namespaces/{namespace}/pods"): clients
// put their server URL, which carries any per-cluster prefix, in front. Only the v3 discovery document names
// URLs with the prefix.
//
// Models returns the canonical definitions (Swagger 2.0 references, defaults kept) that
// managedfields.NewTypeConverter reads for server-side apply.
//
// # Serving
//
// ServeV2, ServeV3Root and ServeV3GroupVersion are the handlers of /openapi/v2, /openapi/v3 and
// /openapi/v3/<group version path>. Documents are JSON or, when asked, gnostic protobuf; every response has an
// ETag (upper-case hex SHA-512 of the JSON form, as upstream) and a matching If-None-Match gets 304. A v3 document
// fetched with its current ?hash= is cacheable for a year (Cache-Control: public, max-age=31536000, immutable);
// an old hash is redirected to the current one. Bodies are gzipped for clients that accept it.
//
// # Guarantees
//
// A Spec is immutable after Build and safe for concurrent use; Build is deterministic, so every process serving
// one registry serves identical documents and hashes. JSON forms are built by Build; protobuf and gzip forms on
// first request, once.
package openapi
