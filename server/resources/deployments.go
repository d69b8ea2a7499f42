package resources

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Plural:     "deployments",
		ShortNames: []string{"deploy"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.Deployment{} },
		NewList:    func() runtime.Object { return &appsv1.DeploymentList{} },
		Status:     true,
		Scale: replicasScale(
			func(d *appsv1.Deployment) **int32 { return &d.Spec.Replicas },
			func(d *appsv1.Deployment) int32 { return d.Status.Replicas },
			func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }),
		Generation: true,
		Default:    func(obj runtime.Object) { defaultDeployment(obj.(*appsv1.Deployment)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateDeploymentSpec(&obj.(*appsv1.Deployment).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateImmutableField(obj.(*appsv1.Deployment).Spec.Selector,
				old.(*appsv1.Deployment).Spec.Selector, field.NewPath("spec", "selector"))
		},
		Table: &Table{Columns: deploymentColumns, Cells: deploymentCells},
	})
}

// defaultDeployment applies apps/v1 defaults: 1 replica, RollingUpdate 25%/25%, 10 old ReplicaSets kept, a
// 600s progress deadline, and the pod template's defaults.
func defaultDeployment(d *appsv1.Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = new(int32(1))
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := s.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = new(intstr.FromString("25%"))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = new(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = new(int32(10))
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = new(int32(600))
	}
	defaultPodTemplateSpec(&s.Template)
}

// validateDeploymentSpec checks a Deployment's spec at p.
func validateDeploymentSpec(s *appsv1.DeploymentSpec, p *field.Path) field.ErrorList {
	errs := validateOptionalNonnegative(s.Replicas, p.Child("replicas"))
	errs = append(errs, validateWorkloadSelector(s.Selector, "deployment", p.Child("selector"))...)
	errs = append(errs, validateReplicatedTemplate(s.Selector, &s.Template, "Deployment", p.Child("template"))...)
	errs = append(errs, validateDeploymentStrategy(&s.Strategy, p.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalNonnegative(s.RevisionHistoryLimit, p.Child("revisionHistoryLimit"))...)
	if d := s.ProgressDeadlineSeconds; d != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d), p.Child("progressDeadlineSeconds"))...)
		if *d <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(p.Child("progressDeadlineSeconds"), *d,
				"must be greater than minReadySeconds"))
		}
	}
	return errs
}

// validateDeploymentStrategy checks spec.strategy: Recreate takes no rollingUpdate; RollingUpdate needs one whose
// maxSurge and maxUnavailable are valid and not both zero.
func validateDeploymentStrategy(st *appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	switch st.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if st.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(p.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", st.Type))}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if st.RollingUpdate == nil {
			return field.ErrorList{field.Required(p.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdateDeployment(st.RollingUpdate, p.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), st.Type, []appsv1.DeploymentStrategyType{
			appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType})}
	}
}

// validateRollingUpdateDeployment checks maxUnavailable (at most 100%) and maxSurge, which may not both be 0.
func validateRollingUpdateDeployment(ru *appsv1.RollingUpdateDeployment, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ru.MaxUnavailable != nil {
		errs = append(errs, validatePositiveIntOrPercent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		errs = append(errs, validateNotMoreThan100Percent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
	}
	if ru.MaxSurge != nil {
		errs = append(errs, validatePositiveIntOrPercent(*ru.MaxSurge, p.Child("maxSurge"))...)
	}
	if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
		errs = append(errs, field.Invalid(p.Child("maxUnavailable"), ru.MaxUnavailable,
			"may not be 0 when `maxSurge` is 0"))
	}
	return errs
}

var deploymentColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Ready", "Number of the pod with ready state"),
	textColumn("Up-to-date", appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
	textColumn("Available", appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
	ageColumn,
	containersColumn,
	imagesColumn,
	wideSelectorColumn(appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
}

// deploymentCells: NAME READY (ready/desired) UP-TO-DATE AVAILABLE AGE, wide CONTAINERS IMAGES SELECTOR.
func deploymentCells(obj runtime.Object, now time.Time) []any {
	d := obj.(*appsv1.Deployment)
	var desired int32
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	names, images := workloadContainerCells(d.Spec.Template.Spec.Containers)
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = s.String()
	}
	return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now), names, images, selector}
}
