package resources

// Helpers shared by the workload kinds (apps, batch, policy, autoscaling): selector and template checks,
// int-or-percent fields, table cells for pod templates and the /scale subresource.

import (
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Column definitions shared by the workload tables, as kubectl prints them.
var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1,
		Description: "Names of each container in the template."}
	imagesColumn = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1,
		Description: "Images referenced by each container in the template."}
)

// wideSelectorColumn is the SELECTOR column of `-o wide`, described by the kind's spec.selector documentation.
func wideSelectorColumn(description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1, Description: description}
}

// textColumn is a string column.
func textColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// integerColumn is an integer column.
func integerColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "integer", Description: description}
}

// validateWorkloadSelector checks a controller's required, non-empty spec.selector at p. kind names the
// controller in the message ("deployment").
func validateWorkloadSelector(sel *metav1.LabelSelector, kind string, p *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(p, sel, "empty selector is invalid for "+kind))
	}
	return errs
}

// validateSelectorMatchesTemplate reports, at p ("spec.template"), a template whose labels the selector does not
// select. A nil, empty or invalid selector is left to validateWorkloadSelector.
func validateSelectorMatchesTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec,
	p *field.Path) field.ErrorList {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if sel == nil || err != nil || s.Empty() || s.Matches(labels.Set(t.Labels)) {
		return nil
	}
	return field.ErrorList{field.Invalid(p.Child("metadata", "labels"), t.Labels,
		"`selector` does not match template `labels`")}
}

// validateReplicatedTemplate checks the pod template of a controller that keeps pods running (Deployment,
// ReplicaSet, DaemonSet, StatefulSet) at p ("spec.template"): selector match, the pod template itself, restart
// policy Always and no activeDeadlineSeconds. kind is the controller's kind for messages ("ReplicaSet").
func validateReplicatedTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, kind string,
	p *field.Path) field.ErrorList {
	errs := validateSelectorMatchesTemplate(sel, t, p)
	errs = append(errs, validatePodTemplateSpec(t, p)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("spec", "restartPolicy"), t.Spec.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("spec", "activeDeadlineSeconds"),
			"activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

// validateOptionalNonnegative checks an optional integer field is >= 0.
func validateOptionalNonnegative(v *int32, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return apivalidation.ValidateNonnegativeField(int64(*v), p)
}

// validatePositiveIntOrPercent checks an int-or-percent field: a non-negative integer or "N%".
func validatePositiveIntOrPercent(v intstr.IntOrString, p *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(p, v, msg))
		}
		return errs
	case intstr.Int:
		return apivalidation.ValidateNonnegativeField(int64(v.IntValue()), p)
	default:
		return field.ErrorList{field.Invalid(p, v, "must be an integer or percentage (e.g '5%')")}
	}
}

// validateNotMoreThan100Percent refuses a percentage above 100%. Integers are not bounded.
func validateNotMoreThan100Percent(v intstr.IntOrString, p *field.Path) field.ErrorList {
	n, isPercent := percentValue(v)
	if !isPercent || n <= 100 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v.String(), "must not be greater than 100%")}
}

// percentValue returns N for a valid "N%" value; isPercent is false for integers and malformed strings.
func percentValue(v intstr.IntOrString) (n int, isPercent bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, err == nil
}

// intOrPercentValue returns the number in an int-or-percent field (N for "N%"); nil counts as 0.
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if n, ok := percentValue(*v); ok {
		return n
	}
	return v.IntValue()
}

// workloadContainerCells returns the comma-joined container names and images of a pod template, the
// CONTAINERS and IMAGES cells of `kubectl get -o wide`.
func workloadContainerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, 0, len(cs))
	im := make([]string, 0, len(cs))
	for _, c := range cs {
		n = append(n, c.Name)
		im = append(im, c.Image)
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// boolPtrCell prints an optional boolean the way kubectl does: "True", "False" or "<unset>".
func boolPtrCell(b *bool) string {
	switch {
	case b == nil:
		return "<unset>"
	case *b:
		return "True"
	default:
		return "False"
	}
}

// replicasScale builds the /scale subresource of a controller of type T from accessors for spec.replicas,
// status.replicas and spec.selector. Get reports spec.replicas (0 when unset); Status serializes the selector
// as Scale.status.selector ("app=web"), empty when it is unset or invalid.
func replicasScale[T runtime.Object](spec func(T) **int32, status func(T) int32,
	selector func(T) *metav1.LabelSelector) *Scale {
	return &Scale{
		Get: func(obj runtime.Object) autoscalingv1.ScaleSpec {
			var n int32
			if r := *spec(obj.(T)); r != nil {
				n = *r
			}
			return autoscalingv1.ScaleSpec{Replicas: n}
		},
		Status: func(obj runtime.Object) autoscalingv1.ScaleStatus {
			o := obj.(T)
			return autoscalingv1.ScaleStatus{Replicas: status(o), Selector: scaleSelector(selector(o))}
		},
		Set: func(obj runtime.Object, replicas int32) { *spec(obj.(T)) = new(replicas) },
	}
}

// scaleSelector serializes a label selector for Scale.status.selector.
func scaleSelector(sel *metav1.LabelSelector) string {
	if sel == nil {
		return ""
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return s.String()
}
