package resources

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podResize is the strategy of pods/resize (KEP 1287, in-place pod resize), as upstream's podResizeStrategy:
// a resize changes only the containers' and init containers' cpu and memory requests and limits and their
// resize policies; everything else in the body is set back to the stored pod.
var podResize = &Resize{
	Prepare: func(obj, old runtime.Object) { preparePodResize(obj.(*corev1.Pod), old.(*corev1.Pod)) },
	Validate: func(obj, old runtime.Object) field.ErrorList {
		return validatePodResize(obj.(*corev1.Pod), old.(*corev1.Pod))
	},
}

// mirrorPodAnnotation marks a static pod's mirror in the API (kubelet's kubernetes.io/config.mirror).
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// preparePodResize is upstream's dropNonResizeUpdates: pod takes old's spec, status and the metadata a status
// write may not change, keeping only its containers' resources and resize policies. Containers added,
// removed, renamed or reordered keep pod's spec as sent, for validatePodResize to refuse.
func preparePodResize(pod, old *corev1.Pod) {
	keepSpec := len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers)
	var containers, initContainers []corev1.Container
	if !keepSpec {
		var ok1, ok2 bool
		containers, ok1 = resizedContainers(pod.Spec.Containers, old.Spec.Containers)
		initContainers, ok2 = resizedContainers(pod.Spec.InitContainers, old.Spec.InitContainers)
		keepSpec = !ok1 || !ok2
	}
	if !keepSpec {
		spec := *old.Spec.DeepCopy()
		spec.Containers, spec.InitContainers = containers, initContainers
		pod.Spec = spec
	}
	pod.Status = *old.Status.DeepCopy()
	pod.DeletionTimestamp = old.DeletionTimestamp
	pod.Labels, pod.Annotations = old.Labels, old.Annotations
	pod.Finalizers, pod.OwnerReferences = old.Finalizers, old.OwnerReferences
}

// resizedContainers is old with the resources and resize policies of cs, or false when cs does not name the
// same containers in the same order.
func resizedContainers(cs, old []corev1.Container) ([]corev1.Container, bool) {
	if len(cs) == 0 {
		return cs, true
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		if cs[i].Name != old[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources, out[i].ResizePolicy = cs[i].Resources, cs[i].ResizePolicy
	}
	return out, true
}

// validatePodResize is upstream's ValidatePodResize (v1.37, with InPlacePodVerticalScalingInitContainers on and
// pod-level resources not resizable): the QoS class may not change; containers may not be added, removed,
// renamed or reordered; requests and limits may not be removed; only cpu and memory may change; a non-sidecar
// init container with a RestartContainer policy may not be resized.
func validatePodResize(pod, old *corev1.Pod) field.ErrorList {
	if _, ok := old.Annotations[mirrorPodAnnotation]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	sp := field.NewPath("spec")
	var errs field.ErrorList
	if podQOS(old) != podQOSClass(&pod.Spec) {
		errs = append(errs, field.Invalid(sp, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(old) {
		errs = append(errs, field.Forbidden(sp, "Pod running on node without support for resize"))
	}
	if hasPodLevelResources(old) || hasPodLevelResources(pod) {
		// The nodes do not apply pod-level resources to a pod's cgroup, so there is nothing a resize of them could
		// change: upstream's answer with InPlacePodLevelResourcesVerticalScaling off.
		return append(errs, field.Forbidden(field.NewPath(""), "resize of pods with pod-level resources is forbidden when "+
			"InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"))
	}
	if order := validateResizeOrder(pod, old, sp); len(order) > 0 {
		return append(errs, order...)
	}
	for i := range old.Spec.InitContainers {
		errs = append(errs, validateContainerResize(&pod.Spec.InitContainers[i].Resources, &old.Spec.InitContainers[i].Resources,
			sp.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i := range old.Spec.Containers {
		errs = append(errs, validateContainerResize(&pod.Spec.Containers[i].Resources, &old.Spec.Containers[i].Resources,
			sp.Child("containers").Index(i).Child("resources"))...)
	}
	masked := pod.Spec.DeepCopy()
	for i := range masked.Containers {
		maskCPUMemory(&masked.Containers[i], &old.Spec.Containers[i])
		if !apiequality.Semantic.DeepEqual(masked.Containers[i], old.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(sp, "only cpu and memory resources are mutable"))
		}
	}
	for i := range masked.InitContainers {
		c, o := &masked.InitContainers[i], &old.Spec.InitContainers[i]
		modified := !apiequality.Semantic.DeepEqual(*c, *o)
		maskCPUMemory(c, o)
		p := sp.Child("initContainers").Index(i)
		if !apiequality.Semantic.DeepEqual(*c, *o) {
			errs = append(errs, field.Forbidden(p, "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		if modified && !isRestartableInit(c) {
			for _, rp := range c.ResizePolicy {
				if rp.RestartPolicy == corev1.RestartContainer {
					errs = append(errs, field.Forbidden(p, "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if !apiequality.Semantic.DeepEqual(*masked, old.Spec) {
		errs = append(errs, field.Forbidden(sp, "only cpu and memory resources are mutable"))
	}
	return errs
}

// podQOS is the pod's QoS class as its status records it, else computed.
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return podQOSClass(&pod.Spec)
}

// resizeSupported is upstream's isPodResizeRequestSupported: a pod whose first running container reports no
// resources in its status runs on a node that does not resize; a pod without running containers may be resized.
func resizeSupported(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.Resources != nil
		}
	}
	return true
}

func hasPodLevelResources(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && len(r.Requests)+len(r.Limits) > 0
}

func isRestartableInit(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// validateResizeOrder refuses containers added, removed, renamed or reordered.
func validateResizeOrder(pod, old *corev1.Pod, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(cs, olds []corev1.Container, name, what string) {
		if len(cs) != len(olds) {
			errs = append(errs, field.Forbidden(sp.Child(name), what+" may not be added or removed on resize"))
			return
		}
		for i := range olds {
			if cs[i].Name != olds[i].Name {
				errs = append(errs, field.Forbidden(sp.Child(name).Index(i).Child("name"), what+" may not be renamed or reordered on resize"))
			}
		}
	}
	check(pod.Spec.Containers, old.Spec.Containers, "containers", "containers")
	check(pod.Spec.InitContainers, old.Spec.InitContainers, "initContainers", "initContainers")
	return errs
}

// validateContainerResize refuses removing requests or limits (upstream's validateContainerResize).
func validateContainerResize(r, old *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if resourcesRemoved(r.Requests, old.Requests) {
		errs = append(errs, field.Forbidden(p.Child("requests"), "resource requests cannot be removed"))
	}
	if resourcesRemoved(r.Limits, old.Limits) {
		errs = append(errs, field.Forbidden(p.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func resourcesRemoved(list, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := list[name]; !ok {
			return true
		}
	}
	return false
}

// maskCPUMemory sets c's cpu and memory requests and limits to old's, so that what is left to compare is what a
// resize may not change (a changed resize policy among it, as upstream's dropCPUMemoryResourcesFromContainer).
func maskCPUMemory(c, old *corev1.Container) {
	c.Resources.Requests = maskList(c.Resources.Requests, old.Resources.Requests)
	c.Resources.Limits = maskList(c.Resources.Limits, old.Resources.Limits)
}

// maskList is list with old's cpu and memory (or none, where old has none). Nil and empty lists compare equal
// (apiequality.Semantic).
func maskList(list, old corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range list {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out[name] = q
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}
