package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ephemeralContainersSubresource is pods/ephemeralcontainers, upstream's EphemeralContainersStrategy: the only
// way to add ephemeral containers to a pod (a create may not set them, an update of the pod may not change them).
// An update or patch through it changes spec.ephemeralContainers and nothing else; existing ephemeral containers
// stay as they are.
var ephemeralContainersSubresource = &UpdateSubresource{
	Owns: []string{"spec", "ephemeralContainers"},
	Prepare: func(obj, old runtime.Object) {
		prepareEphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
	},
	Validate: func(obj, old runtime.Object) field.ErrorList {
		return validateEphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
	},
}

// prepareEphemeralContainersUpdate keeps of pod only its ephemeral containers: the spec, the status and the
// metadata a status update may not change (labels, annotations, finalizers, owners) are old's.
func prepareEphemeralContainersUpdate(pod, old *corev1.Pod) {
	ecs := pod.Spec.EphemeralContainers
	pod.Spec = *old.Spec.DeepCopy()
	pod.Spec.EphemeralContainers = ecs
	pod.Status = *old.Status.DeepCopy()
	metav1.ResetObjectMetaForStatus(&pod.ObjectMeta, &old.ObjectMeta)
}

// validateEphemeralContainersUpdate is upstream's ValidatePodEphemeralContainersUpdate beyond the pod's own
// validation: a static pod's mirror takes none, and existing ephemeral containers may be neither removed nor
// changed (matched by name: a patch may reorder them).
func validateEphemeralContainersUpdate(pod, old *corev1.Pod) field.ErrorList {
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	p := field.NewPath("spec", "ephemeralContainers")
	byName := make(map[string]*corev1.EphemeralContainer, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		byName[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	var errs field.ErrorList
	for _, o := range old.Spec.EphemeralContainers {
		switch ec, ok := byName[o.Name]; {
		case !ok:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be removed", o.Name)))
		case !apiequality.Semantic.DeepEqual(*ec, o):
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be changed", o.Name)))
		}
	}
	return errs
}

// validatePodCreate refuses what a new pod may not have: ephemeral containers, which only
// pods/ephemeralcontainers adds to a running pod.
func validatePodCreate(pod *corev1.Pod) field.ErrorList {
	if len(pod.Spec.EphemeralContainers) > 0 {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create")}
	}
	return nil
}
