package resources

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		Plural:     "statefulsets",
		ShortNames: []string{"sts"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:    func() runtime.Object { return &appsv1.StatefulSetList{} },
		Status:     true,
		Scale: replicasScale(
			func(s *appsv1.StatefulSet) **int32 { return &s.Spec.Replicas },
			func(s *appsv1.StatefulSet) int32 { return s.Status.Replicas },
			func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector }),
		Generation: true,
		Default:    func(obj runtime.Object) { defaultStatefulSet(obj.(*appsv1.StatefulSet)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateStatefulSetSpec(&obj.(*appsv1.StatefulSet).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateStatefulSetUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
		},
		Table: &Table{Columns: statefulSetColumns, Cells: statefulSetCells},
	})
}

// defaultStatefulSet applies apps/v1 defaults: 1 replica, OrderedReady pod management, RollingUpdate with
// partition 0, 10 old revisions kept, PVCs retained on delete and scale-down, and the pod template's defaults.
func defaultStatefulSet(sts *appsv1.StatefulSet) {
	s := &sts.Spec
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := s.UpdateStrategy.RollingUpdate; s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		ru != nil && ru.Partition == nil {
		ru.Partition = new(int32(0))
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Replicas == nil {
		s.Replicas = new(int32(1))
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = new(int32(10))
	}
	defaultPodTemplateSpec(&s.Template)
}

// validateStatefulSetSpec checks a StatefulSet's spec at p.
func validateStatefulSetSpec(s *appsv1.StatefulSetSpec, p *field.Path) field.ErrorList {
	errs := validatePodManagementPolicy(s.PodManagementPolicy, p.Child("podManagementPolicy"))
	errs = append(errs, validateStatefulSetUpdateStrategy(&s.UpdateStrategy, p.Child("updateStrategy"))...)
	errs = append(errs, validatePVCRetentionPolicy(s.PersistentVolumeClaimRetentionPolicy,
		p.Child("persistentVolumeClaimRetentionPolicy"))...)
	errs = append(errs, validateOptionalNonnegative(s.Replicas, p.Child("replicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalNonnegative(s.RevisionHistoryLimit, p.Child("revisionHistoryLimit"))...)
	if s.Ordinals != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.Ordinals.Start),
			p.Child("ordinals", "start"))...)
	}
	if s.ServiceName != "" {
		for _, msg := range validation.IsDNS1035Label(s.ServiceName) {
			errs = append(errs, field.Invalid(p.Child("serviceName"), s.ServiceName, msg))
		}
	}
	errs = append(errs, validateVolumeClaimTemplateNames(s, p.Child("volumeClaimTemplates"))...)
	errs = append(errs, validateWorkloadSelector(s.Selector, "statefulset", p.Child("selector"))...)
	return append(errs, validateReplicatedTemplate(s.Selector, &s.Template, "StatefulSet", p.Child("template"))...)
}

// validatePodManagementPolicy requires OrderedReady or Parallel.
func validatePodManagementPolicy(v appsv1.PodManagementPolicyType, p *field.Path) field.ErrorList {
	switch v {
	case "":
		return field.ErrorList{field.Required(p, "")}
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
		return nil
	default:
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be '%s' or '%s'",
			appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement))}
	}
}

// validateStatefulSetUpdateStrategy checks spec.updateStrategy: OnDelete takes no rollingUpdate; RollingUpdate's
// partition is >= 0 and its maxUnavailable, when set, is a non-zero int or percentage up to 100%.
func validateStatefulSetUpdateStrategy(us *appsv1.StatefulSetUpdateStrategy, p *field.Path) field.ErrorList {
	switch us.Type {
	case "":
		return field.ErrorList{field.Required(p, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if us.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(p.Child("rollingUpdate"), us.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType))}
		}
		return nil
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if us.RollingUpdate == nil {
			return nil
		}
		return validateRollingUpdateStatefulSet(us.RollingUpdate, p.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.Invalid(p, us, fmt.Sprintf("must be '%s' or '%s'",
			appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType))}
	}
}

// validateRollingUpdateStatefulSet checks partition >= 0 and an optional maxUnavailable in 1..100%.
func validateRollingUpdateStatefulSet(ru *appsv1.RollingUpdateStatefulSetStrategy, p *field.Path) field.ErrorList {
	errs := validateOptionalNonnegative(ru.Partition, p.Child("partition"))
	if mu := ru.MaxUnavailable; mu != nil {
		errs = append(errs, validatePositiveIntOrPercent(*mu, p.Child("maxUnavailable"))...)
		if intOrPercentValue(mu) == 0 {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), *mu, "cannot be 0"))
		}
		errs = append(errs, validateNotMoreThan100Percent(*mu, p.Child("maxUnavailable"))...)
	}
	return errs
}

// validatePVCRetentionPolicy requires Retain or Delete for whenDeleted and whenScaled.
func validatePVCRetentionPolicy(rp *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy,
	p *field.Path) field.ErrorList {
	if rp == nil {
		return nil
	}
	valid := []appsv1.PersistentVolumeClaimRetentionPolicyType{
		appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		value appsv1.PersistentVolumeClaimRetentionPolicyType
	}{{"whenDeleted", rp.WhenDeleted}, {"whenScaled", rp.WhenScaled}} {
		if f.value != valid[0] && f.value != valid[1] {
			errs = append(errs, field.NotSupported(p.Child(f.name), f.value, valid))
		}
	}
	return errs
}

// validateVolumeClaimTemplateNames checks each volume claim template has a valid, unique name. The claim specs
// themselves are validated when the controller creates the PersistentVolumeClaims.
func validateVolumeClaimTemplateNames(s *appsv1.StatefulSetSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range s.VolumeClaimTemplates {
		np := p.Index(i).Child("metadata", "name")
		if t.Name == "" {
			errs = append(errs, field.Required(np, ""))
			continue
		}
		if seen[t.Name] {
			errs = append(errs, field.Duplicate(np, t.Name))
		}
		seen[t.Name] = true
		for _, msg := range validation.IsDNS1123Subdomain(t.Name) {
			errs = append(errs, field.Invalid(np, t.Name, msg))
		}
	}
	return errs
}

// validateStatefulSetUpdate forbids changes to any spec field but replicas, ordinals, template, updateStrategy,
// revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and minReadySeconds.
func validateStatefulSetUpdate(sts, old *appsv1.StatefulSet) field.ErrorList {
	s := *sts.Spec.DeepCopy()
	s.Replicas = old.Spec.Replicas
	s.Ordinals = old.Spec.Ordinals
	s.Template = old.Spec.Template
	s.UpdateStrategy = old.Spec.UpdateStrategy
	s.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	s.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	s.MinReadySeconds = old.Spec.MinReadySeconds
	if apiequality.Semantic.DeepEqual(s, old.Spec) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other "+
		"than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "+
		"'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")}
}

var statefulSetColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Ready", "Number of the pod with ready state"),
	ageColumn,
	containersColumn,
	imagesColumn,
}

// statefulSetCells: NAME READY (ready/desired) AGE, wide CONTAINERS IMAGES.
func statefulSetCells(obj runtime.Object, now time.Time) []any {
	sts := obj.(*appsv1.StatefulSet)
	var desired int32
	if sts.Spec.Replicas != nil {
		desired = *sts.Spec.Replicas
	}
	names, images := workloadContainerCells(sts.Spec.Template.Spec.Containers)
	return []any{sts.Name, fmt.Sprintf("%d/%d", sts.Status.ReadyReplicas, desired), age(sts.CreationTimestamp, now),
		names, images}
}
