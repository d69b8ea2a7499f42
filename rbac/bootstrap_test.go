package rbac

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The helpers of this file are prefixed with bs (bootstrap) to stay clear of the package's other tests.

// bsRuleAllows reports whether one rule allows verb on (group, resource, subresource, name), with upstream's
// semantics (k8s.io/component-helpers/auth/rbac/validation): "*" matches any verb, group or resource,
// "*/sub" matches subresource sub of any resource, and resourceNames (if any) must contain the name.
func bsRuleAllows(r rbacv1.PolicyRule, verb, group, resource, subresource, name string) bool {
	if !bsHasOrStar(r.Verbs, verb) || !bsHasOrStar(r.APIGroups, group) {
		return false
	}
	combined := resource
	if subresource != "" {
		combined += "/" + subresource
	}
	resourceOK := false
	for _, rr := range r.Resources {
		if rr == rbacv1.ResourceAll || rr == combined || (subresource != "" && rr == "*/"+subresource) {
			resourceOK = true
			break
		}
	}
	if !resourceOK {
		return false
	}
	return len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))
}

// bsURLAllows reports whether one rule allows verb on a non-resource URL: "*" matches any path and a trailing
// "*" any path with that prefix.
func bsURLAllows(r rbacv1.PolicyRule, verb, path string) bool {
	if !bsHasOrStar(r.Verbs, verb) {
		return false
	}
	for _, u := range r.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

func bsHasOrStar(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// bsAllows reports whether any of rules allows verb on (group, resource[/subresource]) of any name.
func bsAllows(rules []rbacv1.PolicyRule, verb, group, resource, subresource string) bool {
	return bsAllowsNamed(rules, verb, group, resource, subresource, "")
}

func bsAllowsNamed(rules []rbacv1.PolicyRule, verb, group, resource, subresource, name string) bool {
	for _, r := range rules {
		if bsRuleAllows(r, verb, group, resource, subresource, name) {
			return true
		}
	}
	return false
}

func bsAllowsURL(rules []rbacv1.PolicyRule, verb, path string) bool {
	for _, r := range rules {
		if bsURLAllows(r, verb, path) {
			return true
		}
	}
	return false
}

// bsEffectiveRules are the rules of ClusterRole name after aggregation: an aggregated role has the rules of
// every other ClusterRole its selectors match, transitively (admin gets edit's, which gets view's), as
// upstream's clusterrole-aggregation controller computes them.
func bsEffectiveRules(t *testing.T, roles []rbacv1.ClusterRole, name string) []rbacv1.PolicyRule {
	t.Helper()
	var visit func(name string, seen map[string]bool) []rbacv1.PolicyRule
	visit = func(name string, seen map[string]bool) []rbacv1.PolicyRule {
		if seen[name] {
			return nil
		}
		seen[name] = true
		role := bsClusterRole(t, roles, name)
		if role.AggregationRule == nil {
			return role.Rules
		}
		var rules []rbacv1.PolicyRule
		for _, s := range role.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				t.Fatalf("ClusterRole %s: selector: %v", name, err)
			}
			for _, other := range roles {
				if other.Name != name && sel.Matches(labels.Set(other.Labels)) {
					rules = append(rules, visit(other.Name, seen)...)
				}
			}
		}
		return rules
	}
	return visit(name, map[string]bool{})
}

func bsClusterRole(t *testing.T, roles []rbacv1.ClusterRole, name string) rbacv1.ClusterRole {
	t.Helper()
	for _, r := range roles {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no ClusterRole %q", name)
	return rbacv1.ClusterRole{}
}

func bsClusterRoleBinding(d Defaults, name string) (rbacv1.ClusterRoleBinding, bool) {
	for _, b := range d.ClusterRoleBindings {
		if b.Name == name {
			return b, true
		}
	}
	return rbacv1.ClusterRoleBinding{}, false
}

func bsCheckRules(t *testing.T, what string, rules []rbacv1.PolicyRule, namespaced bool) {
	t.Helper()
	for i, r := range rules {
		where := fmt.Sprintf("%s: rule %d", what, i)
		if len(r.Verbs) == 0 || slices.Contains(r.Verbs, "") {
			t.Errorf("%s: verbs %q", where, r.Verbs)
		}
		hasResources := len(r.Resources) > 0
		hasURLs := len(r.NonResourceURLs) > 0
		switch {
		case hasResources && hasURLs:
			t.Errorf("%s: both resources and nonResourceURLs: %+v", where, r)
		case hasResources:
			if len(r.APIGroups) == 0 {
				t.Errorf("%s: resources without apiGroups: %+v", where, r)
			}
			if slices.Contains(r.Resources, "") {
				t.Errorf("%s: empty resource: %+v", where, r)
			}
		case hasURLs:
			if len(r.APIGroups) > 0 || len(r.ResourceNames) > 0 {
				t.Errorf("%s: nonResourceURLs with apiGroups or resourceNames: %+v", where, r)
			}
			if namespaced {
				t.Errorf("%s: nonResourceURLs in a namespaced Role: %+v", where, r)
			}
			for _, u := range r.NonResourceURLs {
				if u != "*" && !strings.HasPrefix(u, "/") {
					t.Errorf("%s: nonResourceURL %q", where, u)
				}
			}
		default:
			t.Errorf("%s: neither resources nor nonResourceURLs: %+v", where, r)
		}
	}
}

func bsCheckMeta(t *testing.T, kind string, tm metav1.TypeMeta, om metav1.ObjectMeta, namespaced bool) {
	t.Helper()
	id := kind + " " + om.Namespace + "/" + om.Name
	if om.Name == "" {
		t.Errorf("%s: no name", kind)
	}
	if tm.APIVersion != "rbac.authorization.k8s.io/v1" || tm.Kind != kind {
		t.Errorf("%s: TypeMeta %+v", id, tm)
	}
	if namespaced != (om.Namespace != "") {
		t.Errorf("%s: namespace %q", id, om.Namespace)
	}
	if namespaced && om.Namespace != "kube-system" && om.Namespace != "kube-public" {
		t.Errorf("%s: unexpected namespace", id)
	}
	if om.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
		t.Errorf("%s: labels %v", id, om.Labels)
	}
	if om.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" {
		t.Errorf("%s: annotations %v", id, om.Annotations)
	}
}

func bsCheckSubjects(t *testing.T, id string, subjects []rbacv1.Subject) {
	t.Helper()
	if len(subjects) == 0 {
		t.Errorf("%s: no subjects", id)
	}
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName || s.Namespace != "" || s.Name == "" {
				t.Errorf("%s: subject %+v", id, s)
			}
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" || s.Namespace == "" || s.Name == "" {
				t.Errorf("%s: subject %+v", id, s)
			}
		default:
			t.Errorf("%s: subject kind %q", id, s.Kind)
		}
	}
}

func TestBootstrapDefaultsAreValid(t *testing.T) {
	d := BootstrapDefaults()
	if len(d.ClusterRoles) == 0 || len(d.ClusterRoleBindings) == 0 || len(d.Roles) == 0 || len(d.RoleBindings) == 0 {
		t.Fatalf("empty defaults: %d cluster roles, %d cluster role bindings, %d roles, %d role bindings",
			len(d.ClusterRoles), len(d.ClusterRoleBindings), len(d.Roles), len(d.RoleBindings))
	}

	clusterRoles := map[string]bool{}
	for _, cr := range d.ClusterRoles {
		bsCheckMeta(t, "ClusterRole", cr.TypeMeta, cr.ObjectMeta, false)
		if clusterRoles[cr.Name] {
			t.Errorf("duplicate ClusterRole %s", cr.Name)
		}
		clusterRoles[cr.Name] = true
		if cr.AggregationRule != nil {
			// stored as upstream stores them, before aggregation fills them in
			if len(cr.Rules) != 0 {
				t.Errorf("aggregated ClusterRole %s has rules of its own", cr.Name)
			}
			if len(cr.AggregationRule.ClusterRoleSelectors) == 0 {
				t.Errorf("aggregated ClusterRole %s has no selectors", cr.Name)
			}
			for _, s := range cr.AggregationRule.ClusterRoleSelectors {
				if _, err := metav1.LabelSelectorAsSelector(&s); err != nil || len(s.MatchLabels) == 0 {
					t.Errorf("aggregated ClusterRole %s: selector %+v: %v", cr.Name, s, err)
				}
			}
			continue
		}
		if len(cr.Rules) == 0 {
			t.Errorf("ClusterRole %s has no rules", cr.Name)
		}
		bsCheckRules(t, "ClusterRole "+cr.Name, cr.Rules, false)
	}

	roles := map[string]bool{} // namespace/name
	for _, r := range d.Roles {
		bsCheckMeta(t, "Role", r.TypeMeta, r.ObjectMeta, true)
		key := r.Namespace + "/" + r.Name
		if roles[key] {
			t.Errorf("duplicate Role %s", key)
		}
		roles[key] = true
		if len(r.Rules) == 0 {
			t.Errorf("Role %s has no rules", key)
		}
		bsCheckRules(t, "Role "+key, r.Rules, true)
	}

	seen := map[string]bool{}
	for _, b := range d.ClusterRoleBindings {
		bsCheckMeta(t, "ClusterRoleBinding", b.TypeMeta, b.ObjectMeta, false)
		id := "ClusterRoleBinding " + b.Name
		if seen[b.Name] {
			t.Errorf("duplicate %s", id)
		}
		seen[b.Name] = true
		if b.RoleRef.APIGroup != rbacv1.GroupName || b.RoleRef.Kind != "ClusterRole" || !clusterRoles[b.RoleRef.Name] {
			t.Errorf("%s: roleRef %+v does not name a built-in ClusterRole", id, b.RoleRef)
		}
		bsCheckSubjects(t, id, b.Subjects)
	}

	seen = map[string]bool{}
	for _, b := range d.RoleBindings {
		bsCheckMeta(t, "RoleBinding", b.TypeMeta, b.ObjectMeta, true)
		id := "RoleBinding " + b.Namespace + "/" + b.Name
		if seen[b.Namespace+"/"+b.Name] {
			t.Errorf("duplicate %s", id)
		}
		seen[b.Namespace+"/"+b.Name] = true
		ok := b.RoleRef.APIGroup == rbacv1.GroupName &&
			(b.RoleRef.Kind == "Role" && roles[b.Namespace+"/"+b.RoleRef.Name] ||
				b.RoleRef.Kind == "ClusterRole" && clusterRoles[b.RoleRef.Name])
		if !ok {
			t.Errorf("%s: roleRef %+v does not name a built-in role", id, b.RoleRef)
		}
		bsCheckSubjects(t, id, b.Subjects)
	}
}

func TestBootstrapDefaultsHasTheUpstreamRoles(t *testing.T) {
	d := BootstrapDefaults()
	names := map[string]bool{}
	for _, cr := range d.ClusterRoles {
		names[cr.Name] = true
	}
	for _, name := range []string{
		"cluster-admin", "admin", "edit", "view",
		"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view",
		"system:discovery", "system:basic-user", "system:public-info-viewer", "system:monitoring",
		"system:auth-delegator", "system:kube-aggregator", "system:kubelet-api-admin",
		"system:kube-scheduler", "system:volume-scheduler", "system:kube-controller-manager", "system:kube-dns",
		"system:node", "system:node-proxier", "system:node-bootstrapper", "system:node-problem-detector",
		"system:persistent-volume-provisioner", "system:service-account-issuer-discovery",
		"system:certificates.k8s.io:certificatesigningrequests:nodeclient",
		"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
		"system:certificates.k8s.io:kube-apiserver-client-approver",
		"system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
		"system:certificates.k8s.io:kubelet-serving-approver",
		"system:certificates.k8s.io:legacy-unknown-approver",
	} {
		if !names[name] {
			t.Errorf("no ClusterRole %s", name)
		}
	}
	for _, controller := range []string{
		"attachdetach-controller", "certificate-controller", "clusterrole-aggregation-controller",
		"cronjob-controller", "daemon-set-controller", "deployment-controller", "disruption-controller",
		"endpoint-controller", "endpointslice-controller", "endpointslicemirroring-controller",
		"ephemeral-volume-controller", "expand-controller", "generic-garbage-collector",
		"horizontal-pod-autoscaler", "job-controller", "legacy-service-account-token-cleaner",
		"namespace-controller", "node-controller", "persistent-volume-binder", "pod-garbage-collector",
		"pv-protection-controller", "pvc-protection-controller", "replicaset-controller", "replication-controller",
		"resource-claim-controller", "resourcequota-controller", "root-ca-cert-publisher", "route-controller",
		"service-account-controller", "service-controller", "statefulset-controller",
		"ttl-after-finished-controller", "ttl-controller", "validatingadmissionpolicy-status-controller",
	} {
		if !names["system:controller:"+controller] {
			t.Errorf("no ClusterRole system:controller:%s", controller)
		}
	}
	if names["system:heapster"] {
		t.Errorf("system:heapster is not wanted")
	}
}

// bsDeepCopy copies d through the API types' own DeepCopy.
func bsDeepCopy(d Defaults) Defaults {
	var c Defaults
	for i := range d.ClusterRoles {
		c.ClusterRoles = append(c.ClusterRoles, *d.ClusterRoles[i].DeepCopy())
	}
	for i := range d.ClusterRoleBindings {
		c.ClusterRoleBindings = append(c.ClusterRoleBindings, *d.ClusterRoleBindings[i].DeepCopy())
	}
	for i := range d.Roles {
		c.Roles = append(c.Roles, *d.Roles[i].DeepCopy())
	}
	for i := range d.RoleBindings {
		c.RoleBindings = append(c.RoleBindings, *d.RoleBindings[i].DeepCopy())
	}
	return c
}

// bsScribble changes every string reachable from v (in slices, maps, pointers and exported struct fields) and
// adds a key to every map[string]string.
func bsScribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~")
		}
	case reflect.Pointer:
		if !v.IsNil() {
			bsScribble(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				bsScribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			bsScribble(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			bsScribble(e)
			v.SetMapIndex(k, e)
		}
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()),
				reflect.ValueOf("yes").Convert(v.Type().Elem()))
		}
	}
}

// bsBackingArrays records the backing array of every non-empty slice and every map reachable from v, and
// reports (through dup) those found twice.
func bsBackingArrays(v reflect.Value, path string, seen map[uintptr]string, dup func(a, b string)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			bsBackingArrays(v.Elem(), path, seen, dup)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				bsBackingArrays(v.Field(i), path+"."+f.Name, seen, dup)
			}
		}
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return
		}
		if other, ok := seen[v.Pointer()]; ok {
			dup(other, path)
		}
		seen[v.Pointer()] = path
		if v.Kind() == reflect.Slice {
			for i := 0; i < v.Len(); i++ {
				bsBackingArrays(v.Index(i), fmt.Sprintf("%s[%d]", path, i), seen, dup)
			}
		}
	}
}

func TestBootstrapDefaultsReturnsFreshCopies(t *testing.T) {
	before := BootstrapDefaults()
	snapshot := bsDeepCopy(before)

	// No slice or map is shared inside one result: changing one object never changes another.
	bsBackingArrays(reflect.ValueOf(before), "Defaults", map[uintptr]string{}, func(a, b string) {
		t.Errorf("%s and %s share storage", a, b)
	})

	// Changing everything in one result changes neither an earlier nor a later one.
	mutated := BootstrapDefaults()
	bsScribble(reflect.ValueOf(&mutated))
	mutated.ClusterRoles = append(mutated.ClusterRoles[:1], mutated.ClusterRoles[2:]...)
	mutated.ClusterRoleBindings[0].Subjects = append(mutated.ClusterRoleBindings[0].Subjects, rbacv1.Subject{})
	if reflect.DeepEqual(mutated, snapshot) {
		t.Fatal("scribbling changed nothing")
	}
	if !reflect.DeepEqual(before, snapshot) {
		t.Error("changing one result changed an earlier one")
	}
	if after := BootstrapDefaults(); !reflect.DeepEqual(after, snapshot) {
		t.Error("changing one result changed a later one")
	}
}

func TestBootstrapUserFacingRoles(t *testing.T) {
	d := BootstrapDefaults()
	view := bsEffectiveRules(t, d.ClusterRoles, "view")
	edit := bsEffectiveRules(t, d.ClusterRoles, "edit")
	admin := bsEffectiveRules(t, d.ClusterRoles, "admin")

	type check struct {
		verb, group, resource, subresource string
		allowed                            bool
	}
	for _, tc := range []struct {
		role   string
		rules  []rbacv1.PolicyRule
		checks []check
	}{
		{"view", view, []check{
			{"get", "", "pods", "", true},
			{"list", "", "pods", "", true},
			{"watch", "", "pods", "", true},
			{"get", "", "pods", "log", true},
			{"list", "apps", "deployments", "", true},
			{"get", "", "configmaps", "", true},
			{"list", "", "events", "", true},
			{"get", "", "secrets", "", false},
			{"list", "", "secrets", "", false},
			{"watch", "", "secrets", "", false},
			{"create", "", "pods", "", false},
			{"create", "", "pods", "exec", false},
			{"get", "", "pods", "exec", false},
			{"delete", "apps", "deployments", "", false},
			{"get", "rbac.authorization.k8s.io", "roles", "", false},
		}},
		{"edit", edit, []check{
			{"create", "apps", "deployments", "", true},
			{"update", "apps", "deployments", "scale", true},
			{"delete", "batch", "jobs", "", true},
			{"get", "", "secrets", "", true},
			{"create", "", "secrets", "", true},
			{"create", "", "pods", "exec", true},
			{"get", "", "pods", "", true}, // aggregated from view
			{"impersonate", "", "serviceaccounts", "", true},
			{"create", "rbac.authorization.k8s.io", "roles", "", false},
			{"create", "rbac.authorization.k8s.io", "rolebindings", "", false},
			{"get", "rbac.authorization.k8s.io", "roles", "", false},
			{"update", "", "resourcequotas", "", false},
			{"update", "", "pods", "status", false},
			{"create", "", "namespaces", "", false},
		}},
		{"admin", admin, []check{
			{"create", "rbac.authorization.k8s.io", "rolebindings", "", true},
			{"create", "rbac.authorization.k8s.io", "roles", "", true},
			{"create", "authorization.k8s.io", "localsubjectaccessreviews", "", true},
			{"create", "apps", "deployments", "", true}, // aggregated from edit
			{"get", "", "secrets", "", true},
			{"get", "", "pods", "", true}, // aggregated from view, through edit
			{"create", "", "namespaces", "", false},
			{"escalate", "rbac.authorization.k8s.io", "roles", "", false},
			{"bind", "rbac.authorization.k8s.io", "clusterroles", "", false},
			{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
			{"update", "", "resourcequotas", "", false},
		}},
	} {
		for _, c := range tc.checks {
			if got := bsAllows(tc.rules, c.verb, c.group, c.resource, c.subresource); got != c.allowed {
				t.Errorf("%s: %s %s/%s/%s: allowed=%v, want %v", tc.role, c.verb, c.group, c.resource,
					c.subresource, got, c.allowed)
			}
		}
		if bsAllowsURL(tc.rules, "get", "/version") {
			t.Errorf("%s grants non-resource URLs", tc.role)
		}
	}

	// Aggregation nests: everything view grants, edit grants; everything edit grants, admin grants.
	for _, pair := range [][2]string{{"view", "edit"}, {"edit", "admin"}} {
		inner := bsEffectiveRules(t, d.ClusterRoles, pair[0])
		outer := bsEffectiveRules(t, d.ClusterRoles, pair[1])
		for _, r := range inner {
			if !slices.ContainsFunc(outer, func(o rbacv1.PolicyRule) bool { return reflect.DeepEqual(o, r) }) {
				t.Errorf("%s has a rule %s lacks: %+v", pair[0], pair[1], r)
			}
		}
	}

	// cluster-admin: everything, as exactly upstream's two rules.
	ca := bsClusterRole(t, d.ClusterRoles, "cluster-admin")
	want := []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}
	if !reflect.DeepEqual(ca.Rules, want) {
		t.Errorf("cluster-admin rules = %+v, want %+v", ca.Rules, want)
	}
	if !bsAllows(ca.Rules, "deletecollection", "example.com", "widgets", "status") ||
		!bsAllowsURL(ca.Rules, "post", "/anything/at/all") {
		t.Error("cluster-admin is not allowed everything")
	}
}

func TestBootstrapSystemRoles(t *testing.T) {
	d := BootstrapDefaults()
	rules := func(name string) []rbacv1.PolicyRule { return bsEffectiveRules(t, d.ClusterRoles, name) }

	discovery := rules("system:discovery")
	for _, path := range []string{"/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/version/",
		"/healthz", "/livez", "/readyz", "/openapi/v2", "/openapi/v3/apis/apps/v1"} {
		if !bsAllowsURL(discovery, "get", path) {
			t.Errorf("system:discovery: get %s denied", path)
		}
	}
	for _, c := range []struct{ verb, path string }{{"post", "/api"}, {"get", "/metrics"}, {"get", "/logs"},
		{"get", "/livez/etcd"}} {
		if bsAllowsURL(discovery, c.verb, c.path) {
			t.Errorf("system:discovery: %s %s allowed", c.verb, c.path)
		}
	}
	if bsAllows(discovery, "get", "", "pods", "") {
		t.Error("system:discovery grants resources")
	}

	public := rules("system:public-info-viewer")
	if !bsAllowsURL(public, "get", "/version") || !bsAllowsURL(public, "get", "/healthz") ||
		bsAllowsURL(public, "get", "/api") || bsAllowsURL(public, "get", "/apis") {
		t.Error("system:public-info-viewer: wrong URLs")
	}

	basic := rules("system:basic-user")
	if !bsAllows(basic, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "") ||
		!bsAllows(basic, "create", "authorization.k8s.io", "selfsubjectrulesreviews", "") ||
		!bsAllows(basic, "create", "authentication.k8s.io", "selfsubjectreviews", "") ||
		bsAllows(basic, "create", "authorization.k8s.io", "subjectaccessreviews", "") {
		t.Error("system:basic-user: wrong rules")
	}

	monitoring := rules("system:monitoring")
	if !bsAllowsURL(monitoring, "get", "/metrics") || !bsAllowsURL(monitoring, "get", "/livez/etcd") ||
		bsAllowsURL(monitoring, "get", "/api") {
		t.Error("system:monitoring: wrong URLs")
	}

	scheduler := rules("system:kube-scheduler")
	for _, c := range []struct{ verb, group, resource, subresource, name string }{
		{"create", "", "pods", "binding", ""},
		{"create", "", "bindings", "", ""},
		{"patch", "", "pods", "status", ""},
		{"delete", "", "pods", "", ""},
		{"list", "", "nodes", "", ""},
		{"update", "coordination.k8s.io", "leases", "", "kube-scheduler"},
	} {
		if !bsAllowsNamed(scheduler, c.verb, c.group, c.resource, c.subresource, c.name) {
			t.Errorf("system:kube-scheduler: %+v denied", c)
		}
	}
	if bsAllowsNamed(scheduler, "update", "coordination.k8s.io", "leases", "", "kube-controller-manager") ||
		bsAllows(scheduler, "create", "", "pods", "") || bsAllows(scheduler, "get", "", "secrets", "") {
		t.Error("system:kube-scheduler: too much")
	}
	if !bsAllows(rules("system:volume-scheduler"), "update", "", "persistentvolumeclaims", "") {
		t.Error("system:volume-scheduler cannot update PVCs")
	}

	kcm := rules("system:kube-controller-manager")
	if !bsAllows(kcm, "list", "example.com", "widgets", "") || !bsAllows(kcm, "watch", "", "secrets", "") ||
		bsAllows(kcm, "get", "", "pods", "") || bsAllows(kcm, "delete", "", "pods", "") {
		t.Error("system:kube-controller-manager: wrong rules")
	}

	proxier := rules("system:node-proxier")
	if !bsAllows(proxier, "watch", "discovery.k8s.io", "endpointslices", "") ||
		!bsAllows(proxier, "list", "", "services", "") || bsAllows(proxier, "get", "", "secrets", "") {
		t.Error("system:node-proxier: wrong rules")
	}

	node := rules("system:node")
	if !bsAllows(node, "patch", "", "nodes", "status") || !bsAllows(node, "get", "", "secrets", "") ||
		!bsAllows(node, "create", "", "pods", "eviction") || bsAllows(node, "delete", "", "nodes", "") {
		t.Error("system:node: wrong rules")
	}

	// Controllers.
	for _, c := range []struct {
		role                               string
		verb, group, resource, subresource string
	}{
		{"system:controller:generic-garbage-collector", "delete", "example.com", "widgets", ""},
		{"system:controller:namespace-controller", "deletecollection", "apps", "deployments", ""},
		{"system:controller:namespace-controller", "update", "", "namespaces", "finalize"},
		{"system:controller:clusterrole-aggregation-controller", "escalate", "rbac.authorization.k8s.io", "clusterroles", ""},
		{"system:controller:horizontal-pod-autoscaler", "update", "apps", "deployments", "scale"},
		{"system:controller:disruption-controller", "get", "example.com", "widgets", "scale"},
		{"system:controller:deployment-controller", "create", "apps", "replicasets", ""},
		{"system:controller:replicaset-controller", "create", "", "pods", ""},
		{"system:controller:job-controller", "update", "batch", "jobs", "status"},
		{"system:controller:cronjob-controller", "create", "batch", "jobs", ""},
		{"system:controller:daemon-set-controller", "create", "", "pods", "binding"},
		{"system:controller:statefulset-controller", "create", "", "persistentvolumeclaims", ""},
		{"system:controller:node-controller", "delete", "", "pods", ""},
		{"system:controller:endpointslice-controller", "create", "discovery.k8s.io", "endpointslices", ""},
		{"system:controller:resourcequota-controller", "update", "", "resourcequotas", "status"},
		{"system:controller:service-account-controller", "create", "", "serviceaccounts", ""},
		{"system:controller:root-ca-cert-publisher", "create", "", "configmaps", ""},
		{"system:controller:ttl-after-finished-controller", "delete", "batch", "jobs", ""},
		{"system:controller:pod-garbage-collector", "delete", "", "pods", ""},
	} {
		if !bsAllows(rules(c.role), c.verb, c.group, c.resource, c.subresource) {
			t.Errorf("%s: %s %s/%s/%s denied", c.role, c.verb, c.group, c.resource, c.subresource)
		}
	}
	if bsAllows(rules("system:controller:horizontal-pod-autoscaler"), "delete", "apps", "deployments", "") {
		t.Error("horizontal-pod-autoscaler may delete deployments")
	}
	if bsAllows(rules("system:controller:generic-garbage-collector"), "create", "", "pods", "") {
		t.Error("generic-garbage-collector may create pods")
	}
}

func TestBootstrapUpstreamBindings(t *testing.T) {
	d := BootstrapDefaults()
	asUser := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: n}
	}
	asGroup := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: n}
	}
	asSA := func(ns, n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: n}
	}

	for name, want := range map[string][]rbacv1.Subject{
		"cluster-admin":                           {asGroup("system:masters")},
		"system:discovery":                        {asGroup("system:authenticated")},
		"system:basic-user":                       {asGroup("system:authenticated")},
		"system:public-info-viewer":               {asGroup("system:authenticated"), asGroup("system:unauthenticated")},
		"system:kube-scheduler":                   {asUser("system:kube-scheduler")},
		"system:volume-scheduler":                 {asUser("system:kube-scheduler")},
		"system:kube-controller-manager":          {asUser("system:kube-controller-manager")},
		"system:kube-dns":                         {asSA("kube-system", "kube-dns")},
		"system:node-proxier":                     {asUser("system:kube-proxy")},
		"system:monitoring":                       {asGroup("system:monitoring")},
		"system:service-account-issuer-discovery": {asGroup("system:serviceaccounts")},
	} {
		b, ok := bsClusterRoleBinding(d, name)
		if !ok {
			t.Errorf("no ClusterRoleBinding %s", name)
			continue
		}
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != name {
			t.Errorf("ClusterRoleBinding %s: roleRef %+v", name, b.RoleRef)
		}
		if !reflect.DeepEqual(b.Subjects, want) {
			t.Errorf("ClusterRoleBinding %s: subjects %+v, want %+v", name, b.Subjects, want)
		}
	}

	// Nodes get their access from the node authorizer, not from a binding of system:node.
	for _, b := range d.ClusterRoleBindings {
		if b.RoleRef.Name == "system:node" {
			t.Errorf("ClusterRoleBinding %s binds system:node", b.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind == "Group" && s.Name == "system:nodes" {
				t.Errorf("ClusterRoleBinding %s binds group system:nodes", b.Name)
			}
		}
	}

	// Nothing else is granted to everyone.
	everyone := map[string][]string{}
	for _, b := range d.ClusterRoleBindings {
		for _, s := range b.Subjects {
			if s.Kind == "Group" && (s.Name == "system:authenticated" || s.Name == "system:unauthenticated") {
				everyone[s.Name] = append(everyone[s.Name], b.RoleRef.Name)
			}
		}
	}
	for group, want := range map[string][]string{
		"system:authenticated":   {"system:basic-user", "system:discovery", "system:public-info-viewer"},
		"system:unauthenticated": {"system:public-info-viewer"},
	} {
		got := everyone[group]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("roles bound to %s: %v, want %v", group, got, want)
		}
	}

	// Every controller role is bound to the controller's ServiceAccount, and only to it.
	controllers := 0
	for _, cr := range d.ClusterRoles {
		controller, ok := strings.CutPrefix(cr.Name, "system:controller:")
		if !ok {
			continue
		}
		controllers++
		b, ok := bsClusterRoleBinding(d, cr.Name)
		if !ok {
			t.Errorf("controller role %s is not bound", cr.Name)
			continue
		}
		if b.RoleRef.Name != cr.Name || !reflect.DeepEqual(b.Subjects, []rbacv1.Subject{asSA("kube-system", controller)}) {
			t.Errorf("ClusterRoleBinding %s: roleRef %+v subjects %+v", b.Name, b.RoleRef, b.Subjects)
		}
	}
	if controllers < 30 {
		t.Errorf("only %d controller roles", controllers)
	}

	// Namespaced roles and bindings.
	nsRoles := map[string][]rbacv1.PolicyRule{}
	for _, r := range d.Roles {
		nsRoles[r.Namespace+"/"+r.Name] = r.Rules
	}
	for _, c := range []struct {
		role                      string
		verb, group, resource, nm string
	}{
		{"kube-system/extension-apiserver-authentication-reader",
			"get", "", "configmaps", "extension-apiserver-authentication"},
		{"kube-system/system::leader-locking-kube-controller-manager",
			"update", "coordination.k8s.io", "leases", "kube-controller-manager"},
		{"kube-system/system::leader-locking-kube-scheduler",
			"update", "coordination.k8s.io", "leases", "kube-scheduler"},
		{"kube-system/system:controller:bootstrap-signer", "list", "", "secrets", ""},
		{"kube-public/system:controller:bootstrap-signer", "update", "", "configmaps", "cluster-info"},
		{"kube-system/system:controller:token-cleaner", "delete", "", "secrets", ""},
		{"kube-system/system:controller:cloud-provider", "create", "", "configmaps", ""},
	} {
		rules, ok := nsRoles[c.role]
		if !ok {
			t.Errorf("no Role %s", c.role)
			continue
		}
		if !bsAllowsNamed(rules, c.verb, c.group, c.resource, "", c.nm) {
			t.Errorf("Role %s: %s %s/%s %q denied", c.role, c.verb, c.group, c.resource, c.nm)
		}
	}
	reader := nsRoles["kube-system/extension-apiserver-authentication-reader"]
	signer := nsRoles["kube-public/system:controller:bootstrap-signer"]
	if bsAllowsNamed(reader, "get", "", "configmaps", "", "other") ||
		bsAllowsNamed(signer, "update", "", "configmaps", "", "other") {
		t.Error("resourceNames are not restricted")
	}

	nsBindings := map[string]rbacv1.RoleBinding{}
	for _, b := range d.RoleBindings {
		nsBindings[b.Namespace+"/"+b.Name] = b
	}
	for name, want := range map[string]struct {
		role     string
		subjects []rbacv1.Subject
	}{
		"kube-system/system::extension-apiserver-authentication-reader": {"extension-apiserver-authentication-reader",
			[]rbacv1.Subject{asUser("system:kube-controller-manager"), asUser("system:kube-scheduler")}},
		"kube-system/system::leader-locking-kube-controller-manager": {"system::leader-locking-kube-controller-manager",
			[]rbacv1.Subject{asUser("system:kube-controller-manager"), asSA("kube-system", "kube-controller-manager"),
				asSA("kube-system", "leader-election-controller")}},
		"kube-system/system::leader-locking-kube-scheduler": {"system::leader-locking-kube-scheduler",
			[]rbacv1.Subject{asUser("system:kube-scheduler"), asSA("kube-system", "kube-scheduler")}},
		"kube-public/system:controller:bootstrap-signer": {"system:controller:bootstrap-signer",
			[]rbacv1.Subject{asSA("kube-system", "bootstrap-signer")}},
		"kube-system/system:controller:bootstrap-signer": {"system:controller:bootstrap-signer",
			[]rbacv1.Subject{asSA("kube-system", "bootstrap-signer")}},
		"kube-system/system:controller:token-cleaner": {"system:controller:token-cleaner",
			[]rbacv1.Subject{asSA("kube-system", "token-cleaner")}},
	} {
		b, ok := nsBindings[name]
		if !ok {
			t.Errorf("no RoleBinding %s", name)
			continue
		}
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != want.role || !reflect.DeepEqual(b.Subjects, want.subjects) {
			t.Errorf("RoleBinding %s: roleRef %+v subjects %+v", name, b.RoleRef, b.Subjects)
		}
	}
}

func TestBootstrapTeamBindings(t *testing.T) {
	d := BootstrapDefaults()
	for name, role := range map[string]string{
		"wheelhouse:team:owner":  "cluster-admin",
		"wheelhouse:team:admin":  "cluster-admin",
		"wheelhouse:team:member": "edit",
		"wheelhouse:team:viewer": "view",
	} {
		b, ok := bsClusterRoleBinding(d, name)
		if !ok {
			t.Errorf("no ClusterRoleBinding %s", name)
			continue
		}
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		wantSubjects := []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: name}}
		if b.RoleRef != wantRef || !reflect.DeepEqual(b.Subjects, wantSubjects) {
			t.Errorf("ClusterRoleBinding %s: roleRef %+v subjects %+v", name, b.RoleRef, b.Subjects)
		}
		if b.Labels["app.kubernetes.io/managed-by"] != "wheelhouse" ||
			b.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
			t.Errorf("ClusterRoleBinding %s: labels %v", name, b.Labels)
		}
		if b.Annotations["kubernetes.io/description"] == "" {
			t.Errorf("ClusterRoleBinding %s: no description", name)
		}
	}

	// A team viewer reads pods but not secrets; a member changes workloads but not RBAC.
	view := bsEffectiveRules(t, d.ClusterRoles, "view")
	edit := bsEffectiveRules(t, d.ClusterRoles, "edit")
	if !bsAllows(view, "get", "", "pods", "") || bsAllows(view, "get", "", "secrets", "") ||
		!bsAllows(edit, "create", "apps", "deployments", "") ||
		bsAllows(edit, "create", rbacv1.GroupName, "rolebindings", "") {
		t.Error("team roles grant the wrong things")
	}
}

// The evaluator the other tests rely on follows upstream's matching rules.
func TestBootstrapRuleEvaluator(t *testing.T) {
	r := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	strs := func(s ...string) []string { return s }
	for _, c := range []struct {
		rule                                     rbacv1.PolicyRule
		verb, group, resource, subresource, name string
		want                                     bool
	}{
		{r(strs("get"), strs(""), strs("pods"), nil), "get", "", "pods", "", "", true},
		{r(strs("get"), strs(""), strs("pods"), nil), "list", "", "pods", "", "", false},
		{r(strs("get"), strs(""), strs("pods"), nil), "get", "apps", "pods", "", "", false},
		{r(strs("get"), strs(""), strs("pods"), nil), "get", "", "pods", "log", "", false},
		{r(strs("get"), strs(""), strs("pods/log"), nil), "get", "", "pods", "log", "", true},
		{r(strs("get"), strs(""), strs("pods/log"), nil), "get", "", "pods", "", "", false},
		{r(strs("get"), strs("*"), strs("*/scale"), nil), "get", "apps", "deployments", "scale", "", true},
		{r(strs("get"), strs("*"), strs("*/scale"), nil), "get", "apps", "deployments", "", "", false},
		{r(strs("*"), strs("*"), strs("*"), nil), "escalate", "x.io", "y", "z", "n", true},
		{r(strs("get"), strs(""), strs("configmaps"), strs("a")), "get", "", "configmaps", "", "a", true},
		{r(strs("get"), strs(""), strs("configmaps"), strs("a")), "get", "", "configmaps", "", "b", false},
		{r(strs("get"), strs(""), strs("configmaps"), strs("a")), "list", "", "configmaps", "", "", false},
	} {
		if got := bsRuleAllows(c.rule, c.verb, c.group, c.resource, c.subresource, c.name); got != c.want {
			t.Errorf("%+v allows %s %s/%s/%s %q = %v, want %v", c.rule, c.verb, c.group, c.resource,
				c.subresource, c.name, got, c.want)
		}
	}
	u := rbacv1.PolicyRule{Verbs: strs("get"), NonResourceURLs: strs("/api", "/apis/*")}
	for path, want := range map[string]bool{"/api": true, "/api/v1": false, "/apis": false, "/apis/": true,
		"/apis/apps/v1": true} {
		if got := bsURLAllows(u, "get", path); got != want {
			t.Errorf("get %s = %v, want %v", path, got, want)
		}
	}
	if bsURLAllows(u, "post", "/api") {
		t.Error("post /api allowed")
	}
}
