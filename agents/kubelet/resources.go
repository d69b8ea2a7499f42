package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CFS bandwidth as kubelet sets it: a 100 ms period, and a quota of at least 1 ms (the kernel refuses less).
const (
	cpuPeriod   = 100_000 // µs
	minCPUQuota = 1_000   // µs
)

// linuxResources is what a container's resources ask of the runtime, as kubelet computes it: cpu shares from
// the request (the limit without one; 2, the minimum, without either), a CFS quota from the limit (none without
// one), and the memory limit.
func linuxResources(r corev1.ResourceRequirements) *runtimeapi.LinuxContainerResources {
	res := &runtimeapi.LinuxContainerResources{CpuPeriod: cpuPeriod, CpuShares: cpuShares(r)}
	if cpu, ok := r.Limits[corev1.ResourceCPU]; ok {
		res.CpuQuota = milliCPUToQuota(cpu.MilliValue())
	}
	if mem, ok := r.Limits[corev1.ResourceMemory]; ok {
		res.MemoryLimitInBytes = mem.Value()
	}
	return res
}

// cpuShares converts the CPU request to cgroup v1 shares as kubelet does (1024 per CPU, between 2 and 262144).
func cpuShares(r corev1.ResourceRequirements) int64 {
	req, ok := r.Requests[corev1.ResourceCPU]
	if !ok {
		if req, ok = r.Limits[corev1.ResourceCPU]; !ok {
			return 2
		}
	}
	return min(max(req.MilliValue()*1024/1000, 2), 262144)
}

// milliCPUToQuota is kubelet's MilliCPUToQuota: the CFS quota (µs per period) of a CPU limit, 0 for none.
func milliCPUToQuota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*cpuPeriod/1000, minCPUQuota)
}

// podResources maps each init and regular container of pod to (a copy of) its resources.
func podResources(pod *corev1.Pod) map[string]corev1.ResourceRequirements {
	out := make(map[string]corev1.ResourceRequirements, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for _, c := range allContainers(pod) {
		out[c.Name] = *c.Resources.DeepCopy()
	}
	return out
}

// sameResources reports whether every container of a has the same resources in b (quantities compared by value).
func sameResources(a, b map[string]corev1.ResourceRequirements) bool {
	if len(a) != len(b) {
		return false
	}
	for name, r := range a {
		o, ok := b[name]
		if !ok || !apiequality.Semantic.DeepEqual(r, o) {
			return false
		}
	}
	return true
}

// withResources is pod with its containers' resources from m (a copy; pod itself is the informer's), or pod
// when they already are.
func withResources(pod *corev1.Pod, m map[string]corev1.ResourceRequirements) *corev1.Pod {
	if sameResources(podResources(pod), m) {
		return pod
	}
	cp := pod.DeepCopy()
	for _, c := range allContainers(cp) {
		if r, ok := m[c.Name]; ok {
			c.Resources = *r.DeepCopy()
		}
	}
	return cp
}

// changedResources reports whether the cpu and the memory requests or limits of b differ from a's.
func changedResources(a, b corev1.ResourceRequirements) (cpu, mem bool) {
	differs := func(name corev1.ResourceName) bool {
		return !a.Requests[name].Equal(b.Requests[name]) || !a.Limits[name].Equal(b.Limits[name])
	}
	return differs(corev1.ResourceCPU), differs(corev1.ResourceMemory)
}

// changedLinux reports whether the runtime's cpu or memory settings of a container differ from those want asks.
func changedLinux(have, want *runtimeapi.LinuxContainerResources) (cpu, mem bool) {
	cpu = have.GetCpuShares() != want.GetCpuShares() || have.GetCpuQuota() != want.GetCpuQuota() ||
		(have.GetCpuPeriod() != 0 && have.GetCpuPeriod() != want.GetCpuPeriod())
	return cpu, have.GetMemoryLimitInBytes() != want.GetMemoryLimitInBytes()
}

// withActuated is allocated with its cpu and memory requests and limits replaced by actuated's: the resources a
// container runs with while a resize has not reached it (its other resources are what was allocated).
func withActuated(allocated, actuated corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *allocated.DeepCopy()
	merge := func(list, from corev1.ResourceList) corev1.ResourceList {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q, ok := from[name]
			switch {
			case ok && list == nil:
				list = corev1.ResourceList{name: q.DeepCopy()}
			case ok:
				list[name] = q.DeepCopy()
			default:
				delete(list, name)
			}
		}
		if len(list) == 0 {
			return nil
		}
		return list
	}
	out.Requests = merge(out.Requests, actuated.Requests)
	out.Limits = merge(out.Limits, actuated.Limits)
	return out
}
