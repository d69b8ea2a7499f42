package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Source reads a cluster's RBAC objects. Version must be cheap: it is called on every decision.
type Source interface {
	// Version identifies the current state of the cluster's RBAC objects.
	Version(ctx context.Context, cluster string) (Version, error)
	// Objects returns the cluster's RBAC objects and the Version they are at.
	Objects(ctx context.Context, cluster string) (Objects, Version, error)
}

// Request is one access to decide.
type Request struct {
	Cluster string
	User    string
	Groups  []string
	// Verb is the Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection, or
	// escalate, bind, impersonate...); for non-resource requests the lower-case HTTP method (get, post, ...).
	Verb        string
	Namespace   string
	Group       string
	Resource    string
	Subresource string
	Name        string
	// Path is set (and Resource empty) for a non-resource request ("/version", "/apis").
	Path string
	// MinRevision, when set, is a store revision the decision must reflect (the revision at the request's
	// authentication): with a Source that can wait (a Waiter), the RBAC state is brought at least that far first.
	MinRevision int64
}

// Waiter is a Source that can wait until its objects of a cluster reflect a store revision.
type Waiter interface {
	WaitFor(ctx context.Context, cluster string, rev int64) error
}

// Decision is the answer to a Request.
type Decision struct {
	Allowed bool
	// Reason says which binding allowed the request, or why none did.
	Reason string
}

// Config configures an Authorizer.
type Config struct {
	Source Source
	// Pods feeds the node authorizer; without it nodes get only what needs no pod (their Node, Lease, reads).
	Pods   Pods
	Logger *slog.Logger
}

// Authorizer decides Requests on every cluster.
type Authorizer struct {
	src  Source
	pods Pods
	log  *slog.Logger

	mu    sync.Mutex // guards snaps and building
	snaps map[string]*snapshot
	// building holds one in-flight build per cluster; waiters share its result.
	building map[string]*build
}

type build struct {
	done chan struct{}
	snap *snapshot
	err  error
}

// New builds an Authorizer.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Source == nil {
		return nil, errors.New("rbac: Config.Source is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Authorizer{src: cfg.Source, pods: cfg.Pods, log: cfg.Logger, snaps: map[string]*snapshot{},
		building: map[string]*build{}}, nil
}

// Authorize decides req: for a node, the node authorizer first; then RBAC under the cluster's current objects
// (at least as new as req.MinRevision).
func (a *Authorizer) Authorize(ctx context.Context, req Request) (Decision, error) {
	if w, ok := a.src.(Waiter); ok && req.MinRevision > 0 {
		if err := w.WaitFor(ctx, req.Cluster, req.MinRevision); err != nil {
			if ctx.Err() != nil {
				return Decision{}, ctx.Err()
			}
			// The cache could not catch up in time: decide on what it has (a moment behind) rather than fail.
			a.log.Warn("RBAC state did not reach the request's revision; deciding on the state at hand", "err", err,
				"cluster", req.Cluster, "revision", req.MinRevision)
		}
	}
	if node, ok := NodeName(req.User, req.Groups); ok {
		allowed, why, err := a.authorizeNode(ctx, node, req)
		if err != nil {
			return Decision{}, err
		}
		if allowed {
			return Decision{Allowed: true, Reason: why}, nil
		}
	}
	s, err := a.snapshot(ctx, req.Cluster)
	if err != nil {
		return Decision{}, err
	}
	return s.decide(req), nil
}

// decide finds a role bound to one of the caller's subjects that allows the request.
func (s *snapshot) decide(req Request) Decision {
	var d Decision
	s.rolesFor(req.User, req.Groups, req.Namespace, func(role, reason string) bool {
		re := s.roles[role]
		if re == nil || !re.allows(req) {
			return true
		}
		d = Decision{Allowed: true, Reason: reason}
		return false
	})
	return d
}

// Rules returns every rule that applies to the caller in namespace ("" for cluster-wide rules only): the
// answer of a SelfSubjectRulesReview, and the caller's side of the escalation check.
func (a *Authorizer) Rules(ctx context.Context, cluster, user string, groups []string, namespace string) ([]rbacv1.PolicyRule, error) {
	s, err := a.snapshot(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var rules []rbacv1.PolicyRule
	seen := map[*roleEnforcer]bool{}
	s.rolesFor(user, groups, namespace, func(role, _ string) bool {
		if re := s.roles[role]; re != nil && !seen[re] {
			seen[re] = true
			rules = append(rules, re.rules...)
		}
		return true
	})
	return rules, nil
}

// Covers reports whether the caller holds every permission of rules in namespace; when not, it returns the
// rules it lacks (RBAC's escalation check for creating roles and bindings).
func (a *Authorizer) Covers(ctx context.Context, cluster, user string, groups []string, namespace string, rules []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule, error) {
	own, err := a.Rules(ctx, cluster, user, groups, namespace)
	if err != nil {
		return false, nil, err
	}
	ok, missing := validation.Covers(own, rules)
	return ok, missing, nil
}

// RoleRules returns the rules of the role a binding in namespace refers to (aggregation applied), and whether
// it exists.
func (a *Authorizer) RoleRules(ctx context.Context, cluster, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, bool, error) {
	s, err := a.snapshot(ctx, cluster)
	if err != nil {
		return nil, false, err
	}
	key := clusterRoleKey(ref.Name)
	if ref.Kind == "Role" {
		key = roleKey(namespace, ref.Name)
	}
	re := s.roles[key]
	if re == nil {
		return nil, false, nil
	}
	return re.rules, true, nil
}

// snapshot returns the cluster's policy at its current Version, building it when an RBAC object changed.
func (a *Authorizer) snapshot(ctx context.Context, cluster string) (*snapshot, error) {
	v, err := a.src.Version(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	for {
		a.mu.Lock()
		if s := a.snaps[cluster]; s != nil && atLeast(s.version, v) {
			a.mu.Unlock()
			return s, nil
		}
		if b := a.building[cluster]; b != nil {
			a.mu.Unlock()
			select {
			case <-b.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if b.err != nil {
				return nil, b.err
			}
			if atLeast(b.snap.version, v) {
				return b.snap, nil
			}
			continue // built from an older state than the one we saw: build again
		}
		b := &build{done: make(chan struct{})}
		a.building[cluster] = b
		a.mu.Unlock()
		b.snap, b.err = a.build(ctx, cluster)
		a.mu.Lock()
		delete(a.building, cluster)
		if b.err == nil {
			if cur := a.snaps[cluster]; cur == nil || !atLeast(cur.version, b.snap.version) {
				a.snaps[cluster] = b.snap
			}
		}
		a.mu.Unlock()
		close(b.done)
		if b.err != nil {
			return nil, b.err
		}
		if atLeast(b.snap.version, v) {
			return b.snap, nil
		}
	}
}

func (a *Authorizer) build(ctx context.Context, cluster string) (*snapshot, error) {
	objs, v, err := a.src.Objects(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("rbac: read the RBAC objects of cluster %s: %w", cluster, err)
	}
	s, err := buildSnapshot(objs, v)
	if err != nil {
		return nil, fmt.Errorf("rbac: cluster %s: %w", cluster, err)
	}
	return s, nil
}

// atLeast reports whether state a includes state b: each resource's last change is at least as recent.
func atLeast(a, b Version) bool {
	for i := range a {
		if a[i] < b[i] {
			return false
		}
	}
	return true
}

// Forget drops a cluster's policy (a deleted cluster).
func (a *Authorizer) Forget(cluster string) {
	a.mu.Lock()
	delete(a.snaps, cluster)
	a.mu.Unlock()
}
