package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTolerations checks each toleration: a qualified key, Exists for an empty key, no value with Exists, a
// label-value value, a known effect, and tolerationSeconds only with NoExecute.
func validateTolerations(ts []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, invalidEach(ip.Child("key"), t.Key, content.IsLabelKey(t.Key))...)
		} else if t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			errs = append(errs, invalidEach(ip.Child("value"), t.Value, content.IsLabelValue(t.Value))...)
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value,
					"value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, ip.Child("effect"))...)
		}
	}
	return errs
}

// validateTaintEffect accepts NoSchedule, PreferNoSchedule and NoExecute.
func validateTaintEffect(e corev1.TaintEffect, p *field.Path) field.ErrorList {
	switch e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, e, []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
}

// validateAffinity checks node affinity selectors and pod (anti-)affinity terms. nil is valid.
func validateAffinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			errs = append(errs, validateNodeSelector(r, np.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			ip := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(t.Weight, ip.Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(&t.Preference, ip.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, p *field.Path) field.ErrorList {
	if w < 1 || w > 100 {
		return field.ErrorList{field.Invalid(p, w, "must be in the range 1-100")}
	}
	return nil
}

// validateNodeSelector requires at least one term.
func validateNodeSelector(ns *corev1.NodeSelector, p *field.Path) field.ErrorList {
	tp := p.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(tp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i := range ns.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(&ns.NodeSelectorTerms[i], tp.Index(i))...)
	}
	return errs
}

// validateNodeSelectorTerm checks label requirements and field requirements (metadata.name, In or NotIn, one
// value).
func validateNodeSelectorTerm(t *corev1.NodeSelectorTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		ip := p.Child("matchExpressions").Index(i)
		errs = append(errs, invalidEach(ip.Child("key"), r.Key, content.IsLabelKey(r.Key))...)
		errs = append(errs, validateSelectorOperator(r.Operator, r.Values, ip)...)
	}
	for i, r := range t.MatchFields {
		ip := p.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(ip.Child("key"), r.Key, []string{"metadata.name"}))
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs = append(errs, field.Invalid(ip.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		if len(r.Values) != 1 {
			errs = append(errs, field.Required(ip.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	}
	return errs
}

// validateSelectorOperator checks a node selector operator against its values.
func validateSelectorOperator(op corev1.NodeSelectorOperator, values []string, p *field.Path) field.ErrorList {
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(values) == 0 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'")}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(values) > 0 {
			return field.ErrorList{field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'")}
		}
	default:
		return field.ErrorList{field.Invalid(p.Child("operator"), op, "not a valid selector operator")}
	}
	return nil
}

// validatePodAffinityTerms checks required and weighted pod (anti-)affinity terms.
func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm,
	p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range required {
		errs = append(errs, validatePodAffinityTerm(&required[i],
			p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i := range preferred {
		ip := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, validateWeight(preferred[i].Weight, ip.Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(&preferred[i].PodAffinityTerm, ip.Child("podAffinityTerm"))...)
	}
	return errs
}

// validatePodAffinityTerm requires a topology key and valid selectors and namespaces.
func validatePodAffinityTerm(t *corev1.PodAffinityTerm, p *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(t.LabelSelector, opts, p.Child("labelSelector"))
	errs = append(errs, metav1validation.ValidateLabelSelector(t.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	for i, ns := range t.Namespaces {
		errs = append(errs, invalidEach(p.Child("namespaces").Index(i), ns, validation.IsDNS1123Label(ns))...)
	}
	if t.TopologyKey == "" {
		return append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, invalidEach(p.Child("topologyKey"), t.TopologyKey, content.IsLabelKey(t.TopologyKey))...)
}

// validateTopologySpread checks each constraint: positive maxSkew, a topology key, a known whenUnsatisfiable,
// minDomains only with DoNotSchedule, and unique (topologyKey, whenUnsatisfiable) pairs.
func validateTopologySpread(cs []corev1.TopologySpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range cs {
		ip := p.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(ip.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(ip.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, invalidEach(ip.Child("topologyKey"), c.TopologyKey, content.IsLabelKey(c.TopologyKey))...)
		}
		if w := c.WhenUnsatisfiable; w != corev1.DoNotSchedule && w != corev1.ScheduleAnyway {
			errs = append(errs, field.NotSupported(ip.Child("whenUnsatisfiable"), w,
				[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		if m := c.MinDomains; m != nil && *m <= 0 {
			errs = append(errs, field.Invalid(ip.Child("minDomains"), *m, "must be greater than 0"))
		} else if m != nil && c.WhenUnsatisfiable != corev1.DoNotSchedule {
			errs = append(errs, field.Invalid(ip.Child("minDomains"), *m,
				"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"))
		}
		key := fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)
		if seen[key] {
			errs = append(errs, field.Duplicate(ip, key))
		}
		seen[key] = true
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector,
			metav1validation.LabelSelectorValidationOptions{}, ip.Child("labelSelector"))...)
	}
	return errs
}
