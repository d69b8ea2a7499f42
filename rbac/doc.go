// Package rbac is Wheelhouse's one authorization decision point: "may user U with groups G do verb V on
// (group, resource, subresource, name) in namespace N of cluster C", or on a non-resource URL, under Kubernetes
// RBAC semantics (Roles, ClusterRoles with aggregation, RoleBindings, ClusterRoleBindings, resourceNames,
// non-resource URLs, subresources) plus the node authorizer. The design is in docs/design/tenancy.md.
//
// A cluster's policy has two layers:
//   - the bindings: per (domain, subject) the roles bound to it, the domain being a RoleBinding's namespace or
//     "*" for ClusterRoleBindings — an index a decision probes without allocating;
//   - each role's rules, the policy ("p") of a small Casbin enforcer whose matcher implements RBAC's rule
//     matching (wildcards, "*/subresource", resourceNames, URL prefixes). Enforcers are shared between roles with
//     the same rules, so the built-in roles of ten thousand clusters cost one enforcer each, and each remembers
//     its answers (its rules never change, so an answer never goes stale).
//
// A decision looks up the caller's roles for the namespace and cluster-wide and asks only those roles'
// enforcers: its cost follows the caller's roles, not the size of the cluster's policy (Casbin evaluates every
// policy line of an enforcer on each Enforce). Platform actions by team role are a Casbin RBAC model of their
// own (platform.go).
//
// A cluster's policy is an immutable snapshot built from its RBAC objects at a version (the revisions of the
// last change of each RBAC resource). Every decision compares the current version with the snapshot's and builds
// a new snapshot first if any RBAC object changed, so no decision is ever made on a policy older than the
// objects the caller could read — there is no cache to invalidate.
package rbac
