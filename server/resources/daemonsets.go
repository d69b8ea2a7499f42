package resources

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Plural:     "daemonsets",
		ShortNames: []string{"ds"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:    func() runtime.Object { return &appsv1.DaemonSetList{} },
		Status:     true,
		Generation: true,
		Default:    func(obj runtime.Object) { defaultDaemonSet(obj.(*appsv1.DaemonSet)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateDaemonSetSpec(&obj.(*appsv1.DaemonSet).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateImmutableField(obj.(*appsv1.DaemonSet).Spec.Selector,
				old.(*appsv1.DaemonSet).Spec.Selector, field.NewPath("spec", "selector"))
		},
		Table: &Table{Columns: daemonSetColumns, Cells: daemonSetCells},
	})
}

// defaultDaemonSet applies apps/v1 defaults: RollingUpdate with maxUnavailable 1 and maxSurge 0, 10 old
// revisions kept, and the pod template's defaults.
func defaultDaemonSet(ds *appsv1.DaemonSet) {
	us := &ds.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if us.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if us.RollingUpdate == nil {
			us.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if us.RollingUpdate.MaxUnavailable == nil {
			us.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(1))
		}
		if us.RollingUpdate.MaxSurge == nil {
			us.RollingUpdate.MaxSurge = new(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = new(int32(10))
	}
	defaultPodTemplateSpec(&ds.Spec.Template)
}

// validateDaemonSetSpec checks a DaemonSet's spec at p.
func validateDaemonSetSpec(s *appsv1.DaemonSetSpec, p *field.Path) field.ErrorList {
	errs := validateWorkloadSelector(s.Selector, "daemonset", p.Child("selector"))
	errs = append(errs, validateReplicatedTemplate(s.Selector, &s.Template, "DaemonSet", p.Child("template"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&s.UpdateStrategy, p.Child("updateStrategy"))...)
	return append(errs, validateOptionalNonnegative(s.RevisionHistoryLimit, p.Child("revisionHistoryLimit"))...)
}

// validateDaemonSetUpdateStrategy checks spec.updateStrategy: OnDelete, or RollingUpdate where exactly one of
// maxUnavailable and maxSurge is non-zero.
func validateDaemonSetUpdateStrategy(us *appsv1.DaemonSetUpdateStrategy, p *field.Path) field.ErrorList {
	switch us.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if us.RollingUpdate == nil {
			return field.ErrorList{field.Required(p.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdateDaemonSet(us.RollingUpdate, p.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), us.Type, []appsv1.DaemonSetUpdateStrategyType{
			appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType})}
	}
}

// validateRollingUpdateDaemonSet checks maxUnavailable and maxSurge (each at most 100%), exactly one non-zero.
func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ru.MaxUnavailable != nil {
		errs = append(errs, validatePositiveIntOrPercent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		errs = append(errs, validateNotMoreThan100Percent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
	}
	if ru.MaxSurge != nil {
		errs = append(errs, validatePositiveIntOrPercent(*ru.MaxSurge, p.Child("maxSurge"))...)
		errs = append(errs, validateNotMoreThan100Percent(*ru.MaxSurge, p.Child("maxSurge"))...)
	}
	unavailable, surge := intOrPercentValue(ru.MaxUnavailable) != 0, intOrPercentValue(ru.MaxSurge) != 0
	switch {
	case unavailable && surge:
		errs = append(errs, field.Invalid(p.Child("maxSurge"), ru.MaxSurge,
			"may not be set when maxUnavailable is non-zero"))
	case !unavailable && !surge:
		errs = append(errs, field.Required(p.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

var daemonSetColumns = []metav1.TableColumnDefinition{
	nameColumn,
	integerColumn("Desired", appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]),
	integerColumn("Current", appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]),
	integerColumn("Ready", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]),
	integerColumn("Up-to-date", appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]),
	integerColumn("Available", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]),
	textColumn("Node Selector", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
	ageColumn,
	containersColumn,
	imagesColumn,
	wideSelectorColumn(appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
}

// daemonSetCells: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE, wide CONTAINERS IMAGES
// SELECTOR.
func daemonSetCells(obj runtime.Object, now time.Time) []any {
	ds := obj.(*appsv1.DaemonSet)
	st := ds.Status
	names, images := workloadContainerCells(ds.Spec.Template.Spec.Containers)
	return []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
		int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable),
		labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector), age(ds.CreationTimestamp, now), names, images,
		metav1.FormatLabelSelector(ds.Spec.Selector)}
}
