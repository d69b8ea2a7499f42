package rbac

import (
	"fmt"
	"sort"

	defaultrolemanager "github.com/casbin/casbin/v2/rbac/default-role-manager"
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
	// bindings: per domain (the namespace of a RoleBinding, clusterWide for a ClusterRoleBinding), a Casbin
	// role manager linking subjects ("user:alice", "group:devs") to role keys ("ClusterRole:view",
	// "Role:ns/name"). A domain without bindings has no entry, so most namespaces cost one map miss.
	bindings map[string]*defaultrolemanager.RoleManagerImpl
	roles    map[string]*roleEnforcer // by role key
	// why names the binding behind each (subject, domain, role) link, for the decision's reason.
	why map[link]string
}

type link struct{ subject, domain, role string }

func clusterRoleKey(name string) string     { return "ClusterRole:" + name }
func roleKey(namespace, name string) string { return "Role:" + namespace + "/" + name }
func userSubject(name string) string        { return "user:" + name }
func groupSubject(name string) string       { return "group:" + name }

// subjectKey is the Casbin subject of a binding subject; ServiceAccounts are the users they authenticate as.
func subjectKey(s rbacv1.Subject, bindingNamespace string) (string, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return userSubject(s.Name), true
	case rbacv1.GroupKind:
		return groupSubject(s.Name), true
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return "", false
		}
		return userSubject("system:serviceaccount:" + ns + ":" + s.Name), true
	}
	return "", false
}

// buildSnapshot turns a cluster's objects into its policy.
func buildSnapshot(objs Objects, v Version) (*snapshot, error) {
	s := &snapshot{version: v, bindings: map[string]*defaultrolemanager.RoleManagerImpl{}, roles: map[string]*roleEnforcer{},
		why: map[link]string{}}
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
	for _, subj := range subjects {
		key, ok := subjectKey(subj, bindingNamespace)
		if !ok {
			continue
		}
		rm := s.bindings[domain]
		if rm == nil {
			rm = defaultrolemanager.NewRoleManagerImpl(1)
			s.bindings[domain] = rm
		}
		_ = rm.AddLink(key, role) // cannot fail: links are one level deep
		l := link{key, domain, role}
		if _, dup := s.why[l]; !dup {
			s.why[l] = name
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

// roleKeysFor are the roles bound to the subjects in namespace (and cluster-wide), each with the binding that
// grants it.
func (s *snapshot) roleKeysFor(subjects []string, namespace string, f func(role, why string) bool) {
	domains := []string{clusterWide}
	if namespace != "" {
		domains = append(domains, namespace)
	}
	for _, d := range domains {
		rm := s.bindings[d]
		if rm == nil {
			continue
		}
		for _, subj := range subjects {
			roles, _ := rm.GetRoles(subj)
			for _, r := range roles {
				if !f(r, s.why[link{subj, d, r}]) {
					return
				}
			}
		}
	}
}
