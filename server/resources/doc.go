// Package resources is the registry of the Kubernetes resources Wheelhouse serves: one file per kind describes its
// group, version and kind, URL names, scope, subresources, defaulting, validation, table columns and field
// selectors. The generic API machinery in server/kubeapi and the OpenAPI builder in server/openapi read only this
// registry, so adding a kind is adding one file here.
//
// Objects are the typed Go structs of k8s.io/api. Functions in a Resource receive and return those types (a
// *corev1.Pod for pods, ...); they are pure: no I/O, no clock (callers pass the time where it matters), safe for
// concurrent use.
package resources
