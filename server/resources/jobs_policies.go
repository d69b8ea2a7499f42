package resources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of a Job's podFailurePolicy and successPolicy.
const (
	maxPodFailurePolicyRules      = 20
	maxPodFailurePolicyExitCodes  = 255
	maxPodFailurePolicyConditions = 20
	maxSuccessPolicyRules         = 20
)

// validatePodFailurePolicy checks spec.podFailurePolicy at p: at most 20 rules, each with a known action and
// exactly one of onExitCodes and onPodConditions.
func validatePodFailurePolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	rules, rp := s.PodFailurePolicy.Rules, p.Child("rules")
	if len(rules) > maxPodFailurePolicyRules {
		return field.ErrorList{field.TooMany(rp, len(rules), maxPodFailurePolicyRules)}
	}
	containers := map[string]bool{}
	for _, c := range s.Template.Spec.Containers {
		containers[c.Name] = true
	}
	for _, c := range s.Template.Spec.InitContainers {
		containers[c.Name] = true
	}
	var errs field.ErrorList
	for i := range rules {
		errs = append(errs, validatePodFailurePolicyRule(s, &rules[i], rp.Index(i), containers)...)
	}
	return errs
}

// validatePodFailurePolicyRule checks one rule at p: its action (FailIndex needs backoffLimitPerIndex) and its
// one requirement.
func validatePodFailurePolicyRule(s *batchv1.JobSpec, r *batchv1.PodFailurePolicyRule, p *field.Path,
	containers map[string]bool) field.ErrorList {
	actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionCount,
		batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionFailJob,
		batchv1.PodFailurePolicyActionIgnore}
	var errs field.ErrorList
	switch ap := p.Child("action"); {
	case r.Action == "":
		errs = append(errs, field.Required(ap, fmt.Sprintf("valid values: %q", actions)))
	case r.Action == batchv1.PodFailurePolicyActionFailIndex && s.BackoffLimitPerIndex == nil:
		errs = append(errs, field.Invalid(ap, r.Action, "requires the backoffLimitPerIndex to be set"))
	case !slices.Contains(actions, r.Action):
		errs = append(errs, field.NotSupported(ap, r.Action, actions))
	}
	if r.OnExitCodes != nil {
		errs = append(errs, validateOnExitCodes(r.OnExitCodes, p.Child("onExitCodes"), containers)...)
	}
	errs = append(errs, validateOnPodConditions(r.OnPodConditions, p.Child("onPodConditions"))...)
	switch {
	case r.OnExitCodes != nil && len(r.OnPodConditions) > 0:
		errs = append(errs, field.Invalid(p, field.OmitValueType{},
			"specifying both OnExitCodes and OnPodConditions is not supported"))
	case r.OnExitCodes == nil && len(r.OnPodConditions) == 0:
		errs = append(errs, field.Invalid(p, field.OmitValueType{},
			"specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return errs
}

// validateOnExitCodes checks an onExitCodes requirement: operator In or NotIn, a known container, and 1..255
// ordered, unique exit codes (no 0 with In).
func validateOnExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *field.Path,
	containers map[string]bool) field.ErrorList {
	ops := []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn,
		batchv1.PodFailurePolicyOnExitCodesOpNotIn}
	var errs field.ErrorList
	switch {
	case r.Operator == "":
		errs = append(errs, field.Required(p.Child("operator"), fmt.Sprintf("valid values: %q", ops)))
	case !slices.Contains(ops, r.Operator):
		errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, ops))
	}
	if r.ContainerName != nil && !containers[*r.ContainerName] {
		errs = append(errs, field.Invalid(p.Child("containerName"), *r.ContainerName,
			"must be one of the container or initContainer names in the pod template"))
	}
	vp := p.Child("values")
	switch {
	case len(r.Values) == 0:
		return append(errs, field.Invalid(vp, r.Values, "at least one value is required"))
	case len(r.Values) > maxPodFailurePolicyExitCodes:
		return append(errs, field.TooMany(vp, len(r.Values), maxPodFailurePolicyExitCodes))
	}
	seen, ordered := map[int32]bool{}, true
	for j, v := range r.Values {
		if r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(vp.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			errs = append(errs, field.Duplicate(vp.Index(j), v))
		}
		seen[v] = true
		ordered = ordered && (j == 0 || r.Values[j-1] <= v)
	}
	if !ordered {
		errs = append(errs, field.Invalid(vp, r.Values, "must be ordered"))
	}
	return errs
}

// validateOnPodConditions checks up to 20 patterns: a qualified condition type and a True, False or Unknown
// status.
func validateOnPodConditions(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern,
	p *field.Path) field.ErrorList {
	if len(patterns) > maxPodFailurePolicyConditions {
		return field.ErrorList{field.TooMany(p, len(patterns), maxPodFailurePolicyConditions)}
	}
	statuses := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionUnknown}
	var errs field.ErrorList
	for j, c := range patterns {
		for _, msg := range validation.IsQualifiedName(string(c.Type)) {
			errs = append(errs, field.Invalid(p.Index(j).Child("type"), c.Type, msg))
		}
		switch sp := p.Index(j).Child("status"); {
		case c.Status == "":
			errs = append(errs, field.Required(sp, fmt.Sprintf("valid values: %q", statuses)))
		case !slices.Contains(statuses, c.Status):
			errs = append(errs, field.NotSupported(sp, c.Status, statuses))
		}
	}
	return errs
}

// validateSuccessPolicy checks spec.successPolicy at p: Indexed completion, 1..20 rules, each with
// succeededIndexes ("0,2-4", within completions) or succeededCount (0..completions, and within the indexes).
func validateSuccessPolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "requires indexed completion mode"))
	}
	rules, rp := s.SuccessPolicy.Rules, p.Child("rules")
	switch {
	case len(rules) == 0:
		return append(errs, field.Required(rp, "at least one rules must be specified when the successPolicy is specified"))
	case len(rules) > maxSuccessPolicyRules:
		return append(errs, field.TooMany(rp, len(rules), maxSuccessPolicyRules))
	}
	var completions int32
	if s.Completions != nil {
		completions = *s.Completions
	}
	for i, r := range rules {
		errs = append(errs, validateSuccessPolicyRule(r, completions, rp.Index(i))...)
	}
	return errs
}

// validateSuccessPolicyRule checks one rule against the Job's completions.
func validateSuccessPolicyRule(r batchv1.SuccessPolicyRule, completions int32, p *field.Path) field.ErrorList {
	if r.SucceededIndexes == nil && r.SucceededCount == nil {
		return field.ErrorList{field.Required(p, "at least one of succeededCount or succeededIndexes must be specified")}
	}
	var errs field.ErrorList
	total := int64(-1)
	if r.SucceededIndexes != nil {
		n, err := countIndexes(*r.SucceededIndexes, completions)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("succeededIndexes"), *r.SucceededIndexes,
				"error parsing succeededIndexes: "+err.Error()))
		}
		total = n
	}
	if c := r.SucceededCount; c != nil {
		cp := p.Child("succeededCount")
		switch {
		case *c < 0:
			errs = append(errs, field.Invalid(cp, *c, "must be greater than or equal to 0"))
		case *c > completions:
			errs = append(errs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
		case total >= 0 && int64(*c) > total:
			errs = append(errs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
		}
	}
	return errs
}

// countIndexes parses a list of indexes and ranges ("1,3-5,7") in increasing order, each below completions,
// and returns how many indexes it names.
func countIndexes(list string, completions int32) (int64, error) {
	var n int64
	last := int64(-1)
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseInt(lo, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("cannot convert string to integer for index: %q", lo)
		}
		end := first
		if isRange {
			if end, err = strconv.ParseInt(hi, 10, 32); err != nil {
				return 0, fmt.Errorf("cannot convert string to integer for index: %q", hi)
			}
			if end <= first {
				return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", first, end)
			}
		}
		switch {
		case first <= last:
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", last, first)
		case end >= int64(completions):
			return 0, fmt.Errorf("too large: %d", end)
		}
		n += end - first + 1
		last = end
	}
	return n, nil
}
