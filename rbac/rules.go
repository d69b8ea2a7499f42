package rbac

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	rbacv1 "k8s.io/api/rbac/v1"
)

// roleModel is the Casbin model of one role: its policy lines are the role's rules, a request is one access.
// Lists (verbs, API groups, resources, names, URLs) are stored joined by listSep, so one line is one rule.
const roleModel = `
[request_definition]
r = verb, group, resource, name, path

[policy_definition]
p = verbs, groups, resources, names, urls

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = listHas(p.verbs, r.verb) && (r.path == "" && p.urls == "" && listHas(p.groups, r.group) && resourceMatch(p.resources, r.resource) && nameMatch(p.names, r.name) || r.path != "" && urlMatch(p.urls, r.path))
`

// listSep joins list values in a policy line; it cannot occur in Kubernetes names, groups, verbs or paths.
const listSep = "\x1f"

// roleEnforcer decides for one set of rules.
type roleEnforcer struct {
	rules []rbacv1.PolicyRule // read-only
	e     *casbin.Enforcer    // never modified after construction: safe for concurrent Enforce
	// named are the rules that list resourceNames: when one of them could match a request, the object's name is
	// part of the question (and of the memo's key); otherwise the name cannot change the answer.
	named []namedRule
	// memo remembers answers. The rules never change (a changed role gets a new enforcer), so an answer can
	// never go stale: this is a pure function's memo, not a cache to invalidate. Bounded by maxMemo. A plain
	// map under a read-write lock: a lookup allocates nothing.
	memoMu sync.RWMutex
	memo   map[memoKey]bool
}

type memoKey struct{ verb, group, resource, name, path string }

// memoEnabled is false only in the benchmark that measures Casbin's evaluation without the memo.
var memoEnabled = true

// maxMemo bounds each role's memo (names make the key space open-ended when resourceNames are used).
const maxMemo = 8192

// allows reports whether the rules allow the request.
func (r *roleEnforcer) allows(req Request) bool {
	resource := req.Resource
	if req.Subresource != "" {
		resource += "/" + req.Subresource
	}
	k := memoKey{req.Verb, req.Group, resource, "", req.Path}
	if r.nameMatters(req.Verb, req.Group, resource) {
		k.name = req.Name
	}
	r.memoMu.RLock()
	v, hit := r.memo[k]
	r.memoMu.RUnlock()
	if hit && memoEnabled {
		return v
	}
	ok, err := r.e.Enforce(req.Verb, req.Group, resource, req.Name, req.Path)
	if err != nil {
		return false // a matcher error refuses; it is not remembered
	}
	r.memoMu.Lock()
	if len(r.memo) < maxMemo {
		r.memo[k] = ok
	}
	r.memoMu.Unlock()
	return ok
}

// nameMatters reports whether a rule with resourceNames covers the verb, group and resource: only then can the
// object's name change the answer.
func (r *roleEnforcer) nameMatters(verb, group, resource string) bool {
	for _, rule := range r.named {
		if hasOrStar(rule.verbs, verb) && hasOrStar(rule.groups, group) && resourceMatches(rule.resources, resource) {
			return true
		}
	}
	return false
}

// namedRule is a rule with resourceNames, its resources joined as resourceMatches wants them.
type namedRule struct {
	verbs, groups []string
	resources     string
}

func hasOrStar(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// enforcers shares role enforcers between roles with equal rules (the built-in roles of every cluster). The
// map is only a lookup aid: snapshots hold their enforcers directly, so clearing it when it grows large costs
// rebuilding, never correctness.
var enforcers = struct {
	sync.Mutex
	m map[[32]byte]*roleEnforcer
}{m: map[[32]byte]*roleEnforcer{}}

const maxSharedEnforcers = 20000

// enforcerFor returns the enforcer of rules, shared with every role that has the same rules.
func enforcerFor(rules []rbacv1.PolicyRule) (*roleEnforcer, error) {
	b, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(b)
	enforcers.Lock()
	re, ok := enforcers.m[key]
	enforcers.Unlock()
	if ok {
		return re, nil
	}
	re, err = newRoleEnforcer(rules)
	if err != nil {
		return nil, err
	}
	enforcers.Lock()
	if len(enforcers.m) >= maxSharedEnforcers {
		enforcers.m = map[[32]byte]*roleEnforcer{}
	}
	enforcers.m[key] = re
	enforcers.Unlock()
	return re, nil
}

func newRoleEnforcer(rules []rbacv1.PolicyRule) (*roleEnforcer, error) {
	m, err := model.NewModelFromString(roleModel)
	if err != nil {
		return nil, fmt.Errorf("rbac: role model: %w", err)
	}
	e, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("rbac: role enforcer: %w", err)
	}
	e.EnableLog(false)
	e.AddFunction("listHas", listFunc(func(list, v string) bool { return anyField(list, func(x string) bool { return x == "*" || x == v }) }))
	e.AddFunction("resourceMatch", listFunc(resourceMatches))
	e.AddFunction("nameMatch", listFunc(func(names, name string) bool {
		return names == "" || anyField(names, func(x string) bool { return x == name })
	}))
	e.AddFunction("urlMatch", listFunc(urlMatches))
	var lines [][]string
	for _, r := range rules {
		lines = append(lines, []string{join(r.Verbs), join(r.APIGroups), join(r.Resources), join(r.ResourceNames),
			join(r.NonResourceURLs)})
	}
	if len(lines) > 0 {
		// AddPoliciesEx skips duplicate lines (two equal rules) instead of refusing the whole batch.
		if _, err := e.AddPoliciesEx(lines); err != nil {
			return nil, fmt.Errorf("rbac: role rules: %w", err)
		}
	}
	re := &roleEnforcer{rules: rules, e: e, memo: map[memoKey]bool{}}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 {
			re.named = append(re.named, namedRule{verbs: r.Verbs, groups: r.APIGroups, resources: join(r.Resources)})
		}
	}
	return re, nil
}

// join encodes a list as one policy value: each element preceded by listSep, so that the empty list ("") and
// the list holding the empty string (the core API group: listSep) differ.
func join(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return listSep + strings.Join(list, listSep)
}

// anyField reports whether f holds for a field of the joined list (without allocating: decisions are hot).
func anyField(list string, f func(string) bool) bool {
	if list == "" {
		return false
	}
	for rest, more := list[len(listSep):], true; more; {
		var field string
		field, rest, more = strings.Cut(rest, listSep)
		if f(field) {
			return true
		}
	}
	return false
}

// listFunc adapts a (joined list, value) predicate to a Casbin matcher function.
func listFunc(f func(list, v string) bool) func(args ...interface{}) (interface{}, error) {
	return func(args ...interface{}) (interface{}, error) {
		if len(args) != 2 {
			return false, fmt.Errorf("rbac: matcher function wants 2 arguments, got %d", len(args))
		}
		list, _ := args[0].(string)
		v, _ := args[1].(string)
		return f(list, v), nil
	}
}

// resourceMatches is RBAC's resource rule: "*" matches everything, "pods" matches pods only (not pods/log),
// "pods/log" matches that subresource, "*/scale" matches the scale subresource of any resource.
func resourceMatches(rules, resource string) bool {
	sub := ""
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		sub = resource[i:]
	}
	return anyField(rules, func(r string) bool {
		return r == "*" || r == resource || (sub != "" && len(r) == len(sub)+1 && r[0] == '*' && r[1:] == sub)
	})
}

// urlMatches is RBAC's non-resource URL rule: exact, "*", or a prefix ending in "*".
func urlMatches(rules, path string) bool {
	return anyField(rules, func(r string) bool {
		return r == "*" || r == path || (strings.HasSuffix(r, "*") && strings.HasPrefix(path, r[:len(r)-1]))
	})
}
