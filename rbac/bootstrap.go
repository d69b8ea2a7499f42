package rbac

// The built-in RBAC objects of every Wheelhouse cluster.
//
// They follow kube-apiserver's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy: policy.go,
// controller_policy.go, namespace_policy.go) with its default feature gates, as the testdata YAML files of that
// folder list them, so that tools and charts written against a stock cluster find the roles they expect. They
// are data, written here as small rule builders rather than literals; upstream's own code is not used.
//
// Deliberate differences from upstream:
//   - system:heapster (for a long-retired add-on) is left out;
//   - upstream keeps an empty "system:node" ClusterRoleBinding (no subjects) for compatibility; it grants
//     nothing, so it is left out: nodes are authorized by the node authorizer;
//   - Wheelhouse's team bindings (wheelhouse:team:*) are added.

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults are the RBAC objects a new cluster starts with.
type Defaults struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role        // namespaced (kube-system, kube-public), Namespace set
	RoleBindings        []rbacv1.RoleBinding // namespaced, Namespace set
}

// BootstrapDefaults returns fresh copies (callers may modify them) of the built-in objects.
//
// Every call builds new objects: no slice or map is shared between calls or between two objects of one result.
// Each list is sorted by (namespace,) name.
func BootstrapDefaults() Defaults {
	controllerRoles := builtinControllerRoles()
	d := Defaults{
		ClusterRoles:        append(builtinClusterRoles(), controllerRoles...),
		ClusterRoleBindings: builtinClusterRoleBindings(),
		Roles:               builtinNamespacedRoles(),
		RoleBindings:        builtinNamespacedRoleBindings(),
	}
	d.ClusterRoleBindings = append(d.ClusterRoleBindings, builtinControllerRoleBindings(controllerRoles)...)
	d.ClusterRoleBindings = append(d.ClusterRoleBindings, builtinTeamBindings()...)

	slices.SortFunc(d.ClusterRoles, func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(d.ClusterRoleBindings, func(a, b rbacv1.ClusterRoleBinding) int {
		return strings.Compare(a.Name, b.Name)
	})
	slices.SortFunc(d.Roles, func(a, b rbacv1.Role) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	slices.SortFunc(d.RoleBindings, func(a, b rbacv1.RoleBinding) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return d
}

// Labels and annotations of the built-in objects.
const (
	bootstrappingLabel      = "kubernetes.io/bootstrapping"
	bootstrappingLabelValue = "rbac-defaults"
	// autoupdateAnnotation tells upstream's reconciler that it may bring the object back to its built-in
	// contents; kept for compatibility with tools that read it.
	autoupdateAnnotation = rbacv1.AutoUpdateAnnotationKey // "rbac.authorization.kubernetes.io/autoupdate"

	aggregateToAdminLabel = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEditLabel  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToViewLabel  = "rbac.authorization.k8s.io/aggregate-to-view"

	managedByLabel        = "app.kubernetes.io/managed-by"
	descriptionAnnotation = "kubernetes.io/description"
)

// Wheelhouse's team bindings: each binds the group of the same name, which the platform gives to a team's
// members according to their team role.
const (
	wheelhouseTeamOwner  = "wheelhouse:team:owner"
	wheelhouseTeamAdmin  = "wheelhouse:team:admin"
	wheelhouseTeamMember = "wheelhouse:team:member"
	wheelhouseTeamViewer = "wheelhouse:team:viewer"
)

// TeamGroup is the Kubernetes group a member with team role has in the team's clusters (the built-in bindings
// wheelhouse:team:<role> give it cluster-admin, edit or view).
func TeamGroup(role string) string { return "wheelhouse:team:" + role }

// Well-known users, groups and namespaces.
const (
	kubeSystemNamespace = "kube-system"
	kubePublicNamespace = "kube-public"

	systemMastersGroup         = "system:masters"
	systemAuthenticatedGroup   = "system:authenticated"
	systemUnauthenticatedGroup = "system:unauthenticated"
	systemServiceAccountsGroup = "system:serviceaccounts"
	systemMonitoringGroup      = "system:monitoring"

	kubeSchedulerUser         = "system:kube-scheduler"
	kubeControllerManagerUser = "system:kube-controller-manager"
	kubeProxyUser             = "system:kube-proxy"

	// controllerRolePrefix names the role (and binding) of each kube-controller-manager controller, which runs
	// as the ServiceAccount kube-system/<controller>.
	controllerRolePrefix = "system:controller:"
)

// API groups used by the built-in rules.
const (
	apiGroupAll             = "*"
	apiGroupCore            = ""
	apiGroupAdmission       = "admissionregistration.k8s.io"
	apiGroupApps            = "apps"
	apiGroupAuthentication  = "authentication.k8s.io"
	apiGroupAuthorization   = "authorization.k8s.io"
	apiGroupAutoscaling     = "autoscaling"
	apiGroupBatch           = "batch"
	apiGroupCertificates    = "certificates.k8s.io"
	apiGroupCoordination    = "coordination.k8s.io"
	apiGroupCustomMetrics   = "custom.metrics.k8s.io"
	apiGroupDiscovery       = "discovery.k8s.io"
	apiGroupEvents          = "events.k8s.io"
	apiGroupExtensions      = "extensions"
	apiGroupExternalMetrics = "external.metrics.k8s.io"
	apiGroupMetrics         = "metrics.k8s.io"
	apiGroupNetworking      = "networking.k8s.io"
	apiGroupNode            = "node.k8s.io"
	apiGroupPolicy          = "policy"
	apiGroupRBAC            = rbacv1.GroupName // "rbac.authorization.k8s.io"
	apiGroupResource        = "resource.k8s.io"
	apiGroupStorage         = "storage.k8s.io"
)

// Verb sets, as upstream names them. Never modify them: the rule builders copy what they are given.
var (
	verbsRead      = []string{"get", "list", "watch"}
	verbsWrite     = []string{"create", "update", "patch", "delete", "deletecollection"}
	verbsReadWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

// ruleSpec builds a PolicyRule: may(verbs...).in(groups...).on(resources...), optionally .named(names...), or
// may(verbs...).urls(paths...) for non-resource URLs. Every step copies its arguments.
type ruleSpec rbacv1.PolicyRule

func may(verbs ...string) ruleSpec { return ruleSpec{Verbs: slices.Clone(verbs)} }

func (r ruleSpec) in(groups ...string) ruleSpec    { r.APIGroups = slices.Clone(groups); return r }
func (r ruleSpec) on(resources ...string) ruleSpec { r.Resources = slices.Clone(resources); return r }
func (r ruleSpec) named(names ...string) ruleSpec  { r.ResourceNames = slices.Clone(names); return r }
func (r ruleSpec) urls(paths ...string) ruleSpec   { r.NonResourceURLs = slices.Clone(paths); return r }

// mayRecordEvents lets a component write events through either events API.
func mayRecordEvents() ruleSpec {
	return may("create", "update", "patch").in(apiGroupCore, apiGroupEvents).on("events")
}

func policyRules(specs []ruleSpec) []rbacv1.PolicyRule {
	if len(specs) == 0 {
		return nil
	}
	rules := make([]rbacv1.PolicyRule, len(specs))
	for i, s := range specs {
		rules[i] = rbacv1.PolicyRule{
			Verbs:           slices.Clone(s.Verbs),
			APIGroups:       slices.Clone(s.APIGroups),
			Resources:       slices.Clone(s.Resources),
			ResourceNames:   slices.Clone(s.ResourceNames),
			NonResourceURLs: slices.Clone(s.NonResourceURLs),
		}
	}
	return rules
}

// builtinMeta is the metadata every built-in object carries; extraLabels are added to the bootstrapping label.
func builtinMeta(namespace, name string, extraLabels ...string) metav1.ObjectMeta {
	labels := map[string]string{bootstrappingLabel: bootstrappingLabelValue}
	for i := 0; i+1 < len(extraLabels); i += 2 {
		labels[extraLabels[i]] = extraLabels[i+1]
	}
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   namespace,
		Labels:      labels,
		Annotations: map[string]string{autoupdateAnnotation: "true"},
	}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

func builtinClusterRole(name string, rules ...ruleSpec) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: builtinMeta("", name),
		Rules: policyRules(rules)}
}

// aggregatedClusterRole has no rules of its own: it is the union of the ClusterRoles labelled
// selectorLabel="true" (filled in by the aggregation, as upstream's clusterrole-aggregation controller does).
func aggregatedClusterRole(name, selectorLabel string, extraLabels ...string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		TypeMeta:   typeMeta("ClusterRole"),
		ObjectMeta: builtinMeta("", name, extraLabels...),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{selectorLabel: "true"}},
		}},
	}
}

// aggregatedInto is a ClusterRole whose rules are aggregated into the roles selecting aggregateLabel.
func aggregatedInto(aggregateLabel, name string, rules ...ruleSpec) rbacv1.ClusterRole {
	cr := builtinClusterRole(name, rules...)
	cr.Labels[aggregateLabel] = "true"
	return cr
}

func builtinRole(namespace, name string, rules ...ruleSpec) rbacv1.Role {
	return rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: builtinMeta(namespace, name), Rules: policyRules(rules)}
}

func builtinClusterRoleBinding(name, clusterRole string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		TypeMeta:   typeMeta("ClusterRoleBinding"),
		ObjectMeta: builtinMeta("", name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   subjects,
	}
}

func builtinRoleBinding(namespace, name, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		TypeMeta:   typeMeta("RoleBinding"),
		ObjectMeta: builtinMeta(namespace, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   subjects,
	}
}

func subjectUser(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func subjectGroup(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func subjectServiceAccount(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// builtinClusterRoles are upstream's ClusterRoles other than the controllers' ones.
func builtinClusterRoles() []rbacv1.ClusterRole {
	var roles []rbacv1.ClusterRole

	// The user-facing roles. cluster-admin can do anything; admin ⊃ edit ⊃ view are aggregated from the
	// system:aggregate-to-* roles below (and from any ClusterRole a user labels to extend them).
	roles = append(roles,
		builtinClusterRole("cluster-admin",
			may("*").in(apiGroupAll).on("*"),
			may("*").urls("*"),
		),
		aggregatedClusterRole("admin", aggregateToAdminLabel),
		aggregatedClusterRole("edit", aggregateToEditLabel, aggregateToAdminLabel, "true"),
		aggregatedClusterRole("view", aggregateToViewLabel, aggregateToEditLabel, "true"),

		// admin's own powers: granting roles inside the namespace.
		aggregatedInto(aggregateToAdminLabel, "system:aggregate-to-admin",
			may("create").in(apiGroupAuthorization).on("localsubjectaccessreviews"),
			may(verbsReadWrite...).in(apiGroupRBAC).on("roles", "rolebindings"),
		),

		// edit: every user-level action in a namespace, but no /status, quotas or limits (the system's), and no
		// roles or bindings. Reading secrets and exec-like subresources is here, not in view.
		aggregatedInto(aggregateToEditLabel, "system:aggregate-to-edit",
			may(verbsRead...).in(apiGroupCore).on("pods/attach", "pods/proxy", "pods/exec", "pods/portforward",
				"secrets", "services/proxy"),
			may("impersonate").in(apiGroupCore).on("serviceaccounts"),
			may(verbsWrite...).in(apiGroupCore).on("pods", "pods/attach", "pods/proxy", "pods/exec",
				"pods/portforward"),
			may("create").in(apiGroupCore).on("pods/eviction"),
			may(verbsWrite...).in(apiGroupCore).on("replicationcontrollers", "replicationcontrollers/scale",
				"serviceaccounts", "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"),
			may("create").in(apiGroupCore).on("serviceaccounts/token"),
			may(verbsWrite...).in(apiGroupCore, apiGroupEvents).on("events"),
			may(verbsWrite...).in(apiGroupApps).on("statefulsets", "statefulsets/scale", "daemonsets",
				"deployments", "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"),
			may(verbsWrite...).in(apiGroupAutoscaling).on("horizontalpodautoscalers"),
			may(verbsWrite...).in(apiGroupBatch).on("jobs", "cronjobs"),
			may(verbsWrite...).in(apiGroupExtensions).on("daemonsets", "deployments", "deployments/scale",
				"deployments/rollback", "ingresses", "replicasets", "replicasets/scale",
				"replicationcontrollers/scale", "networkpolicies"),
			may(verbsWrite...).in(apiGroupPolicy).on("poddisruptionbudgets"),
			may(verbsWrite...).in(apiGroupNetworking).on("networkpolicies", "ingresses"),
			may(verbsReadWrite...).in(apiGroupCoordination).on("leases"),
			may(verbsWrite...).in(apiGroupResource).on("resourceclaims", "resourceclaimtemplates"),
		),

		// view: read-only access to the non-escalating resources of a namespace (no secrets).
		aggregatedInto(aggregateToViewLabel, "system:aggregate-to-view",
			may(verbsRead...).in(apiGroupCore).on("pods", "replicationcontrollers", "replicationcontrollers/scale",
				"serviceaccounts", "services", "services/status", "endpoints", "persistentvolumeclaims",
				"persistentvolumeclaims/status", "configmaps"),
			may(verbsRead...).in(apiGroupCore).on("limitranges", "resourcequotas", "bindings", "pods/status",
				"resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
			// Reading namespaces at namespace scope means reading that one namespace.
			may(verbsRead...).in(apiGroupCore).on("namespaces"),
			may(verbsRead...).in(apiGroupCore, apiGroupEvents).on("events"),
			may(verbsRead...).in(apiGroupDiscovery).on("endpointslices"),
			may(verbsRead...).in(apiGroupApps).on("controllerrevisions", "statefulsets", "statefulsets/status",
				"statefulsets/scale", "daemonsets", "daemonsets/status", "deployments", "deployments/status",
				"deployments/scale", "replicasets", "replicasets/status", "replicasets/scale"),
			may(verbsRead...).in(apiGroupAutoscaling).on("horizontalpodautoscalers",
				"horizontalpodautoscalers/status"),
			may(verbsRead...).in(apiGroupBatch).on("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
			may(verbsRead...).in(apiGroupExtensions).on("daemonsets", "daemonsets/status", "deployments",
				"deployments/scale", "deployments/status", "ingresses", "ingresses/status", "replicasets",
				"replicasets/scale", "replicasets/status", "replicationcontrollers/scale", "networkpolicies"),
			may(verbsRead...).in(apiGroupPolicy).on("poddisruptionbudgets", "poddisruptionbudgets/status"),
			may(verbsRead...).in(apiGroupNetworking).on("ingresses", "ingresses/status", "networkpolicies"),
			may(verbsRead...).in(apiGroupResource).on("resourceclaims", "resourceclaims/status",
				"resourceclaimtemplates"),
		),
	)

	// Discovery and self-service, bound to every authenticated (some also unauthenticated) caller.
	roles = append(roles,
		builtinClusterRole("system:discovery",
			may("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
				"/api", "/api/*", "/apis", "/apis/*"),
		),
		builtinClusterRole("system:public-info-viewer",
			may("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/"),
		),
		builtinClusterRole("system:basic-user",
			may("create").in(apiGroupAuthorization).on("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			may("create").in(apiGroupAuthentication).on("selfsubjectreviews"),
		),
		builtinClusterRole("system:service-account-issuer-discovery",
			may("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/"),
		),
		// Health and metrics endpoints, including the individual checks (/livez/*), which say more.
		builtinClusterRole("system:monitoring",
			may("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*",
				"/healthz/*", "/statusz"),
			may("get").in(apiGroupCore).on("nodes/metrics"),
		),
	)

	// Delegated authentication and authorization, for extension API servers and the like.
	roles = append(roles,
		builtinClusterRole("system:auth-delegator",
			may("create").in(apiGroupAuthentication).on("tokenreviews"),
			may("create").in(apiGroupAuthorization).on("subjectaccessreviews"),
		),
		builtinClusterRole("system:kube-aggregator",
			may(verbsRead...).in(apiGroupCore).on("services", "endpoints"),
		),
		// Full access to the kubelet API (for the API server's kubelet client identity).
		builtinClusterRole("system:kubelet-api-admin",
			may(verbsRead...).in(apiGroupCore).on("nodes"),
			may("proxy").in(apiGroupCore).on("nodes"),
			may("*").in(apiGroupCore).on("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"),
			may("*").in(apiGroupCore).on("nodes/configz", "nodes/healthz", "nodes/pods"),
		),
	)

	// Control plane components.
	roles = append(roles,
		builtinClusterRole("system:kube-scheduler",
			mayRecordEvents(),
			// leader election
			may("create").in(apiGroupCoordination).on("leases"),
			may("get", "list", "update", "watch").in(apiGroupCoordination).on("leases").named("kube-scheduler"),
			may(verbsReadWrite...).in(apiGroupCoordination).on("leasecandidates"),
			// scheduling
			may(verbsRead...).in(apiGroupCore).on("nodes"),
			may("get", "list", "watch", "delete").in(apiGroupCore).on("pods"),
			may("create").in(apiGroupCore).on("pods/binding", "bindings"),
			may("patch", "update").in(apiGroupCore).on("pods/status"),
			// spreading and affinity
			may(verbsRead...).in(apiGroupCore).on("replicationcontrollers", "services"),
			may(verbsRead...).in(apiGroupApps, apiGroupExtensions).on("replicasets"),
			may(verbsRead...).in(apiGroupApps).on("statefulsets"),
			// preemption
			may(verbsRead...).in(apiGroupPolicy).on("poddisruptionbudgets"),
			// volumes
			may(verbsRead...).in(apiGroupCore).on("persistentvolumeclaims", "persistentvolumes"),
			// delegated authentication and authorization of its own endpoints
			may("create").in(apiGroupAuthentication).on("tokenreviews"),
			may("create").in(apiGroupAuthorization).on("subjectaccessreviews"),
			// CSI and storage capacity
			may(verbsRead...).in(apiGroupStorage).on("csinodes"),
			may(verbsRead...).in(apiGroupStorage).on("volumeattachments"),
			may(verbsRead...).in(apiGroupCore).on("namespaces"),
			may(verbsRead...).in(apiGroupStorage).on("csidrivers"),
			may(verbsRead...).in(apiGroupStorage).on("csistoragecapacities"),
			// dynamic resource allocation
			may(verbsRead...).in(apiGroupResource).on("deviceclasses"),
			may("get", "list", "watch", "update", "patch").in(apiGroupResource).on("resourceclaims"),
			may("get", "list", "watch", "update", "patch").in(apiGroupResource).on("resourceclaims/status"),
			may("update").in(apiGroupCore).on("pods/finalizers"),
			may(verbsRead...).in(apiGroupResource).on("resourceslices"),
			may("create", "delete").in(apiGroupResource).on("resourceclaims"),
		),
		// Persistent volume binding decisions of the scheduler.
		builtinClusterRole("system:volume-scheduler",
			may("get", "list", "watch", "update", "patch").in(apiGroupCore).on("persistentvolumes"),
			may(verbsRead...).in(apiGroupStorage).on("storageclasses"),
			may("get", "list", "watch", "update", "patch").in(apiGroupCore).on("persistentvolumeclaims"),
		),
		// What kube-controller-manager needs itself, before it hands each controller its own identity.
		builtinClusterRole("system:kube-controller-manager",
			mayRecordEvents(),
			// leader election
			may("create").in(apiGroupCoordination).on("leases"),
			may("get", "update").in(apiGroupCoordination).on("leases").named("kube-controller-manager"),
			// creating the controllers' service accounts and their tokens
			may("create").in(apiGroupCore).on("secrets", "serviceaccounts"),
			may("delete").in(apiGroupCore).on("secrets"),
			may("get").in(apiGroupCore).on("configmaps", "namespaces", "secrets", "serviceaccounts"),
			may("update").in(apiGroupCore).on("secrets", "serviceaccounts"),
			// delegated authentication and authorization of its own endpoints
			may("create").in(apiGroupAuthentication).on("tokenreviews"),
			may("create").in(apiGroupAuthorization).on("subjectaccessreviews"),
			// the shared informers
			may("list", "watch").in(apiGroupAll).on("*"),
			may("create").in(apiGroupCore).on("serviceaccounts/token"),
		),
		builtinClusterRole("system:kube-dns",
			may("list", "watch").in(apiGroupCore).on("endpoints", "services"),
		),
		builtinClusterRole("system:persistent-volume-provisioner",
			may("get", "list", "watch", "create", "delete").in(apiGroupCore).on("persistentvolumes"),
			// update: annotations, not the status
			may("get", "list", "watch", "update").in(apiGroupCore).on("persistentvolumeclaims"),
			may(verbsRead...).in(apiGroupStorage).on("storageclasses"),
			// watching provisioning progress
			may("watch").in(apiGroupCore).on("events"),
			mayRecordEvents(),
		),
	)

	// Nodes. system:node is not bound (the node authorizer decides for nodes) but kept, as upstream does, for
	// those who bind it themselves.
	roles = append(roles,
		builtinClusterRole("system:node",
			// checking access to the kubelet API
			may("create").in(apiGroupAuthentication).on("tokenreviews"),
			may("create").in(apiGroupAuthorization).on("subjectaccessreviews", "localsubjectaccessreviews"),
			// service environment variables
			may(verbsRead...).in(apiGroupCore).on("services"),
			// registering and updating its Node (NodeRestriction limits it to its own)
			may("create", "get", "list", "watch").in(apiGroupCore).on("nodes"),
			may("update", "patch").in(apiGroupCore).on("nodes/status"),
			may("update", "patch").in(apiGroupCore).on("nodes"),
			mayRecordEvents(),
			// its pods, mirror pods, their status and evictions
			may(verbsRead...).in(apiGroupCore).on("pods"),
			may("create", "delete").in(apiGroupCore).on("pods"),
			may("update", "patch").in(apiGroupCore).on("pods/status"),
			may("create").in(apiGroupCore).on("pods/eviction"),
			// what its pods use
			may(verbsRead...).in(apiGroupCore).on("secrets", "configmaps"),
			may("get").in(apiGroupCore).on("persistentvolumeclaims", "persistentvolumes"),
			may("get").in(apiGroupCore).on("endpoints"),
			// its client certificate
			may("create", "get", "list", "watch").in(apiGroupCertificates).on("certificatesigningrequests"),
			// its heartbeat lease
			may("get", "create", "update", "patch", "delete").in(apiGroupCoordination).on("leases"),
			may("get").in(apiGroupStorage).on("volumeattachments"),
			may("create").in(apiGroupCore).on("serviceaccounts/token"),
			may("get", "update", "patch").in(apiGroupCore).on("persistentvolumeclaims/status"),
			may("get", "watch", "list").in(apiGroupStorage).on("csidrivers"),
			may("get", "create", "update", "patch", "delete").in(apiGroupStorage).on("csinodes"),
			may(verbsRead...).in(apiGroupNode).on("runtimeclasses"),
			may("get").in(apiGroupResource).on("resourceclaims"),
			may("deletecollection").in(apiGroupResource).on("resourceslices"),
			may("get").in(apiGroupCore).on("serviceaccounts"),
		),
		builtinClusterRole("system:node-proxier",
			may("list", "watch").in(apiGroupCore).on("services", "endpoints"),
			may(verbsRead...).in(apiGroupCore).on("nodes"),
			mayRecordEvents(),
			may("list", "watch").in(apiGroupNetworking).on("servicecidrs"),
			may("list", "watch").in(apiGroupDiscovery).on("endpointslices"),
		),
		// A kubelet's bootstrap credential: only enough to ask for its client certificate.
		builtinClusterRole("system:node-bootstrapper",
			may("create", "get", "list", "watch").in(apiGroupCertificates).on("certificatesigningrequests"),
		),
		builtinClusterRole("system:node-problem-detector",
			may("get").in(apiGroupCore).on("nodes"),
			may("patch").in(apiGroupCore).on("nodes/status"),
			mayRecordEvents(),
		),
	)

	// Certificate signing requests: who may ask for and approve which certificates.
	roles = append(roles,
		builtinClusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			may("create").in(apiGroupCertificates).on("certificatesigningrequests/nodeclient"),
		),
		builtinClusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			may("create").in(apiGroupCertificates).on("certificatesigningrequests/selfnodeclient"),
		),
	)
	for _, signer := range []string{"kube-apiserver-client", "kube-apiserver-client-kubelet", "kubelet-serving",
		"legacy-unknown"} {
		roles = append(roles, builtinClusterRole("system:certificates.k8s.io:"+signer+"-approver",
			may("approve").in(apiGroupCertificates).on("signers").named("kubernetes.io/"+signer),
		))
	}
	return roles
}

// builtinClusterRoleBindings are upstream's ClusterRoleBindings other than the controllers' ones.
func builtinClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		builtinClusterRoleBinding("cluster-admin", "cluster-admin", subjectGroup(systemMastersGroup)),
		builtinClusterRoleBinding("system:monitoring", "system:monitoring", subjectGroup(systemMonitoringGroup)),
		builtinClusterRoleBinding("system:discovery", "system:discovery", subjectGroup(systemAuthenticatedGroup)),
		builtinClusterRoleBinding("system:basic-user", "system:basic-user", subjectGroup(systemAuthenticatedGroup)),
		builtinClusterRoleBinding("system:public-info-viewer", "system:public-info-viewer",
			subjectGroup(systemAuthenticatedGroup), subjectGroup(systemUnauthenticatedGroup)),
		builtinClusterRoleBinding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
			subjectGroup(systemServiceAccountsGroup)),
		builtinClusterRoleBinding("system:node-proxier", "system:node-proxier", subjectUser(kubeProxyUser)),
		builtinClusterRoleBinding("system:kube-controller-manager", "system:kube-controller-manager",
			subjectUser(kubeControllerManagerUser)),
		builtinClusterRoleBinding("system:kube-dns", "system:kube-dns",
			subjectServiceAccount(kubeSystemNamespace, "kube-dns")),
		builtinClusterRoleBinding("system:kube-scheduler", "system:kube-scheduler", subjectUser(kubeSchedulerUser)),
		builtinClusterRoleBinding("system:volume-scheduler", "system:volume-scheduler",
			subjectUser(kubeSchedulerUser)),
	}
}

// builtinTeamBindings give a Wheelhouse team's members their access to the team's clusters.
func builtinTeamBindings() []rbacv1.ClusterRoleBinding {
	team := func(group, clusterRole, description string) rbacv1.ClusterRoleBinding {
		b := builtinClusterRoleBinding(group, clusterRole, subjectGroup(group))
		b.Labels[managedByLabel] = "wheelhouse"
		b.Annotations[descriptionAnnotation] = description
		return b
	}
	return []rbacv1.ClusterRoleBinding{
		team(wheelhouseTeamOwner, "cluster-admin", "Team owners have full access to the cluster."),
		team(wheelhouseTeamAdmin, "cluster-admin", "Team admins have full access to the cluster."),
		team(wheelhouseTeamMember, "edit", "Team members may read and change workloads in every namespace, "+
			"but not RBAC objects."),
		team(wheelhouseTeamViewer, "view", "Team viewers may read workloads in every namespace, but not secrets."),
	}
}

// controllerRole is the ClusterRole of one kube-controller-manager controller.
func controllerRole(controller string, rules ...ruleSpec) rbacv1.ClusterRole {
	return builtinClusterRole(controllerRolePrefix+controller, rules...)
}

// builtinControllerRoles are the roles of kube-controller-manager's controllers (upstream's controller_policy.go
// with its default feature gates). Each is bound to the controller's ServiceAccount by
// builtinControllerRoleBindings.
func builtinControllerRoles() []rbacv1.ClusterRole {
	// Workload controllers.
	roles := []rbacv1.ClusterRole{
		controllerRole("cronjob-controller",
			may("get", "list", "watch", "update").in(apiGroupBatch).on("cronjobs"),
			may("get", "list", "watch", "create", "update", "delete", "patch").in(apiGroupBatch).on("jobs"),
			may("update").in(apiGroupBatch).on("cronjobs/status"),
			may("update").in(apiGroupBatch).on("cronjobs/finalizers"),
			may("list", "watch", "delete").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("daemon-set-controller",
			may(verbsRead...).in(apiGroupExtensions, apiGroupApps).on("daemonsets"),
			may("update").in(apiGroupExtensions, apiGroupApps).on("daemonsets/status"),
			may("update").in(apiGroupExtensions, apiGroupApps).on("daemonsets/finalizers"),
			may("list", "watch").in(apiGroupCore).on("nodes"),
			may("list", "watch", "create", "delete", "patch").in(apiGroupCore).on("pods"),
			may("create").in(apiGroupCore).on("pods/binding"),
			may("get", "list", "watch", "create", "delete", "update", "patch").in(apiGroupApps).
				on("controllerrevisions"),
			mayRecordEvents(),
		),
		controllerRole("deployment-controller",
			may("get", "list", "watch", "update").in(apiGroupExtensions, apiGroupApps).on("deployments"),
			may("update").in(apiGroupExtensions, apiGroupApps).on("deployments/status"),
			may("update").in(apiGroupExtensions, apiGroupApps).on("deployments/finalizers"),
			may("get", "list", "watch", "create", "update", "patch", "delete").in(apiGroupApps, apiGroupExtensions).
				on("replicasets"),
			// pods are listed to find orphans; update lets it adopt them
			may("get", "list", "watch", "update").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("disruption-controller",
			may(verbsRead...).in(apiGroupExtensions, apiGroupApps).on("deployments"),
			may(verbsRead...).in(apiGroupApps, apiGroupExtensions).on("replicasets"),
			may(verbsRead...).in(apiGroupCore).on("replicationcontrollers"),
			may(verbsRead...).in(apiGroupPolicy).on("poddisruptionbudgets"),
			may(verbsRead...).in(apiGroupApps).on("statefulsets"),
			may("update").in(apiGroupPolicy).on("poddisruptionbudgets/status"),
			may("patch", "update").in(apiGroupCore).on("pods/status"),
			may("get").in(apiGroupAll).on("*/scale"),
			mayRecordEvents(),
		),
		controllerRole("horizontal-pod-autoscaler",
			may(verbsRead...).in(apiGroupAutoscaling).on("horizontalpodautoscalers"),
			may("update").in(apiGroupAutoscaling).on("horizontalpodautoscalers/status"),
			may("get", "update").in(apiGroupAll).on("*/scale"),
			may("list", "watch").in(apiGroupCore).on("pods"),
			may("list", "watch").in(apiGroupMetrics).on("pods"),
			may(verbsRead...).in(apiGroupCustomMetrics).on("*"),
			may(verbsRead...).in(apiGroupExternalMetrics).on("*"),
			mayRecordEvents(),
		),
		controllerRole("job-controller",
			may("get", "list", "watch", "update", "patch").in(apiGroupBatch).on("jobs"),
			may("update").in(apiGroupBatch).on("jobs/status"),
			may("update").in(apiGroupBatch).on("jobs/finalizers"),
			may("list", "watch", "create", "delete", "patch").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("replicaset-controller",
			may("get", "list", "watch", "update").in(apiGroupApps, apiGroupExtensions).on("replicasets"),
			may("update").in(apiGroupApps, apiGroupExtensions).on("replicasets/status"),
			may("update").in(apiGroupApps, apiGroupExtensions).on("replicasets/finalizers"),
			may("list", "watch", "patch", "create", "delete").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("replication-controller",
			may("get", "list", "watch", "update").in(apiGroupCore).on("replicationcontrollers"),
			may("update").in(apiGroupCore).on("replicationcontrollers/status"),
			may("update").in(apiGroupCore).on("replicationcontrollers/finalizers"),
			may("list", "watch", "patch", "create", "delete").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("statefulset-controller",
			may("list", "watch").in(apiGroupCore).on("pods"),
			may(verbsRead...).in(apiGroupApps).on("statefulsets"),
			may("update").in(apiGroupApps).on("statefulsets/status"),
			may("update").in(apiGroupApps).on("statefulsets/finalizers"),
			may("get", "create", "delete", "update", "patch").in(apiGroupCore).on("pods"),
			may("get", "list", "watch", "create", "delete", "update", "patch").in(apiGroupApps).
				on("controllerrevisions"),
			may("get", "list", "watch", "create").in(apiGroupCore).on("persistentvolumeclaims"),
			may("update", "delete").in(apiGroupCore).on("persistentvolumeclaims"),
			may("update").in(apiGroupCore).on("pods/finalizers"),
			mayRecordEvents(),
		),
		controllerRole("ttl-after-finished-controller",
			may("get", "list", "watch", "delete").in(apiGroupBatch).on("jobs"),
			mayRecordEvents(),
		),
	}

	// Garbage collection and namespace lifecycle.
	roles = append(roles,
		controllerRole("generic-garbage-collector",
			// it deletes dependents of any kind, and updates their owner references
			may("get", "list", "watch", "patch", "update", "delete").in(apiGroupAll).on("*"),
			mayRecordEvents(),
		),
		controllerRole("namespace-controller",
			may("get", "list", "watch", "delete").in(apiGroupCore).on("namespaces"),
			may("update").in(apiGroupCore).on("namespaces/finalize", "namespaces/status"),
			may("get", "list", "watch", "delete", "deletecollection").in(apiGroupAll).on("*"),
		),
		controllerRole("pod-garbage-collector",
			may("list", "watch", "delete").in(apiGroupCore).on("pods"),
			may(verbsRead...).in(apiGroupCore).on("nodes"),
			may("patch").in(apiGroupCore).on("pods/status"),
		),
		controllerRole("resourcequota-controller",
			// quota can count quota on anything for reconciliation, so it needs full list/watch
			may("list", "watch").in(apiGroupAll).on("*"),
			may("update").in(apiGroupCore).on("resourcequotas/status"),
			mayRecordEvents(),
		),
	)

	// Nodes, services and networking.
	roles = append(roles,
		controllerRole("node-controller",
			may("get", "list", "update", "delete", "patch", "watch").in(apiGroupCore).on("nodes"),
			may("patch", "update").in(apiGroupCore).on("nodes/status"),
			// evicting pods from unreachable nodes
			may("patch", "update").in(apiGroupCore).on("pods/status"),
			may("list", "watch", "delete", "get").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("route-controller",
			may("list", "watch").in(apiGroupCore).on("nodes"),
			may("patch").in(apiGroupCore).on("nodes/status"),
			mayRecordEvents(),
		),
		controllerRole("ttl-controller",
			may("update", "patch", "list", "watch").in(apiGroupCore).on("nodes"),
			mayRecordEvents(),
		),
		controllerRole("service-controller",
			may(verbsRead...).in(apiGroupCore).on("services"),
			may("patch", "update").in(apiGroupCore).on("services/status"),
			may("list", "watch").in(apiGroupCore).on("nodes"),
			mayRecordEvents(),
		),
		controllerRole("endpoint-controller",
			may(verbsRead...).in(apiGroupCore).on("services", "pods"),
			may("get", "list", "create", "update", "delete", "watch").in(apiGroupCore).on("endpoints"),
			may("create").in(apiGroupCore).on("endpoints/restricted"),
			mayRecordEvents(),
		),
		controllerRole("endpointslice-controller",
			may(verbsRead...).in(apiGroupCore).on("services", "pods", "nodes"),
			// finalizers: owner references with blockOwnerDeletion
			may("update").in(apiGroupCore).on("services/finalizers"),
			may("get", "list", "create", "update", "delete", "watch").in(apiGroupDiscovery).on("endpointslices"),
			mayRecordEvents(),
		),
		controllerRole("endpointslicemirroring-controller",
			may(verbsRead...).in(apiGroupCore).on("services", "endpoints"),
			may("update").in(apiGroupCore).on("services/finalizers"),
			may("update").in(apiGroupCore).on("endpoints/finalizers"),
			may("get", "list", "create", "update", "delete", "watch").in(apiGroupDiscovery).on("endpointslices"),
			mayRecordEvents(),
		),
		controllerRole("service-cidrs-controller",
			may("get", "list", "watch", "patch", "update").in(apiGroupNetworking).on("servicecidrs"),
			may("patch", "update").in(apiGroupNetworking).on("servicecidrs/finalizers"),
			may("patch", "update").in(apiGroupNetworking).on("servicecidrs/status"),
			may(verbsRead...).in(apiGroupNetworking).on("ipaddresses"),
			mayRecordEvents(),
		),
	)

	// Storage.
	roles = append(roles,
		controllerRole("attachdetach-controller",
			may("list", "watch").in(apiGroupCore).on("persistentvolumes", "persistentvolumeclaims"),
			may("get", "list", "watch").in(apiGroupCore).on("nodes"),
			may("patch", "update").in(apiGroupCore).on("nodes/status"),
			may("list", "watch").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
			may("get", "create", "delete", "list", "watch").in(apiGroupStorage).on("volumeattachments"),
			may("get", "watch", "list").in(apiGroupStorage).on("csidrivers"),
			may("get", "watch", "list").in(apiGroupStorage).on("csinodes"),
		),
		controllerRole("persistent-volume-binder",
			may("get", "list", "watch", "update", "create", "delete").in(apiGroupCore).on("persistentvolumes"),
			may("update").in(apiGroupCore).on("persistentvolumes/status"),
			may("get", "list", "watch", "update").in(apiGroupCore).on("persistentvolumeclaims"),
			may("update").in(apiGroupCore).on("persistentvolumeclaims/status"),
			may("list", "watch", "get", "create", "delete").in(apiGroupCore).on("pods"),
			may(verbsRead...).in(apiGroupStorage).on("storageclasses"),
			may("watch", "list").in(apiGroupCore).on("nodes"),
			mayRecordEvents(),
			may("watch").in(apiGroupCore).on("events"),
		),
		controllerRole("expand-controller",
			may("get", "list", "watch", "update", "patch").in(apiGroupCore).on("persistentvolumes"),
			may("update", "patch").in(apiGroupCore).on("persistentvolumeclaims/status"),
			may(verbsRead...).in(apiGroupCore).on("persistentvolumeclaims"),
			mayRecordEvents(),
		),
		controllerRole("ephemeral-volume-controller",
			may(verbsRead...).in(apiGroupCore).on("pods"),
			may("update").in(apiGroupCore).on("pods/finalizers"),
			may("get", "list", "watch", "create").in(apiGroupCore).on("persistentvolumeclaims"),
			mayRecordEvents(),
		),
		controllerRole("pv-protection-controller",
			may("get", "list", "watch", "update").in(apiGroupCore).on("persistentvolumes"),
			mayRecordEvents(),
		),
		controllerRole("pvc-protection-controller",
			may("get", "list", "watch", "update").in(apiGroupCore).on("persistentvolumeclaims"),
			may("update").in(apiGroupCore).on("persistentvolumeclaims/status"),
			may("list", "watch", "get").in(apiGroupCore).on("pods"),
			mayRecordEvents(),
		),
		controllerRole("volumeattributesclass-protection-controller",
			may("get", "list", "watch").in(apiGroupCore).on("persistentvolumeclaims"),
			may("get", "list", "watch").in(apiGroupCore).on("persistentvolumes"),
			may("get", "list", "watch", "update").in(apiGroupStorage).on("volumeattributesclasses"),
			mayRecordEvents(),
		),
		controllerRole("selinux-warning-controller",
			mayRecordEvents(),
			may(verbsRead...).in(apiGroupCore).on("persistentvolumes"),
			may(verbsRead...).in(apiGroupCore).on("persistentvolumeclaims"),
			may(verbsRead...).in(apiGroupCore).on("pods"),
			may(verbsRead...).in(apiGroupStorage).on("csidrivers"),
		),
	)

	// Dynamic resource allocation.
	roles = append(roles,
		controllerRole("resource-claim-controller",
			may(verbsRead...).in(apiGroupCore).on("pods"),
			may("update").in(apiGroupCore).on("pods/finalizers"),
			may("get", "list", "watch", "create", "delete").in(apiGroupResource).on("resourceclaims"),
			may("update", "patch").in(apiGroupResource).on("resourceclaims", "resourceclaims/status"),
			may("update", "patch").in(apiGroupCore).on("pods/status"),
			mayRecordEvents(),
			may("update", "patch").in(apiGroupResource).on("resourceclaims/binding"),
		),
		controllerRole("device-taint-eviction-controller",
			may("get", "list", "watch", "delete").in(apiGroupCore).on("pods"),
			may("update", "patch").in(apiGroupCore).on("pods/status"),
			may(verbsRead...).in(apiGroupResource).on("resourceclaims"),
			may(verbsRead...).in(apiGroupResource).on("resourceslices"),
			may(verbsRead...).in(apiGroupResource).on("deviceclasses"),
			mayRecordEvents(),
		),
	)

	// Identity, certificates and RBAC.
	roles = append(roles,
		controllerRole("service-account-controller",
			may("create").in(apiGroupCore).on("serviceaccounts"),
			mayRecordEvents(),
		),
		controllerRole("legacy-service-account-token-cleaner",
			may("get").in(apiGroupCore).on("configmaps").named("kube-apiserver-legacy-service-account-token-tracking"),
			may("patch", "delete").in(apiGroupCore).on("secrets"),
		),
		controllerRole("root-ca-cert-publisher",
			may("create", "update").in(apiGroupCore).on("configmaps"),
			mayRecordEvents(),
		),
		controllerRole("certificate-controller",
			may("get", "list", "watch", "delete").in(apiGroupCertificates).on("certificatesigningrequests"),
			may("update").in(apiGroupCertificates).on("certificatesigningrequests/status",
				"certificatesigningrequests/approval"),
			may("approve").in(apiGroupCertificates).on("signers").named("kubernetes.io/kube-apiserver-client-kubelet"),
			may("sign").in(apiGroupCertificates).on("signers").named("kubernetes.io/kube-apiserver-client",
				"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving",
				"kubernetes.io/legacy-unknown"),
			may("create").in(apiGroupAuthorization).on("subjectaccessreviews"),
			mayRecordEvents(),
		),
		controllerRole("clusterrole-aggregation-controller",
			// escalate: it writes rules it does not hold itself
			may("escalate", "get", "list", "watch", "update", "patch").in(apiGroupRBAC).on("clusterroles"),
		),
		controllerRole("validatingadmissionpolicy-status-controller",
			may(verbsRead...).in(apiGroupAdmission).on("validatingadmissionpolicies"),
			may("get", "patch", "update").in(apiGroupAdmission).on("validatingadmissionpolicies/status"),
			mayRecordEvents(),
		),
	)
	return roles
}

// builtinControllerRoleBindings binds each controller role to the controller's ServiceAccount in kube-system.
func builtinControllerRoleBindings(controllerRoles []rbacv1.ClusterRole) []rbacv1.ClusterRoleBinding {
	bindings := make([]rbacv1.ClusterRoleBinding, 0, len(controllerRoles))
	for _, role := range controllerRoles {
		controller := strings.TrimPrefix(role.Name, controllerRolePrefix)
		bindings = append(bindings, builtinClusterRoleBinding(role.Name, role.Name,
			subjectServiceAccount(kubeSystemNamespace, controller)))
	}
	return bindings
}

// builtinNamespacedRoles are upstream's Roles in kube-system and kube-public.
func builtinNamespacedRoles() []rbacv1.Role {
	leaderLocking := func(name string) rbacv1.Role {
		return builtinRole(kubeSystemNamespace, name,
			may("watch", "get", "list", "create", "update").in(apiGroupCoordination).on("leases"),
			may("watch", "get", "list", "create", "update").in(apiGroupCoordination).on("leasecandidates"),
		)
	}
	return []rbacv1.Role{
		// Extension API servers read the front proxy's client CA and headers from this ConfigMap.
		builtinRole(kubeSystemNamespace, "extension-apiserver-authentication-reader",
			may(verbsRead...).in(apiGroupCore).on("configmaps").named("extension-apiserver-authentication"),
		),
		leaderLocking("system::leader-locking-kube-controller-manager"),
		leaderLocking("system::leader-locking-kube-scheduler"),
		// The bootstrap signer reads bootstrap token secrets and signs the cluster-info ConfigMap.
		builtinRole(kubeSystemNamespace, controllerRolePrefix+"bootstrap-signer",
			may(verbsRead...).in(apiGroupCore).on("secrets"),
		),
		builtinRole(kubePublicNamespace, controllerRolePrefix+"bootstrap-signer",
			may(verbsRead...).in(apiGroupCore).on("configmaps"),
			may("update").in(apiGroupCore).on("configmaps").named("cluster-info"),
			mayRecordEvents(),
		),
		builtinRole(kubeSystemNamespace, controllerRolePrefix+"cloud-provider",
			may("create", "get", "list", "watch").in(apiGroupCore).on("configmaps"),
		),
		// The token cleaner deletes expired bootstrap tokens.
		builtinRole(kubeSystemNamespace, controllerRolePrefix+"token-cleaner",
			may("delete", "get", "list", "watch").in(apiGroupCore).on("secrets"),
			mayRecordEvents(),
		),
	}
}

// builtinNamespacedRoleBindings are upstream's RoleBindings in kube-system and kube-public.
func builtinNamespacedRoleBindings() []rbacv1.RoleBinding {
	return []rbacv1.RoleBinding{
		builtinRoleBinding(kubeSystemNamespace, "system::extension-apiserver-authentication-reader",
			"extension-apiserver-authentication-reader",
			subjectUser(kubeControllerManagerUser), subjectUser(kubeSchedulerUser)),
		builtinRoleBinding(kubeSystemNamespace, "system::leader-locking-kube-controller-manager",
			"system::leader-locking-kube-controller-manager",
			subjectUser(kubeControllerManagerUser),
			subjectServiceAccount(kubeSystemNamespace, "kube-controller-manager"),
			subjectServiceAccount(kubeSystemNamespace, "leader-election-controller")),
		builtinRoleBinding(kubeSystemNamespace, "system::leader-locking-kube-scheduler",
			"system::leader-locking-kube-scheduler",
			subjectUser(kubeSchedulerUser), subjectServiceAccount(kubeSystemNamespace, "kube-scheduler")),
		builtinRoleBinding(kubeSystemNamespace, controllerRolePrefix+"bootstrap-signer",
			controllerRolePrefix+"bootstrap-signer", subjectServiceAccount(kubeSystemNamespace, "bootstrap-signer")),
		builtinRoleBinding(kubePublicNamespace, controllerRolePrefix+"bootstrap-signer",
			controllerRolePrefix+"bootstrap-signer", subjectServiceAccount(kubeSystemNamespace, "bootstrap-signer")),
		builtinRoleBinding(kubeSystemNamespace, controllerRolePrefix+"cloud-provider",
			controllerRolePrefix+"cloud-provider", subjectServiceAccount(kubeSystemNamespace, "cloud-provider")),
		builtinRoleBinding(kubeSystemNamespace, controllerRolePrefix+"token-cleaner",
			controllerRolePrefix+"token-cleaner", subjectServiceAccount(kubeSystemNamespace, "token-cleaner")),
	}
}
