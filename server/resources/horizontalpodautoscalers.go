package resources

import (
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of an HPA's scaling behavior.
const (
	maxHPAStabilizationWindowSeconds = 3600
	maxHPAPolicyPeriodSeconds        = 1800
	defaultHPACPUUtilization         = 80
	hpaMetricsCellItems              = 2
)

func init() {
	register(&Resource{
		GVK:        autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		Plural:     "horizontalpodautoscalers",
		ShortNames: []string{"hpa"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:    func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Status:     true,
		Default:    func(obj runtime.Object) { defaultHPA(obj.(*autoscalingv2.HorizontalPodAutoscaler)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateHPASpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, field.NewPath("spec"))
		},
		Table: &Table{Columns: hpaColumns, Cells: hpaCells},
	})
}

// defaultHPA applies autoscaling/v2 defaults: minReplicas 1, a CPU utilization target of 80% when no metric is
// given, and, when a behavior is given, Kubernetes' scale-up and scale-down rules for what it leaves out.
func defaultHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	s := &hpa.Spec
	if s.MinReplicas == nil {
		s.MinReplicas = new(int32(1))
	}
	if len(s.Metrics) == 0 {
		s.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
				Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(defaultHPACPUUtilization))}},
		}}
	}
	if s.Behavior != nil {
		s.Behavior.ScaleUp = withHPARuleDefaults(s.Behavior.ScaleUp, defaultHPAScaleUp())
		s.Behavior.ScaleDown = withHPARuleDefaults(s.Behavior.ScaleDown, defaultHPAScaleDown())
	}
}

// defaultHPAScaleUp: no stabilization; add the larger of 4 pods or 100% every 15 seconds.
func defaultHPAScaleUp() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: new(int32(0)),
		SelectPolicy:               new(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// defaultHPAScaleDown: the controller's stabilization window (unset here); remove up to 100% every 15 seconds.
func defaultHPAScaleDown() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: new(autoscalingv2.MaxChangePolicySelect),
		Policies:     []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
}

// withHPARuleDefaults returns def overridden by every field set in r.
func withHPARuleDefaults(r, def *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return def
	}
	if r.SelectPolicy != nil {
		def.SelectPolicy = r.SelectPolicy
	}
	if r.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = r.StabilizationWindowSeconds
	}
	if r.Policies != nil {
		def.Policies = r.Policies
	}
	if r.Tolerance != nil {
		def.Tolerance = r.Tolerance
	}
	return def
}

// validateHPASpec checks an HPA's spec at p: 1 <= minReplicas <= maxReplicas, the scale target, the metrics
// and the behavior.
func validateHPASpec(s *autoscalingv2.HorizontalPodAutoscalerSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MinReplicas != nil && *s.MinReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *s.MinReplicas, "must be greater than or equal to 1"))
	}
	if s.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), s.MaxReplicas, "must be greater than 0"))
	}
	if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), s.MaxReplicas,
			"must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, validateHPAObjectRef(s.ScaleTargetRef, p.Child("scaleTargetRef"))...)
	for i := range s.Metrics {
		errs = append(errs, validateHPAMetric(&s.Metrics[i], p.Child("metrics").Index(i))...)
	}
	if s.Behavior != nil {
		errs = append(errs, validateHPARules(s.Behavior.ScaleUp, p.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateHPARules(s.Behavior.ScaleDown, p.Child("behavior", "scaleDown"))...)
	}
	return errs
}

// validateHPAObjectRef requires a kind and a name usable in a URL path.
func validateHPAObjectRef(ref autoscalingv2.CrossVersionObjectReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, value string }{{"kind", ref.Kind}, {"name", ref.Name}} {
		if f.value == "" {
			errs = append(errs, field.Required(p.Child(f.name), ""))
			continue
		}
		for _, msg := range content.IsPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
		}
	}
	return errs
}

// validateHPAMetric checks a metric: a known type whose source, and only that one, is set and valid.
func validateHPAMetric(m *autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	sources := []struct {
		typ      autoscalingv2.MetricSourceType
		name     string
		set      bool
		validate func(*field.Path) field.ErrorList
	}{
		{autoscalingv2.ObjectMetricSourceType, "object", m.Object != nil,
			func(p *field.Path) field.ErrorList { return validateHPAObjectSource(m.Object, p) }},
		{autoscalingv2.PodsMetricSourceType, "pods", m.Pods != nil,
			func(p *field.Path) field.ErrorList { return validateHPAPodsSource(m.Pods, p) }},
		{autoscalingv2.ResourceMetricSourceType, "resource", m.Resource != nil,
			func(p *field.Path) field.ErrorList { return validateHPAResourceSource(m.Resource, p) }},
		{autoscalingv2.ContainerResourceMetricSourceType, "containerResource", m.ContainerResource != nil,
			func(p *field.Path) field.ErrorList { return validateHPAContainerSource(m.ContainerResource, p) }},
		{autoscalingv2.ExternalMetricSourceType, "external", m.External != nil,
			func(p *field.Path) field.ErrorList { return validateHPAExternalSource(m.External, p) }},
	}
	var errs field.ErrorList
	known := false
	for _, src := range sources {
		switch {
		case src.typ == m.Type && !src.set:
			errs = append(errs, field.Required(p.Child(src.name), "must populate information for the given metric source"))
		case src.typ == m.Type:
			errs = append(errs, src.validate(p.Child(src.name))...)
		case src.set:
			errs = append(errs, field.Forbidden(p.Child(src.name), "must populate the given metric source only"))
		}
		known = known || src.typ == m.Type
	}
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	} else if !known {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, []autoscalingv2.MetricSourceType{
			autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType,
			autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType,
			autoscalingv2.ResourceMetricSourceType}))
	}
	return errs
}

// validateHPAObjectSource needs a described object, a metric and a value or averageValue target.
func validateHPAObjectSource(s *autoscalingv2.ObjectMetricSource, p *field.Path) field.ErrorList {
	errs := validateHPAObjectRef(s.DescribedObject, p.Child("describedObject"))
	errs = append(errs, validateHPAMetricID(s.Metric, p.Child("metric"))...)
	errs = append(errs, validateHPATarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

// validateHPAPodsSource needs a metric and an averageValue target.
func validateHPAPodsSource(s *autoscalingv2.PodsMetricSource, p *field.Path) field.ErrorList {
	errs := validateHPAMetricID(s.Metric, p.Child("metric"))
	errs = append(errs, validateHPATarget(s.Target, p.Child("target"))...)
	if s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

// validateHPAResourceSource needs a resource name and a utilization or averageValue target.
func validateHPAResourceSource(s *autoscalingv2.ResourceMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	return append(errs, validateHPAResourceTarget(s.Target, p.Child("target"))...)
}

// validateHPAContainerSource is validateHPAResourceSource plus a container name.
func validateHPAContainerSource(s *autoscalingv2.ContainerResourceMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	if s.Container == "" {
		errs = append(errs, field.Required(p.Child("container"), "must specify a container"))
	}
	return append(errs, validateHPAResourceTarget(s.Target, p.Child("target"))...)
}

// validateHPAResourceTarget requires exactly one of averageUtilization and averageValue.
func validateHPAResourceTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	errs := validateHPATarget(t, p)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

// validateHPAExternalSource needs a metric and exactly one of a value and an averageValue target.
func validateHPAExternalSource(s *autoscalingv2.ExternalMetricSource, p *field.Path) field.ErrorList {
	errs := validateHPAMetricID(s.Metric, p.Child("metric"))
	errs = append(errs, validateHPATarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if s.Target.Value != nil && s.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

// validateHPAMetricID requires a metric name usable in a URL path and a valid optional selector.
func validateHPAMetricID(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if id.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a metric name"))
	} else {
		for _, msg := range content.IsPathSegmentName(id.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), id.Name, msg))
		}
	}
	if id.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(id.Selector,
			metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	return errs
}

// validateHPATarget checks a target's type and that the values it sets are positive.
func validateHPATarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Type {
	case "":
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

// validateHPARules checks scaling rules: a stabilization window of 0..3600s, a known select policy, a
// non-negative tolerance and at least one policy.
func validateHPARules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && *w < 0 {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
	} else if w != nil && *w > maxHPAStabilizationWindowSeconds {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w,
			fmt.Sprintf("must be less than or equal to %v", maxHPAStabilizationWindowSeconds)))
	}
	selects := []autoscalingv2.ScalingPolicySelect{autoscalingv2.DisabledPolicySelect,
		autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}
	if sp := r.SelectPolicy; sp != nil && *sp != selects[0] && *sp != selects[1] && *sp != selects[2] {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *sp, selects))
	}
	if r.Tolerance != nil && r.Tolerance.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("tolerance"), r.Tolerance.String(), "must be greater than or equal to zero"))
	}
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(p.Child("policies"), "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		errs = append(errs, validateHPAPolicy(pol, p.Child("policies").Index(i))...)
	}
	return errs
}

// validateHPAPolicy checks a Pods or Percent policy with a positive value and a period of 1..1800s.
func validateHPAPolicy(pol autoscalingv2.HPAScalingPolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pol.Type != autoscalingv2.PodsScalingPolicy && pol.Type != autoscalingv2.PercentScalingPolicy {
		errs = append(errs, field.NotSupported(p.Child("type"), pol.Type,
			[]autoscalingv2.HPAScalingPolicyType{autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}))
	}
	if pol.Value <= 0 {
		errs = append(errs, field.Invalid(p.Child("value"), pol.Value, "must be greater than zero"))
	}
	if pol.PeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
	} else if pol.PeriodSeconds > maxHPAPolicyPeriodSeconds {
		errs = append(errs, field.Invalid(p.Child("periodSeconds"), pol.PeriodSeconds,
			fmt.Sprintf("must be less than or equal to %v", maxHPAPolicyPeriodSeconds)))
	}
	return errs
}

var hpaColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Reference", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["scaleTargetRef"]),
	textColumn("Targets", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["metrics"]),
	textColumn("MinPods", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["minReplicas"]),
	integerColumn("MaxPods", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["maxReplicas"]),
	integerColumn("Replicas", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
	ageColumn,
}

// hpaCells: NAME REFERENCE ("Deployment/web") TARGETS ("cpu: 40%/80%") MINPODS MAXPODS REPLICAS AGE.
func hpaCells(obj runtime.Object, now time.Time) []any {
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	minPods := "<unset>"
	if hpa.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*hpa.Spec.MinReplicas)
	}
	ref := hpa.Spec.ScaleTargetRef
	return []any{hpa.Name, ref.Kind + "/" + ref.Name, hpaMetricsCell(hpa.Spec.Metrics, hpa.Status.CurrentMetrics),
		minPods, int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), age(hpa.CreationTimestamp, now)}
}

// hpaMetricsCell prints "current/target" for the first two metrics and counts the others.
func hpaMetricsCell(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	list := make([]string, 0, len(specs))
	for i := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		list = append(list, hpaMetricCell(&specs[i], st))
	}
	if len(list) <= hpaMetricsCellItems {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(list[:hpaMetricsCellItems], ", "), len(list)-hpaMetricsCellItems)
}

// hpaMetricCell prints one metric as kubectl does: "current/target", "(avg)" for per-pod targets of object and
// external metrics, "name: current/target" for (container) resources, "<unknown>" for a value not yet observed.
func hpaMetricCell(m *autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	var cur autoscalingv2.MetricValueStatus
	switch {
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		if st != nil && st.External != nil {
			cur = st.External.Current
		}
		return hpaValueCell(cur, m.External.Target)
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		if st != nil && st.Object != nil {
			cur = st.Object.Current
		}
		return hpaValueCell(cur, m.Object.Target)
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		if st != nil && st.Pods != nil {
			cur = st.Pods.Current
		}
		return quantityCell(cur.AverageValue) + "/" + quantityCell(m.Pods.Target.AverageValue)
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		if st != nil && st.Resource != nil {
			cur = st.Resource.Current
		}
		return string(m.Resource.Name) + ": " + hpaResourceCell(cur, m.Resource.Target)
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		if st != nil && st.ContainerResource != nil {
			cur = st.ContainerResource.Current
		}
		return string(m.ContainerResource.Name) + ": " + hpaResourceCell(cur, m.ContainerResource.Target)
	}
	return "<unknown type>"
}

// hpaValueCell prints an object or external metric: average values with "(avg)", else values.
func hpaValueCell(cur autoscalingv2.MetricValueStatus, t autoscalingv2.MetricTarget) string {
	if t.AverageValue != nil {
		return quantityCell(cur.AverageValue) + "/" + quantityCell(t.AverageValue) + " (avg)"
	}
	return quantityCell(cur.Value) + "/" + quantityCell(t.Value)
}

// hpaResourceCell prints a resource metric: average values, or utilizations ("40%/80%", target "<auto>").
func hpaResourceCell(cur autoscalingv2.MetricValueStatus, t autoscalingv2.MetricTarget) string {
	if t.AverageValue != nil {
		return quantityCell(cur.AverageValue) + "/" + quantityCell(t.AverageValue)
	}
	current, target := "<unknown>", "<auto>"
	if cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return current + "/" + target
}

// quantityCell prints a quantity, "<unknown>" when nil.
func quantityCell(q *resource.Quantity) string {
	if q == nil {
		return "<unknown>"
	}
	return q.String()
}
