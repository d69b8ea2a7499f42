package resources

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		Plural:     "replicasets",
		ShortNames: []string{"rs"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:    func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Status:     true,
		Scale: replicasScale(
			func(rs *appsv1.ReplicaSet) **int32 { return &rs.Spec.Replicas },
			func(rs *appsv1.ReplicaSet) int32 { return rs.Status.Replicas },
			func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }),
		Generation: true,
		Default:    func(obj runtime.Object) { defaultReplicaSet(obj.(*appsv1.ReplicaSet)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateReplicaSetSpec(&obj.(*appsv1.ReplicaSet).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateImmutableField(obj.(*appsv1.ReplicaSet).Spec.Selector,
				old.(*appsv1.ReplicaSet).Spec.Selector, field.NewPath("spec", "selector"))
		},
		Table: &Table{Columns: replicaSetColumns, Cells: replicaSetCells},
	})
}

// defaultReplicaSet applies apps/v1 defaults: 1 replica and the pod template's defaults.
func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = new(int32(1))
	}
	defaultPodTemplateSpec(&rs.Spec.Template)
}

// validateReplicaSetSpec checks a ReplicaSet's spec at p.
func validateReplicaSetSpec(s *appsv1.ReplicaSetSpec, p *field.Path) field.ErrorList {
	errs := validateOptionalNonnegative(s.Replicas, p.Child("replicas"))
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	errs = append(errs, validateWorkloadSelector(s.Selector, "replicaset", p.Child("selector"))...)
	return append(errs, validateReplicatedTemplate(s.Selector, &s.Template, "ReplicaSet", p.Child("template"))...)
}

var replicaSetColumns = []metav1.TableColumnDefinition{
	nameColumn,
	integerColumn("Desired", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
	integerColumn("Current", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
	integerColumn("Ready", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
	ageColumn,
	containersColumn,
	imagesColumn,
	wideSelectorColumn(appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
}

// replicaSetCells: NAME DESIRED CURRENT READY AGE, wide CONTAINERS IMAGES SELECTOR.
func replicaSetCells(obj runtime.Object, now time.Time) []any {
	rs := obj.(*appsv1.ReplicaSet)
	var desired int32
	if rs.Spec.Replicas != nil {
		desired = *rs.Spec.Replicas
	}
	names, images := workloadContainerCells(rs.Spec.Template.Spec.Containers)
	return []any{rs.Name, int64(desired), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
		age(rs.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}
}
