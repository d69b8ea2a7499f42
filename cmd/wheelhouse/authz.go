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

// admission checks writes before they are stored: Priority for new pods (spec.priority from the
// PriorityClass), ServiceAccount for new pods (the kube-api-access volume), DefaultTolerationSeconds for new
// pods, NodeRestriction for nodes, then RBAC's escalation check for RBAC objects.
type admission struct {
	r              *rbacAuthorizer
	priority       *admissionpkg.Priority       // set once the API exists
	serviceAccount *admissionpkg.ServiceAccount // set once the API exists
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
	if err := ad.tolerations.Admit(ctx, req); err != nil {
		return err
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
	mu  sync.Mutex
	// teams caches cluster → team (a cluster never changes team).
	teams map[string]string
}

func newKubeAuditor(ten *tenancy.Store, w *tenancy.AuditWriter) *kubeAuditor {
	return &kubeAuditor{ten: ten, w: w, teams: map[string]string{}}
}

func (k *kubeAuditor) Record(r kubeapi.AuditRecord) {
	k.mu.Lock()
	team, ok := k.teams[r.Cluster]
	k.mu.Unlock()
	if !ok {
		// Once per cluster and process; the tenancy store caches cluster rows.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cl, err := k.ten.Cluster(ctx, r.Cluster)
		cancel()
		if err != nil {
			return // an unknown cluster: nothing happened in it
		}
		team = cl.TeamID
		k.mu.Lock()
		k.teams[r.Cluster] = team
		k.mu.Unlock()
	}
	action := r.Verb
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
