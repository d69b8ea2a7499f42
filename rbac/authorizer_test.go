package rbac

import (
	"context"
	"fmt"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
	"pgregory.net/rapid"
)

// memSource is an in-memory Source: every change bumps the version.
type memSource struct {
	mu   sync.Mutex
	objs map[string]Objects
	v    map[string]Version
	// reads counts Objects calls (policy builds).
	reads int
}

func newMemSource() *memSource {
	return &memSource{objs: map[string]Objects{}, v: map[string]Version{}}
}

func (m *memSource) Version(_ context.Context, cluster string) (Version, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v[cluster], nil
}

func (m *memSource) Objects(_ context.Context, cluster string) (Objects, Version, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return m.objs[cluster], m.v[cluster], nil
}

func (m *memSource) change(cluster string, f func(*Objects)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objs[cluster]
	f(&o)
	m.objs[cluster] = o
	v := m.v[cluster]
	v[0]++
	m.v[cluster] = v
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func l(s ...string) []string { return s }

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func crb(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
}

func rb(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
}

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

func newTestAuthorizer(t tb, src Source) *Authorizer {
	t.Helper()
	a, err := New(Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func decide(t tb, a *Authorizer, req Request) Decision {
	t.Helper()
	if req.Cluster == "" {
		req.Cluster = "c1"
	}
	d, err := a.Authorize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRBACSemantics(t *testing.T) {
	src := newMemSource()
	src.change("c1", func(o *Objects) {
		o.ClusterRoles = []*rbacv1.ClusterRole{
			clusterRole("reader", rule(l("get", "list", "watch"), l(""), l("pods", "configmaps"))),
			clusterRole("deployer", rule(l("*"), l("apps"), l("deployments", "deployments/scale"))),
			clusterRole("logs", rule(l("get"), l(""), l("pods/log"))),
			clusterRole("scaler", rule(l("update"), l("*"), l("*/scale"))),
			clusterRole("probe", urlRule(l("get"), "/healthz", "/apis/*")),
		}
		o.Roles = []*rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "one-cm"},
			Rules: []rbacv1.PolicyRule{rule(l("get", "update"), l(""), l("configmaps"), "settings")}}}
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{
			crb("readers", "reader", group("readers")),
			crb("probers", "probe", user("prober")),
			crb("dangling", "no-such-role", user("alice")),
		}
		o.RoleBindings = []*rbacv1.RoleBinding{
			rb("a", "deployers", "ClusterRole", "deployer", user("alice")),
			rb("a", "one", "Role", "one-cm", user("bob")),
			rb("a", "sa-logs", "ClusterRole", "logs", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}),
			rb("b", "scalers", "ClusterRole", "scaler", user("carol")),
		}
	})
	a := newTestAuthorizer(t, src)
	for _, tc := range []struct {
		name string
		req  Request
		want bool
	}{
		{"group binding, any namespace", Request{User: "x", Groups: l("readers"), Verb: "list", Namespace: "z", Resource: "pods"}, true},
		{"group binding, cluster-wide list", Request{User: "x", Groups: l("readers"), Verb: "list", Resource: "pods"}, true},
		{"group binding, verb not granted", Request{User: "x", Groups: l("readers"), Verb: "delete", Namespace: "z", Resource: "pods"}, false},
		{"group binding, subresource not granted", Request{User: "x", Groups: l("readers"), Verb: "get", Namespace: "z", Resource: "pods", Subresource: "log"}, false},
		{"no binding", Request{User: "x", Verb: "get", Namespace: "z", Resource: "pods"}, false},
		{"role binding in its namespace", Request{User: "alice", Verb: "create", Namespace: "a", Group: "apps", Resource: "deployments"}, true},
		{"role binding elsewhere", Request{User: "alice", Verb: "create", Namespace: "b", Group: "apps", Resource: "deployments"}, false},
		{"role binding, cluster-wide request", Request{User: "alice", Verb: "list", Group: "apps", Resource: "deployments"}, false},
		{"wrong group", Request{User: "alice", Verb: "create", Namespace: "a", Group: "", Resource: "deployments"}, false},
		{"listed subresource", Request{User: "alice", Verb: "update", Namespace: "a", Group: "apps", Resource: "deployments", Subresource: "scale"}, true},
		{"unlisted subresource", Request{User: "alice", Verb: "update", Namespace: "a", Group: "apps", Resource: "deployments", Subresource: "status"}, false},
		{"subresource wildcard", Request{User: "carol", Verb: "update", Namespace: "b", Group: "apps", Resource: "statefulsets", Subresource: "scale"}, true},
		{"subresource wildcard, main resource", Request{User: "carol", Verb: "update", Namespace: "b", Group: "apps", Resource: "statefulsets"}, false},
		{"resourceNames match", Request{User: "bob", Verb: "get", Namespace: "a", Resource: "configmaps", Name: "settings"}, true},
		{"resourceNames other name", Request{User: "bob", Verb: "get", Namespace: "a", Resource: "configmaps", Name: "other"}, false},
		{"resourceNames list", Request{User: "bob", Verb: "list", Namespace: "a", Resource: "configmaps"}, false},
		{"service account subject", Request{User: "system:serviceaccount:a:robot", Verb: "get", Namespace: "a", Resource: "pods", Subresource: "log"}, true},
		{"service account elsewhere", Request{User: "system:serviceaccount:b:robot", Verb: "get", Namespace: "a", Resource: "pods", Subresource: "log"}, false},
		{"url exact", Request{User: "prober", Verb: "get", Path: "/healthz"}, true},
		{"url prefix", Request{User: "prober", Verb: "get", Path: "/apis/apps/v1"}, true},
		{"url not listed", Request{User: "prober", Verb: "get", Path: "/api"}, false},
		{"url verb", Request{User: "prober", Verb: "post", Path: "/healthz"}, false},
		{"dangling binding grants nothing", Request{User: "alice", Verb: "get", Namespace: "z", Resource: "pods"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(t, a, tc.req)
			if d.Allowed != tc.want {
				t.Fatalf("Allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
			if d.Allowed && d.Reason == "" {
				t.Error("an allowed decision without a reason")
			}
		})
	}
}

func TestChangesApplyToTheNextDecision(t *testing.T) {
	src := newMemSource()
	src.change("c1", func(o *Objects) {
		o.ClusterRoles = []*rbacv1.ClusterRole{clusterRole("reader", rule(l("get"), l(""), l("pods")))}
	})
	a := newTestAuthorizer(t, src)
	req := Request{User: "dana", Verb: "get", Namespace: "n", Resource: "pods"}
	if decide(t, a, req).Allowed {
		t.Fatal("allowed before any binding")
	}
	src.change("c1", func(o *Objects) {
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{crb("b", "reader", user("dana"))}
	})
	if !decide(t, a, req).Allowed {
		t.Fatal("a new binding did not apply to the next decision")
	}
	src.change("c1", func(o *Objects) { o.ClusterRoles[0] = clusterRole("reader", rule(l("list"), l(""), l("pods"))) })
	if decide(t, a, req).Allowed {
		t.Fatal("a narrowed role still allowed the next decision")
	}
	src.change("c1", func(o *Objects) { o.ClusterRoleBindings = nil })
	req.Verb = "list"
	if decide(t, a, req).Allowed {
		t.Fatal("a removed binding still allowed the next decision")
	}
	reads := src.reads
	for range 10 {
		decide(t, a, req)
	}
	if src.reads != reads {
		t.Fatalf("unchanged objects were read %d more times", src.reads-reads)
	}
}

func TestClustersAreSeparate(t *testing.T) {
	src := newMemSource()
	for _, c := range []string{"c1", "c2"} {
		src.change(c, func(o *Objects) {
			o.ClusterRoles = []*rbacv1.ClusterRole{clusterRole("admin", rule(l("*"), l("*"), l("*")))}
		})
	}
	src.change("c1", func(o *Objects) {
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{crb("b", "admin", user("erin"))}
	})
	a := newTestAuthorizer(t, src)
	req := Request{User: "erin", Verb: "delete", Namespace: "n", Resource: "pods"}
	if !decide(t, a, req).Allowed {
		t.Fatal("erin is admin of c1")
	}
	req.Cluster = "c2"
	if decide(t, a, req).Allowed {
		t.Fatal("a binding in c1 allowed a request in c2")
	}
}

func TestAggregation(t *testing.T) {
	src := newMemSource()
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"aggregate-to-monitoring": "true"}}}}}
	part := func(name string, r rbacv1.PolicyRule) *rbacv1.ClusterRole {
		cr := clusterRole(name, r)
		cr.Labels = map[string]string{"aggregate-to-monitoring": "true"}
		return cr
	}
	src.change("c1", func(o *Objects) {
		o.ClusterRoles = []*rbacv1.ClusterRole{agg, part("pods-reader", rule(l("get"), l(""), l("pods")))}
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{crb("b", "monitoring", user("fay"))}
	})
	a := newTestAuthorizer(t, src)
	get := func(res string) bool {
		return decide(t, a, Request{User: "fay", Verb: "get", Namespace: "n", Resource: res}).Allowed
	}
	if !get("pods") || get("services") {
		t.Fatal("aggregation: want pods, not services")
	}
	src.change("c1", func(o *Objects) {
		o.ClusterRoles = append(o.ClusterRoles, part("svc-reader", rule(l("get"), l(""), l("services"))))
	})
	if !get("services") {
		t.Fatal("a ClusterRole labelled for aggregation did not extend the aggregated role")
	}
	// Nested: an aggregated role labelled into another aggregated role brings its aggregated rules along.
	outer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ops"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"aggregate-to-ops": "true"}}}}}
	src.change("c1", func(o *Objects) {
		o.ClusterRoles[0].Labels = map[string]string{"aggregate-to-ops": "true"}
		o.ClusterRoles = append(o.ClusterRoles, outer)
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{crb("b", "ops", user("fay"))}
	})
	if !get("pods") || !get("services") {
		t.Fatal("nested aggregation lost rules")
	}
}

func TestRulesAndCovers(t *testing.T) {
	src := newMemSource()
	src.change("c1", func(o *Objects) {
		o.ClusterRoles = []*rbacv1.ClusterRole{
			clusterRole("edit", rule(l("get", "list", "create"), l(""), l("configmaps", "secrets"))),
			clusterRole("view", rule(l("get"), l(""), l("pods"))),
		}
		o.ClusterRoleBindings = []*rbacv1.ClusterRoleBinding{crb("v", "view", user("gus"))}
		o.RoleBindings = []*rbacv1.RoleBinding{rb("a", "e", "ClusterRole", "edit", user("gus"))}
	})
	a := newTestAuthorizer(t, src)
	ctx := context.Background()
	rulesA, err := a.Rules(ctx, "c1", "gus", nil, "a")
	if err != nil || len(rulesA) != 2 {
		t.Fatalf("rules in a: %v %v", rulesA, err)
	}
	rulesB, _ := a.Rules(ctx, "c1", "gus", nil, "b")
	if len(rulesB) != 1 {
		t.Fatalf("rules in b: %v", rulesB)
	}
	ok, _, _ := a.Covers(ctx, "c1", "gus", nil, "a", []rbacv1.PolicyRule{rule(l("create"), l(""), l("secrets"))})
	if !ok {
		t.Fatal("gus holds create secrets in a")
	}
	ok, missing, _ := a.Covers(ctx, "c1", "gus", nil, "b", []rbacv1.PolicyRule{rule(l("create"), l(""), l("secrets"))})
	if ok || len(missing) == 0 {
		t.Fatal("gus lacks create secrets in b")
	}
	if rules, found, _ := a.RoleRules(ctx, "c1", "a", rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}); !found || len(rules) != 1 {
		t.Fatalf("RoleRules(edit) = %v %v", rules, found)
	}
}

// TestDecisionsAgreeWithUpstreamCovers: for random roles, bindings and requests, a decision allows exactly when
// the caller's rules cover the request under k8s.io/component-helpers' Covers (upstream's escalation check).
func TestDecisionsAgreeWithUpstreamCovers(t *testing.T) {
	verbs := l("get", "list", "create", "update", "delete", "*")
	groups := l("", "apps", "batch", "*")
	resources := l("pods", "pods/log", "deployments", "deployments/scale", "*/scale", "jobs", "*")
	names := l("", "x", "y")
	namespaces := l("", "a", "b")
	rapid.Check(t, func(rt *rapid.T) {
		pick := func(label string, from []string) []string {
			return rapid.SliceOfNDistinct(rapid.SampledFrom(from), 1, 3, rapid.ID[string]).Draw(rt, label)
		}
		src := newMemSource()
		src.change("c1", func(o *Objects) {
			for i := range rapid.IntRange(1, 4).Draw(rt, "roles") {
				var rules []rbacv1.PolicyRule
				for range rapid.IntRange(1, 3).Draw(rt, "rules") {
					r := rule(pick("verbs", verbs), pick("groups", groups), pick("resources", resources))
					if n := rapid.SampledFrom(names).Draw(rt, "resourceName"); n != "" {
						r.ResourceNames = []string{n}
					}
					rules = append(rules, r)
				}
				o.ClusterRoles = append(o.ClusterRoles, clusterRole(fmt.Sprint("r", i), rules...))
				if ns := rapid.SampledFrom(namespaces).Draw(rt, "bindingNamespace"); ns == "" {
					o.ClusterRoleBindings = append(o.ClusterRoleBindings, crb(fmt.Sprint("b", i), fmt.Sprint("r", i), user("u")))
				} else {
					o.RoleBindings = append(o.RoleBindings, rb(ns, fmt.Sprint("b", i), "ClusterRole", fmt.Sprint("r", i), user("u")))
				}
			}
		})
		a := newTestAuthorizer(rt, src)
		res := rapid.SampledFrom(l("pods", "pods/log", "deployments", "deployments/scale", "jobs", "statefulsets/scale")).Draw(rt, "resource")
		req := Request{Cluster: "c1", User: "u", Verb: rapid.SampledFrom(verbs[:5]).Draw(rt, "verb"),
			Group: rapid.SampledFrom(groups[:3]).Draw(rt, "group"), Namespace: rapid.SampledFrom(namespaces).Draw(rt, "namespace")}
		req.Resource, req.Subresource, _ = cut(res)
		own, err := a.Rules(context.Background(), "c1", "u", nil, req.Namespace)
		if err != nil {
			rt.Fatal(err)
		}
		// The same question for every name, twice over: the decisions' memo must keep names apart exactly
		// when a rule with resourceNames covers the request.
		for _, name := range append(append([]string{}, names...), names...) {
			req.Name = name
			d := decide(rt, a, req)
			want := rule(l(req.Verb), l(req.Group), l(res))
			if req.Name != "" {
				want.ResourceNames = l(req.Name)
			}
			covered, _ := validation.Covers(own, []rbacv1.PolicyRule{want})
			if d.Allowed != covered {
				rt.Fatalf("decision %v (%s), upstream Covers %v; rules %+v, request %+v", d.Allowed, d.Reason, covered, own, req)
			}
		}
	})
}

func cut(res string) (string, string, bool) {
	for i := range len(res) {
		if res[i] == '/' {
			return res[:i], res[i+1:], true
		}
	}
	return res, "", false
}

// TestMemoKeysNamesOnlyWhenTheyMatter: a role whose only resourceNames rule is on leases answers pod bindings
// of any name from one memo entry, and keeps lease names apart.
func TestMemoKeysNamesOnlyWhenTheyMatter(t *testing.T) {
	re, err := newRoleEnforcer([]rbacv1.PolicyRule{
		{Verbs: l("create"), APIGroups: l(""), Resources: l("pods/binding")},
		{Verbs: l("get", "update"), APIGroups: l("coordination.k8s.io"), Resources: l("leases"), ResourceNames: l("kube-scheduler")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if !re.allows(Request{Verb: "create", Resource: "pods", Subresource: "binding", Name: fmt.Sprint("p", i)}) {
			t.Fatalf("binding pod p%d refused", i)
		}
	}
	for _, name := range l("kube-scheduler", "other", "kube-scheduler", "other") {
		req := Request{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: name}
		if got := re.allows(req); got != (name == "kube-scheduler") {
			t.Fatalf("update lease %q: allowed %v", name, got)
		}
	}
	if n := len(re.memo); n != 3 {
		t.Fatalf("memo holds %d answers, want 3 (one for every binding, one per lease name)", n)
	}
}
