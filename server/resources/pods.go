package resources

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Pod"),
		Plural:     "pods",
		ShortNames: []string{"po"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.Pod{} },
		NewList:    func() runtime.Object { return &corev1.PodList{} },
		Status:     true,
		Resize:     podResize,
		Generation: true,
		Default:    func(obj runtime.Object) { defaultPod(obj.(*corev1.Pod)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validatePodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
		ValidateCreate:     func(obj runtime.Object) field.ErrorList { return validatePodCreate(obj.(*corev1.Pod)) },
		UpdateSubresources: map[string]*UpdateSubresource{"ephemeralcontainers": ephemeralContainersSubresource},
		Table:              &Table{Columns: podColumns, Cells: podCells},
		Fields:             podFields,
		FieldIndex: map[string]func(runtime.Object) string{
			"spec.nodeName": func(obj runtime.Object) string { return obj.(*corev1.Pod).Spec.NodeName },
		},
	})
}

// defaultPod applies the pod spec defaults plus those only Pods get: host ports of a host-network pod default to
// the container ports, requests default to limits, service links are enabled, the service account is "default" (as the ServiceAccount admission plugin does; serviceAccount
// mirrors serviceAccountName), and an unset status becomes phase Pending with the computed QoS class.
// Tolerations for not-ready and unreachable nodes are left to admission.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	defaultPodSpec(spec)
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.InitContainers)
		defaultHostNetworkPorts(spec.Containers)
	}
	for i := range spec.InitContainers {
		defaultRequestsFromLimits(&spec.InitContainers[i].Resources)
	}
	for i := range spec.Containers {
		defaultRequestsFromLimits(&spec.Containers[i].Resources)
	}
	if spec.Resources != nil {
		defaultRequestsFromLimits(spec.Resources)
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptrTo(corev1.DefaultEnableServiceLinks)
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = "default"
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = podQOSClass(spec)
	}
}

// defaultHostNetworkPorts sets each unset hostPort to its containerPort, as a host-network pod uses the host's ports.
func defaultHostNetworkPorts(cs []corev1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// defaultRequestsFromLimits sets each missing request to its limit.
func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	for name, lim := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = lim.DeepCopy()
	}
}

// podQOSClass computes a pod's QoS class from its cpu and memory: BestEffort without any request or limit,
// Guaranteed when every container limits both and requests equal limits, else Burstable. Pod-level resources,
// when they set cpu or memory, replace the containers'.
func podQOSClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	var all []corev1.ResourceRequirements
	if r := spec.Resources; r != nil && hasComputeResources(r.Requests, r.Limits) {
		all = append(all, *r)
	} else {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			all = append(all, c.Resources)
		}
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	for _, r := range all {
		addComputeResources(requests, r.Requests)
		if n := addComputeResources(limits, r.Limits); n < 2 {
			guaranteed = false
		}
	}
	switch {
	case len(requests) == 0 && len(limits) == 0:
		return corev1.PodQOSBestEffort
	case guaranteed && apiequality.Semantic.DeepEqual(requests, limits):
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// hasComputeResources reports whether any list sets a non-zero cpu or memory.
func hasComputeResources(lists ...corev1.ResourceList) bool {
	for _, l := range lists {
		if addComputeResources(corev1.ResourceList{}, l) > 0 {
			return true
		}
	}
	return false
}

// addComputeResources adds the non-zero cpu and memory of from into sum and returns how many it found.
func addComputeResources(sum, from corev1.ResourceList) int {
	n := 0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := from[name]
		if !ok || q.IsZero() {
			continue
		}
		n++
		total := sum[name]
		if total.Format == "" {
			total = resource.Quantity{Format: q.Format}
		}
		total.Add(q)
		sum[name] = total
	}
	return n
}

// podFields are the pod field selectors Kubernetes supports beyond metadata.
func podFields(obj runtime.Object) fields.Set {
	pod := obj.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP(&pod.Status),
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// podIP is the pod's primary IP ("" before one is assigned).
func podIP(s *corev1.PodStatus) string {
	if len(s.PodIPs) > 0 {
		return s.PodIPs[0].IP
	}
	return s.PodIP
}

// Containers: the rules every container list of a pod spec follows, used by validatePodSpec.
