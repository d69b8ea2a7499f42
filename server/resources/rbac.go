package resources

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	gv := rbacv1.SchemeGroupVersion
	register(&Resource{
		GVK: gv.WithKind("Role"), Plural: "roles", Namespaced: true,
		New:            func() runtime.Object { return &rbacv1.Role{} },
		NewList:        func() runtime.Object { return &rbacv1.RoleList{} },
		NameValidation: ValidateRBACName,
		Validate: func(obj runtime.Object) field.ErrorList {
			return validatePolicyRules(obj.(*rbacv1.Role).Rules, true)
		},
		Table: &Table{Columns: roleColumns, Cells: func(obj runtime.Object, _ time.Time) []any {
			return roleCells(obj.(*rbacv1.Role).ObjectMeta)
		}},
	})
	register(&Resource{
		GVK: gv.WithKind("ClusterRole"), Plural: "clusterroles",
		New:            func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList:        func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		NameValidation: ValidateRBACName,
		Validate:       func(obj runtime.Object) field.ErrorList { return validateClusterRole(obj.(*rbacv1.ClusterRole)) },
		Table: &Table{Columns: roleColumns, Cells: func(obj runtime.Object, _ time.Time) []any {
			return roleCells(obj.(*rbacv1.ClusterRole).ObjectMeta)
		}},
	})
	register(&Resource{
		GVK: gv.WithKind("RoleBinding"), Plural: "rolebindings", Namespaced: true,
		New:            func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:        func() runtime.Object { return &rbacv1.RoleBindingList{} },
		NameValidation: ValidateRBACName,
		Default: func(obj runtime.Object) {
			defaultBinding(&obj.(*rbacv1.RoleBinding).RoleRef, obj.(*rbacv1.RoleBinding).Subjects)
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			rb := obj.(*rbacv1.RoleBinding)
			return validateBinding(rb.RoleRef, rb.Subjects, true)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateRoleRefUpdate(obj.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef)
		},
		Table: &Table{Columns: bindingColumns, Cells: func(obj runtime.Object, now time.Time) []any {
			rb := obj.(*rbacv1.RoleBinding)
			return bindingCells(rb.ObjectMeta, rb.RoleRef, rb.Subjects, now)
		}},
	})
	register(&Resource{
		GVK: gv.WithKind("ClusterRoleBinding"), Plural: "clusterrolebindings",
		New:            func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList:        func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		NameValidation: ValidateRBACName,
		Default: func(obj runtime.Object) {
			defaultBinding(&obj.(*rbacv1.ClusterRoleBinding).RoleRef, obj.(*rbacv1.ClusterRoleBinding).Subjects)
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			crb := obj.(*rbacv1.ClusterRoleBinding)
			return validateBinding(crb.RoleRef, crb.Subjects, false)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateRoleRefUpdate(obj.(*rbacv1.ClusterRoleBinding).RoleRef,
				old.(*rbacv1.ClusterRoleBinding).RoleRef)
		},
		Table: &Table{Columns: bindingColumns, Cells: func(obj runtime.Object, now time.Time) []any {
			crb := obj.(*rbacv1.ClusterRoleBinding)
			return bindingCells(crb.ObjectMeta, crb.RoleRef, crb.Subjects, now)
		}},
	})
}

// ValidateRBACName is the NameValidation of roles and bindings: any name usable as a URL path segment (no "/",
// "%", "." or "..").
func ValidateRBACName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// defaultBinding fills in the rbac.authorization.k8s.io group of a roleRef and of User and Group subjects.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// validatePolicyRules checks each rule at rules[i]: verbs are required; a rule names either non-resource URLs
// (cluster roles only) or api groups and resources.
func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		errs = append(errs, validatePolicyRule(r, namespaced, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// validatePolicyRule checks one rule at p (see validatePolicyRules).
func validatePolicyRule(r rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(r.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs,
				"namespaced rules cannot apply to non-resource URLs"))
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs,
				"rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// validateClusterRole checks the rules and the aggregation rule, which needs at least one valid selector.
func validateClusterRole(cr *rbacv1.ClusterRole) field.ErrorList {
	errs := validatePolicyRules(cr.Rules, false)
	if cr.AggregationRule == nil {
		return errs
	}
	p := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(cr.AggregationRule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range cr.AggregationRule.ClusterRoleSelectors {
		errs = append(errs, metav1validation.ValidateLabelSelector(&cr.AggregationRule.ClusterRoleSelectors[i],
			metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
	}
	return errs
}

// validateBinding checks a roleRef (a Role or, always allowed, a ClusterRole of rbac.authorization.k8s.io; a
// ClusterRoleBinding may only bind ClusterRoles) and subjects (User, Group or ServiceAccount). namespaced is
// true for RoleBindings, whose ServiceAccount subjects may leave the namespace out.
func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if ref.Kind != "ClusterRole" && (!namespaced || ref.Kind != "Role") {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range ValidateRBACName(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// validateSubject checks a subject at p: a name, and the apiGroup of its kind ("" for ServiceAccounts, which
// need a namespace in cluster bindings).
func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind,
			[]string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// validateRoleRefUpdate keeps a binding's roleRef: rebinding means deleting and creating the binding.
func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref == old {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
}

var roleColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Created At", Type: "date", Description: ageColumn.Description},
}

// roleCells: NAME CREATED AT (RFC 3339, UTC).
func roleCells(m metav1.ObjectMeta) []any {
	created := "<unknown>"
	if !m.CreationTimestamp.IsZero() {
		created = m.CreationTimestamp.UTC().Format(time.RFC3339)
	}
	return []any{m.Name, created}
}

var bindingColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Role", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
	ageColumn,
	{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
	{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
	{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"},
}

// bindingCells: NAME ROLE ("ClusterRole/view") AGE, wide USERS GROUPS SERVICEACCOUNTS ("ns/name").
func bindingCells(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		}
	}
	return []any{m.Name, ref.Kind + "/" + ref.Name, age(m.CreationTimestamp, now), strings.Join(users, ", "),
		strings.Join(groups, ", "), strings.Join(sas, ", ")}
}
