package resources

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
		Plural:     "poddisruptionbudgets",
		ShortNames: []string{"pdb"},
		Namespaced: true,
		New:        func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:    func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Status:     true,
		Generation: true,
		Validate: func(obj runtime.Object) field.ErrorList {
			return validatePDBSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
		},
		ValidateStatus: func(obj, _ runtime.Object) field.ErrorList {
			return validatePDBStatus(&obj.(*policyv1.PodDisruptionBudget).Status, field.NewPath("status"))
		},
		Table: &Table{Columns: pdbColumns, Cells: pdbCells},
	})
}

// validatePDBSpec checks a PodDisruptionBudget's spec at p: at most one of minAvailable and maxUnavailable,
// each a non-negative int or a percentage up to 100%, a valid selector and a known unhealthy-pod policy.
func validatePDBSpec(s *policyv1.PodDisruptionBudgetSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(p, s, "minAvailable and maxUnavailable cannot be both set"))
	}
	if s.MinAvailable != nil {
		errs = append(errs, validatePositiveIntOrPercent(*s.MinAvailable, p.Child("minAvailable"))...)
		errs = append(errs, validateNotMoreThan100Percent(*s.MinAvailable, p.Child("minAvailable"))...)
	}
	if s.MaxUnavailable != nil {
		errs = append(errs, validatePositiveIntOrPercent(*s.MaxUnavailable, p.Child("maxUnavailable"))...)
		errs = append(errs, validateNotMoreThan100Percent(*s.MaxUnavailable, p.Child("maxUnavailable"))...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector,
		metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	if pol := s.UnhealthyPodEvictionPolicy; pol != nil && *pol != policyv1.IfHealthyBudget && *pol != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(p.Child("unhealthyPodEvictionPolicy"), *pol,
			[]policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}))
	}
	return errs
}

// validatePDBStatus checks the disruption controller's counts are non-negative and its conditions valid.
func validatePDBStatus(st *policyv1.PodDisruptionBudgetStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, c := range []struct {
		name  string
		value int32
	}{
		{"disruptionsAllowed", st.DisruptionsAllowed},
		{"currentHealthy", st.CurrentHealthy},
		{"desiredHealthy", st.DesiredHealthy},
		{"expectedPods", st.ExpectedPods},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(c.value), p.Child(c.name))...)
	}
	return append(errs, metav1validation.ValidateConditions(st.Conditions, p.Child("conditions"))...)
}

var pdbColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Min Available", "The minimum number of pods that must be available."),
	textColumn("Max Unavailable", "The maximum number of pods that may be unavailable."),
	integerColumn("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time."),
	ageColumn,
}

// pdbCells: NAME MIN AVAILABLE MAX UNAVAILABLE ("N/A" when unset) ALLOWED DISRUPTIONS AGE.
func pdbCells(obj runtime.Object, now time.Time) []any {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	minAvailable, maxUnavailable := "N/A", "N/A"
	if pdb.Spec.MinAvailable != nil {
		minAvailable = pdb.Spec.MinAvailable.String()
	}
	if pdb.Spec.MaxUnavailable != nil {
		maxUnavailable = pdb.Spec.MaxUnavailable.String()
	}
	return []any{pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed),
		age(pdb.CreationTimestamp, now)}
}
