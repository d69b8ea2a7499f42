package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// mastersGroup may do anything, escalation included (as upstream).
const mastersGroup = "system:masters"

// Caller is who writes an RBAC object.
type Caller struct {
	Cluster string
	User    string
	Groups  []string
}

// fullAuthority is every permission: what creating an aggregated ClusterRole needs (its rules are whatever
// roles get labelled later).
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// CheckEscalation refuses writing a Role, ClusterRole, RoleBinding or ClusterRoleBinding that would give away
// permissions the caller does not hold, RBAC's escalation prevention: a role needs every permission it grants (in
// its namespace) or the `escalate` verb on it; a binding needs the referenced role's permissions (in the
// binding's namespace) or the `bind` verb on that role. Other objects pass. The error is a Forbidden status.
func (a *Authorizer) CheckEscalation(ctx context.Context, c Caller, obj runtime.Object) error {
	if slices.Contains(c.Groups, mastersGroup) {
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		return a.checkRole(ctx, c, "roles", o.Namespace, o.Name, o.Rules)
	case *rbacv1.ClusterRole:
		rules := o.Rules
		if o.AggregationRule != nil {
			rules = fullAuthority
		}
		return a.checkRole(ctx, c, "clusterroles", "", o.Name, rules)
	case *rbacv1.RoleBinding:
		return a.checkBinding(ctx, c, "rolebindings", o.Namespace, o.Name, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return a.checkBinding(ctx, c, "clusterrolebindings", "", o.Name, o.RoleRef)
	}
	return nil
}

func (a *Authorizer) checkRole(ctx context.Context, c Caller, resource, namespace, name string, rules []rbacv1.PolicyRule) error {
	d, err := a.Authorize(ctx, Request{Cluster: c.Cluster, User: c.User, Groups: c.Groups, Verb: "escalate",
		Namespace: namespace, Group: rbacv1.GroupName, Resource: resource, Name: name})
	if err != nil || d.Allowed {
		return err
	}
	ok, missing, err := a.Covers(ctx, c.Cluster, c.User, c.Groups, namespace, rules)
	if err != nil || ok {
		return err
	}
	return forbidden(resource, name, fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		c.User, c.Groups, describeRules(missing)))
}

func (a *Authorizer) checkBinding(ctx context.Context, c Caller, resource, namespace, name string, ref rbacv1.RoleRef) error {
	roleResource := "clusterroles"
	if ref.Kind == "Role" {
		roleResource = "roles"
	}
	d, err := a.Authorize(ctx, Request{Cluster: c.Cluster, User: c.User, Groups: c.Groups, Verb: "bind",
		Namespace: namespace, Group: rbacv1.GroupName, Resource: roleResource, Name: ref.Name})
	if err != nil || d.Allowed {
		return err
	}
	rules, found, err := a.RoleRules(ctx, c.Cluster, namespace, ref)
	if err != nil {
		return err
	}
	if !found {
		// Upstream's message when the role cannot be read for the check.
		return forbidden(resource, name, fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held: %s %q not found",
			c.User, c.Groups, ref.Kind, ref.Name))
	}
	ok, missing, err := a.Covers(ctx, c.Cluster, c.User, c.Groups, namespace, rules)
	if err != nil || ok {
		return err
	}
	return forbidden(resource, name, fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		c.User, c.Groups, describeRules(missing)))
}

func forbidden(resource, name string, err error) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, name, err)
}

// describeRules prints rules the way upstream's escalation message does, one per line.
func describeRules(rules []rbacv1.PolicyRule) string {
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("{")
		var parts []string
		if len(r.APIGroups) > 0 {
			parts = append(parts, fmt.Sprintf("APIGroups:%q", r.APIGroups))
		}
		if len(r.Resources) > 0 {
			parts = append(parts, fmt.Sprintf("Resources:%q", r.Resources))
		}
		if len(r.ResourceNames) > 0 {
			parts = append(parts, fmt.Sprintf("ResourceNames:%q", r.ResourceNames))
		}
		if len(r.NonResourceURLs) > 0 {
			parts = append(parts, fmt.Sprintf("NonResourceURLs:%q", r.NonResourceURLs))
		}
		parts = append(parts, fmt.Sprintf("Verbs:%q", r.Verbs))
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString("}")
	}
	return b.String()
}
