package resources

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Priority bounds: users may define classes up to highestUserPriority; the two system classes sit above it.
const (
	highestUserPriority       = int32(1000000000)
	systemCriticalPriority    = 2 * highestUserPriority
	systemPriorityClassPrefix = "system-"
)

// SystemPriorityClasses are the classes Kubernetes reserves, which a server creates at start-up. A class whose
// name starts with "system-" must be one of them, with their value and globalDefault.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-node-critical"},
			Value:       systemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-cluster-critical"},
			Value:       systemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

func init() {
	register(&Resource{
		GVK:        schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"),
		Plural:     "priorityclasses",
		ShortNames: []string{"pc"},
		New:        func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:    func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Default: func(obj runtime.Object) {
			if pc := obj.(*schedulingv1.PriorityClass); pc.PreemptionPolicy == nil {
				pc.PreemptionPolicy = new(corev1.PreemptLowerPriority)
			}
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			return validatePriorityClass(obj.(*schedulingv1.PriorityClass))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validatePriorityClassUpdate(obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass))
		},
		Table: &Table{Columns: priorityClassColumns, Cells: priorityClassCells},
	})
}

// validatePriorityClass reserves "system-" names for the system classes, bounds user values by 1e9 and checks
// the preemption policy. That at most one class is globalDefault needs the other classes: the API machinery
// checks it.
func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(pc.Name, systemPriorityClassPrefix) {
		if err := checkSystemPriorityClass(pc); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), "priority class names with '"+
				systemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > highestUserPriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserPriority)))
	}
	if pp := pc.PreemptionPolicy; pp != nil && *pp != corev1.PreemptLowerPriority && *pp != corev1.PreemptNever {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *pp,
			[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
	}
	return errs
}

// checkSystemPriorityClass reports why pc is not one of SystemPriorityClasses.
func checkSystemPriorityClass(pc *schedulingv1.PriorityClass) error {
	for _, s := range SystemPriorityClasses() {
		switch {
		case s.Name != pc.Name:
			continue
		case s.Value != pc.Value:
			return fmt.Errorf("value of %v PriorityClass must be %v", s.Name, s.Value)
		case s.GlobalDefault != pc.GlobalDefault:
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", s.Name, s.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

// validatePriorityClassUpdate keeps value and preemptionPolicy.
func validatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, old.PreemptionPolicy,
		field.NewPath("preemptionPolicy"))...)
}

var priorityClassColumns = []metav1.TableColumnDefinition{
	nameColumn,
	integerColumn("Value", schedulingv1.PriorityClass{}.SwaggerDoc()["value"]),
	{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
	ageColumn,
	textColumn("PreemptionPolicy", schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]),
}

// priorityClassCells: NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY.
func priorityClassCells(obj runtime.Object, now time.Time) []any {
	pc := obj.(*schedulingv1.PriorityClass)
	var policy string
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp, now), policy}
}
