package rbac

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Objects are a cluster's RBAC objects. The authorizer never modifies them.
type Objects struct {
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
}

// Version identifies the state of a cluster's RBAC objects: it changes whenever any of them changes (for
// example the store revisions of the last change of each of the four resources).
type Version [4]int64

// clusterWide is the binding domain of ClusterRoleBindings.
const clusterWide = "*"

// snapshot is the immutable policy of one cluster at one Version.
type snapshot struct {
	version Version
	// bindings: per (domain, subject) the roles bound to it, with the reason a decision they allow gives. The
	// domain is a RoleBinding's namespace or clusterWide; the subject a user or group (a ServiceAccount subject
	// is its user). Looking a caller up costs a map probe per subject and domain, without allocating.
	bindings map[subjectKey][]roleLink
	roles    map[string]*roleEnforcer // by role key ("ClusterRole:view", "Role:ns/name")
}

// subjectKey is a binding subject in a domain; kind is 'u' (user) or 'g' (group).
type subjectKey struct {
	domain string
	kind   byte
	name   string
}

type roleLink struct{ role, reason string }

func clusterRoleKey(name string) string     { return "ClusterRole:" + name }
func roleKey(namespace, name string) string { return "Role:" + namespace + "/" + name }

// keyOf is the subject key of a binding subject in domain; ServiceAccounts are the users they authenticate as.
func keyOf(s rbacv1.Subject, bindingNamespace, domain string) (subjectKey, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return subjectKey{domain, 'u', s.Name}, true
	case rbacv1.GroupKind:
		return subjectKey{domain, 'g', s.Name}, true
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return subjectKey{}, false
		}
		return subjectKey{domain, 'u', "system:serviceaccount:" + ns + ":" + s.Name}, true
	}
	return subjectKey{}, false
}

// buildSnapshot turns a cluster's objects into its policy.
func buildSnapshot(objs Objects, v Version) (*snapshot, error) {
	s := &snapshot{version: v, bindings: map[subjectKey][]roleLink{}, roles: map[string]*roleEnforcer{}}
	for _, cr := range objs.ClusterRoles {
		re, err := enforcerFor(clusterRoleRules(cr, objs.ClusterRoles))
		if err != nil {
			return nil, fmt.Errorf("cluster role %s: %w", cr.Name, err)
		}
		s.roles[clusterRoleKey(cr.Name)] = re
	}
	for _, r := range objs.Roles {
		re, err := enforcerFor(r.Rules)
		if err != nil {
			return nil, fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err)
		}
		s.roles[roleKey(r.Namespace, r.Name)] = re
	}
	for _, b := range objs.ClusterRoleBindings {
		if b.RoleRef.Kind != "ClusterRole" {
			continue // invalid; validation refuses it
		}
		s.bind(b.Subjects, "", clusterWide, clusterRoleKey(b.RoleRef.Name), "ClusterRoleBinding "+quote(b.Name))
	}
	for _, b := range objs.RoleBindings {
		key := roleKey(b.Namespace, b.RoleRef.Name)
		if b.RoleRef.Kind == "ClusterRole" {
			key = clusterRoleKey(b.RoleRef.Name)
		}
		s.bind(b.Subjects, b.Namespace, b.Namespace, key, "RoleBinding "+quote(b.Namespace+"/"+b.Name))
	}
	return s, nil
}

func (s *snapshot) bind(subjects []rbacv1.Subject, bindingNamespace, domain, role, name string) {
	reason := "RBAC: allowed by " + name + " of " + strings.Replace(role, ":", " ", 1)
	for _, subj := range subjects {
		key, ok := keyOf(subj, bindingNamespace, domain)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(s.bindings[key], func(l roleLink) bool { return l.role == role }) {
			s.bindings[key] = append(s.bindings[key], roleLink{role: role, reason: reason})
		}
	}
}

// clusterRoleRules are a ClusterRole's effective rules: with an aggregation rule, its own rules plus the
// effective rules of every ClusterRole its selectors match — transitively, as the aggregation controller would
// converge to (admin aggregates edit, which aggregates view) — in name order, without duplicates.
func clusterRoleRules(cr *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) []rbacv1.PolicyRule {
	return aggregate(cr, all, map[string]bool{})
}

func aggregate(cr *rbacv1.ClusterRole, all []*rbacv1.ClusterRole, visiting map[string]bool) []rbacv1.PolicyRule {
	if cr.AggregationRule == nil {
		return cr.Rules
	}
	visiting[cr.Name] = true
	defer delete(visiting, cr.Name)
	var sels []labels.Selector
	for _, ls := range cr.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err == nil && !sel.Empty() {
			sels = append(sels, sel)
		}
	}
	var matched []*rbacv1.ClusterRole
	for _, other := range all {
		if visiting[other.Name] {
			continue // a cycle of aggregations adds nothing new
		}
		for _, sel := range sels {
			if sel.Matches(labels.Set(other.Labels)) {
				matched = append(matched, other)
				break
			}
		}
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
	rules := append([]rbacv1.PolicyRule(nil), cr.Rules...)
	for _, m := range matched {
		for _, r := range aggregate(m, all, visiting) {
			if !containsRule(rules, r) {
				rules = append(rules, r)
			}
		}
	}
	return rules
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if equalStrings(x.Verbs, r.Verbs) && equalStrings(x.APIGroups, r.APIGroups) && equalStrings(x.Resources, r.Resources) &&
			equalStrings(x.ResourceNames, r.ResourceNames) && equalStrings(x.NonResourceURLs, r.NonResourceURLs) {
			return true
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// rolesFor calls f with each role bound to the user or one of the groups, in namespace (when set) and
// cluster-wide, and the reason a decision it allows gives; it stops when f returns false. It allocates nothing.
func (s *snapshot) rolesFor(user string, groups []string, namespace string, f func(role, reason string) bool) {
	for _, domain := range [2]string{clusterWide, namespace} {
		if domain == "" {
			continue
		}
		if user != "" {
			for _, l := range s.bindings[subjectKey{domain, 'u', user}] {
				if !f(l.role, l.reason) {
					return
				}
			}
		}
		for _, g := range groups {
			for _, l := range s.bindings[subjectKey{domain, 'g', g}] {
				if !f(l.role, l.reason) {
					return
				}
			}
		}
	}
}
