package resources

import (
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        coordinationv1.SchemeGroupVersion.WithKind("Lease"),
		Plural:     "leases",
		Namespaced: true,
		New:        func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:    func() runtime.Object { return &coordinationv1.LeaseList{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateLeaseSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
		},
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn,
				textColumn("Holder", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]), ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				l := obj.(*coordinationv1.Lease)
				var holder string
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				return []any{l.Name, holder, age(l.CreationTimestamp, now)}
			},
		},
	})
}

// validateLeaseSpec checks a Lease's spec at p: a positive duration, non-negative transitions, a known or
// domain-qualified strategy, and a preferred holder only with a strategy.
func validateLeaseSpec(s *coordinationv1.LeaseSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("leaseDurationSeconds"), *s.LeaseDurationSeconds,
			"must be greater than 0"))
	}
	if s.LeaseTransitions != nil && *s.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(p.Child("leaseTransitions"), *s.LeaseTransitions,
			"must be greater than or equal to 0"))
	}
	if s.Strategy != nil {
		errs = append(errs, validateLeaseStrategy(*s.Strategy, p.Child("strategy"))...)
	}
	if s.PreferredHolder != nil && *s.PreferredHolder != "" && (s.Strategy == nil || *s.Strategy == "") {
		errs = append(errs, field.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateLeaseStrategy accepts OldestEmulationVersion or a domain-qualified name ("example.com/mine").
func validateLeaseStrategy(st coordinationv1.CoordinatedLeaseStrategy, p *field.Path) field.ErrorList {
	if !strings.Contains(string(st), "/") {
		if st != coordinationv1.OldestEmulationVersion {
			return field.ErrorList{field.NotSupported(p, st,
				[]coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion})}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(st)) {
		errs = append(errs, field.Invalid(p, st, msg))
	}
	return errs
}
