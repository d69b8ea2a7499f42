package resources

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:            corev1.SchemeGroupVersion.WithKind("Namespace"),
		Plural:         "namespaces",
		ShortNames:     []string{"ns"},
		New:            func() runtime.Object { return &corev1.Namespace{} },
		NewList:        func() runtime.Object { return &corev1.NamespaceList{} },
		Status:         true,
		NameValidation: ValidateDNSLabelName,
		Default:        func(obj runtime.Object) { defaultNamespace(obj.(*corev1.Namespace)) },
		Validate:       func(obj runtime.Object) field.ErrorList { return validateNamespace(obj.(*corev1.Namespace)) },
		ValidateStatus: func(obj, _ runtime.Object) field.ErrorList {
			ns := obj.(*corev1.Namespace)
			return append(validateNamespace(ns), validateNamespacePhase(ns)...)
		},
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn,
				{Name: "Status", Type: "string", Description: "The status of the namespace"}, ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				ns := obj.(*corev1.Namespace)
				return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
			},
		},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
		},
	})
}

// defaultNamespace labels the namespace kubernetes.io/metadata.name=<name>, sets phase Active when unset and gives
// a live namespace without finalizers the "kubernetes" finalizer (an explicitly empty list is kept, and so is a
// terminating namespace's list, which the namespace controller empties).
func defaultNamespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	if ns.Spec.Finalizers == nil && ns.DeletionTimestamp == nil {
		ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	}
}

// validateNamespace checks spec.finalizers: qualified names, or the standard "kubernetes".
func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	for i, f := range ns.Spec.Finalizers {
		p := field.NewPath("spec", "finalizers").Index(i)
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), p)...)
		if f != corev1.FinalizerKubernetes && !strings.Contains(string(f), "/") {
			errs = append(errs, field.Invalid(p, f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// validateNamespacePhase requires Active for a live namespace and Terminating for one being deleted.
func validateNamespacePhase(ns *corev1.Namespace) field.ErrorList {
	p := field.NewPath("status", "phase")
	switch {
	case ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceActive:
		return field.ErrorList{field.Invalid(p, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
	case !ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating:
		return field.ErrorList{field.Invalid(p, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}
