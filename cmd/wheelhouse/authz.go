package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	admissionpkg "github.com/wheelhouse-dev/wheelhouse/server/admission"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// How the Kubernetes API learns who calls (tenancy) and what they may do (rbac). See docs/design/tenancy.md.

// mastersGroup may do anything without RBAC (upstream's privileged group; no user is put in it by default).
const mastersGroup = "system:masters"

type tokenAuthenticator struct{ ten *tenancy.Store }

// AuthenticateToken checks the token and the caller's membership of the cluster's team, fresh from PostgreSQL;
// a node credential authenticates its node (user system:node:<name>, group system:nodes) in its own cluster.
func (a tokenAuthenticator) AuthenticateToken(ctx context.Context, cluster, token string) (kubeapi.User, error) {
	if strings.HasPrefix(token, tenancy.NodeCredentialPrefix) {
		node, rev, err := a.ten.AuthenticateNode(ctx, token, cluster)
		switch {
		case errors.Is(err, tenancy.ErrUnauthenticated):
			return kubeapi.User{}, kubeapi.ErrUnauthenticated
		case errors.Is(err, tenancy.ErrNotFound):
			return kubeapi.User{}, kubeapi.ErrClusterNotFound
		case err != nil:
			return kubeapi.User{}, err
		}
		return kubeapi.User{Name: rbac.NodeUserPrefix + node, Groups: []string{rbac.NodesGroup, "system:authenticated"},
			Revision: rev}, nil
	}
	acc, err := a.ten.AuthenticateCluster(ctx, token, cluster)
	switch {
	case errors.Is(err, tenancy.ErrUnauthenticated):
		return kubeapi.User{}, kubeapi.ErrUnauthenticated
	case errors.Is(err, tenancy.ErrNotFound):
		return kubeapi.User{}, kubeapi.ErrClusterNotFound
	case err != nil:
		return kubeapi.User{}, err
	}
	return kubeapi.User{Name: acc.Email, UID: acc.UserID, Revision: acc.Revision,
		Groups: []string{"system:authenticated", rbac.TeamGroup(acc.Role)}}, nil
}

// rbacAuthorizer is the Kubernetes API's authorizer: system:masters, then RBAC.
type rbacAuthorizer struct{ a *rbac.Authorizer }

func (r *rbacAuthorizer) Authorize(ctx context.Context, at kubeapi.Attributes) (bool, string, error) {
	if slices.Contains(at.User.Groups, mastersGroup) {
		return true, "", nil
	}
	d, err := r.a.Authorize(ctx, rbac.Request{Cluster: at.Cluster, User: at.User.Name, Groups: at.User.Groups,
		Verb: at.Verb, Namespace: at.Namespace, Group: at.Group, Resource: at.Resource, Subresource: at.Subresource,
		Name: at.Name, Path: at.Path, MinRevision: at.MinRevision()})
	return d.Allowed, d.Reason, err
}

// admission is the Kubernetes API's admission, in upstream's two phases. Mutating (before validation):
// Priority for new pods (spec.priority from the PriorityClass), ServiceAccount for new pods (the kube-api-access
// volume), DefaultTolerationSeconds for pods created and updated. Validating (after it): PodResizeValidator for
// resizes (the node's allocatable), NodeRestriction for nodes, then RBAC's escalation check for RBAC objects.
type admission struct {
	r              *rbacAuthorizer
	priority       *admissionpkg.Priority       // set once the API exists
	serviceAccount *admissionpkg.ServiceAccount // set once the API exists
	podResize      *admissionpkg.PodResize      // set once the API exists
	tolerations    admissionpkg.DefaultTolerationSeconds
}

func (ad *admission) Admit(ctx context.Context, req kubeapi.AdmissionRequest) error {
	if ad.priority != nil {
		if err := ad.priority.Admit(ctx, req); err != nil {
			return err
		}
	}
	if ad.serviceAccount != nil {
		if err := ad.serviceAccount.Admit(ctx, req); err != nil {
			return err
		}
	}
	return ad.tolerations.Admit(ctx, req)
}

func (ad *admission) Validate(ctx context.Context, req kubeapi.AdmissionRequest) error {
	if ad.podResize != nil {
		if err := ad.podResize.Validate(ctx, req); err != nil {
			return err
		}
	}
	if err := rbac.CheckNodeRestriction(req.User.Name, req.User.Groups, req.Operation, req.Object, req.OldObject); err != nil {
		return err
	}
	if req.Resource.GVK.Group != rbacv1.GroupName {
		return nil
	}
	return ad.r.a.CheckEscalation(ctx, rbac.Caller{Cluster: req.Cluster, User: req.User.Name, Groups: req.User.Groups}, req.Object)
}

// rulesResolver answers SelfSubjectRulesReview.
type rulesResolver struct{ r *rbacAuthorizer }

func (rr rulesResolver) Rules(ctx context.Context, cluster string, u kubeapi.User, namespace string) ([]rbacv1.PolicyRule, error) {
	if slices.Contains(u.Groups, mastersGroup) {
		return []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
			{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, nil
	}
	return rr.r.a.Rules(ctx, cluster, u.Name, u.Groups, namespace)
}

// clusterObjects are the built-in RBAC objects every cluster starts with.
func clusterObjects() []runtime.Object {
	d := rbac.BootstrapDefaults()
	var out []runtime.Object
	for i := range d.ClusterRoles {
		out = append(out, &d.ClusterRoles[i])
	}
	for i := range d.ClusterRoleBindings {
		out = append(out, &d.ClusterRoleBindings[i])
	}
	for i := range d.Roles {
		out = append(out, &d.Roles[i])
	}
	for i := range d.RoleBindings {
		out = append(out, &d.RoleBindings[i])
	}
	return out
}

// kubeAuditor puts the Kubernetes API's mutating requests into the audit log of the cluster's team, through
// the background writer (recording never waits for the database).
type kubeAuditor struct {
	ten *tenancy.Store
	w   *tenancy.AuditWriter
	now func() time.Time
	ttl time.Duration // how long a cluster → team answer is kept (auditorTeamTTL)
	max int           // how many are kept (auditorTeamEntries)

	mu sync.Mutex // guards teams and forgotten; no other lock is taken while it is held
	// teams caches cluster → team for ttl, at most max of them.
	teams map[string]auditorTeam
	// forgotten counts ForgetCluster calls, so that a lookup that raced one does not put back what it dropped.
	forgotten uint64
}

// auditorTeam is a cached cluster → team answer.
type auditorTeam struct {
	team    string
	expires time.Time
}

// Bounds of the auditor's cluster → team cache: a deleted cluster is forgotten at once on this replica
// (ForgetCluster) and within auditorTeamTTL anywhere.
const (
	auditorTeamTTL     = time.Minute
	auditorTeamEntries = 10000
)

func newKubeAuditor(ten *tenancy.Store, w *tenancy.AuditWriter) *kubeAuditor {
	return &kubeAuditor{ten: ten, w: w, now: time.Now, ttl: auditorTeamTTL, max: auditorTeamEntries,
		teams: map[string]auditorTeam{}}
}

// ForgetCluster drops what the auditor holds of cluster id (deleted: its id may later name another team's
// cluster, whose records must not go to this team's log). Safe to call at any time, for any id.
func (k *kubeAuditor) ForgetCluster(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.teams, id)
	k.forgotten++
}

// team is the team of cluster id, cached; false for an unknown cluster (nothing happened in it).
func (k *kubeAuditor) team(id string) (string, bool) {
	k.mu.Lock()
	e, ok := k.teams[id]
	gen := k.forgotten
	k.mu.Unlock()
	if ok && k.now().Before(e.expires) {
		return e.team, true
	}
	// Once per cluster, process and ttl; the tenancy store caches cluster rows too.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	cl, err := k.ten.Cluster(ctx, id)
	cancel()
	if err != nil {
		return "", false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.forgotten != gen {
		return cl.TeamID, true // a cluster was forgotten meanwhile: use the answer, do not keep it
	}
	now := k.now()
	if _, ok := k.teams[id]; !ok && len(k.teams) >= k.max {
		k.evict(now)
	}
	k.teams[id] = auditorTeam{team: cl.TeamID, expires: now.Add(k.ttl)}
	return cl.TeamID, true
}

// evict makes room for one entry: the expired ones go, then arbitrary ones. Called with mu held.
func (k *kubeAuditor) evict(now time.Time) {
	for id, e := range k.teams {
		if !now.Before(e.expires) {
			delete(k.teams, id)
		}
	}
	for id := range k.teams {
		if len(k.teams) < k.max {
			return
		}
		delete(k.teams, id)
	}
}

func (k *kubeAuditor) Record(r kubeapi.AuditRecord) {
	team, ok := k.team(r.Cluster)
	if !ok {
		return // an unknown cluster: nothing happened in it
	}
	action := r.Verb
	if action == "" {
		action = "unknown" // kubeapi promises a verb; a record without one is still kept
	}
	if r.Resource != "" {
		action += " " + r.Resource
		if r.Group != "" {
			action += "." + r.Group
		}
		if r.Subresource != "" {
			action += "/" + r.Subresource
		}
	}
	if r.DryRun {
		action += " (dry run)"
	}
	actor := r.User.Name
	if actor == "" {
		actor = "anonymous"
	}
	k.w.Record(tenancy.AuditEvent{At: r.At, TeamID: team, ClusterID: r.Cluster, Actor: actor, ActorID: r.User.UID,
		Action: action, Resource: r.Path, Result: strconv.Itoa(r.Code), Source: r.Source, UserAgent: r.UserAgent})
}
