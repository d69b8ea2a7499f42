package resources

import (
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podUpdatableFields is how Kubernetes words which pod spec fields an update may change.
const podUpdatableFields = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to " +
	"existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate enforces pod spec immutability: only container and init container images,
// activeDeadlineSeconds (lowered, never unset), tolerations (additions, or new tolerationSeconds),
// terminationGracePeriodSeconds, a first nodeName and removed scheduling gates may change. Ephemeral containers
// are added through pods/ephemeralcontainers only (pods_ephemeral.go), as upstream's.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	sp := field.NewPath("spec")
	errs := validateActiveDeadlineUpdate(pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds,
		sp.Child("activeDeadlineSeconds"))
	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, sp.Child("tolerations"))...)
	if changed := changedPodSpecFields(mungePodSpec(&pod.Spec, &old.Spec), &old.Spec); len(changed) > 0 {
		errs = append(errs, field.Forbidden(sp, podUpdatableFields+"\nchanged: "+strings.Join(changed, ", ")))
	}
	return errs
}

// mungePodSpec returns a copy of spec with every field an update may change set back to old's value.
func mungePodSpec(spec, old *corev1.PodSpec) *corev1.PodSpec {
	m := spec.DeepCopy()
	if len(m.Containers) == len(old.Containers) {
		for i := range m.Containers {
			m.Containers[i].Image = old.Containers[i].Image
		}
	}
	if len(m.InitContainers) == len(old.InitContainers) {
		for i := range m.InitContainers {
			m.InitContainers[i].Image = old.InitContainers[i].Image
		}
	}
	m.ActiveDeadlineSeconds = old.ActiveDeadlineSeconds
	m.Tolerations = old.Tolerations
	m.TerminationGracePeriodSeconds = old.TerminationGracePeriodSeconds
	if old.NodeName == "" {
		m.NodeName = ""
	}
	if isSubset(m.SchedulingGates, old.SchedulingGates) {
		m.SchedulingGates = old.SchedulingGates
	}
	return m
}

// isSubset reports whether every element of a is in b.
func isSubset[T comparable](a, b []T) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}

// changedPodSpecFields returns "spec.<json name>" for each top-level field that differs.
func changedPodSpecFields(spec, old *corev1.PodSpec) []string {
	var out []string
	a, b, t := reflect.ValueOf(spec).Elem(), reflect.ValueOf(old).Elem(), reflect.TypeOf(*spec)
	for i := 0; i < t.NumField(); i++ {
		if !apiequality.Semantic.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, "spec."+strings.Split(t.Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
}

// validateActiveDeadlineUpdate allows activeDeadlineSeconds to be set or lowered, never raised or unset.
func validateActiveDeadlineUpdate(v, old *int64, p *field.Path) field.ErrorList {
	switch {
	case v == nil && old != nil:
		return field.ErrorList{field.Invalid(p, v, "must not update from a positive integer to nil value")}
	case v != nil && old != nil && *v > *old:
		return field.ErrorList{field.Invalid(p, *v, "must be less than or equal to previous value")}
	}
	return nil
}

// validateOnlyAddedTolerations requires every old toleration to remain, only its tolerationSeconds changed.
func validateOnlyAddedTolerations(ts, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, o := range old {
		if !slices.ContainsFunc(ts, func(t corev1.Toleration) bool {
			o.TolerationSeconds = t.TolerationSeconds
			return apiequality.Semantic.DeepEqual(o, t)
		}) {
			return field.ErrorList{field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}
