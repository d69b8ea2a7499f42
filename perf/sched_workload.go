package perf

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The scheduler harness's cluster: nodes and pods shaped as upstream scheduler_perf's templates
// (node-default.yaml: 4 CPU, 32 GiB, 110 pods; pod-default.yaml: 100m CPU, 500 MiB), plus a zone label, built
// the same way for the algorithm alone and end to end.
const (
	schedNodeCPUs    = 4
	schedNodeMemory  = "32Gi"
	schedPodsPerNode = 110
	schedPodCPU      = "100m"
	schedPodMemory   = "500Mi"
	// schedPlainPerNode is how many of the plain, spread and anti-affinity cases' pods fit one node: CPU is the
	// tightest of its limits (4 CPU ÷ 100m = 40; 32 GiB ÷ 500 MiB = 65; 110 pods).
	schedPlainPerNode = 40
	schedZones        = 10
	// schedGroup is how many pods share an anti-affinity group (at most one of them per node).
	schedGroup = 10
	// schedNamespace holds every pod of the harness.
	schedNamespace = "default"
	zoneKey        = "topology.kubernetes.io/zone"
	hostnameKey    = "kubernetes.io/hostname"
	// Priorities of the preemption case (upstream's pod-high-priority has 10; the victims have none).
	victimPriority    = int32(0)
	preemptorPriority = int32(10)
)

func schedNodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// schedNode is a 4-core, 32 GiB node for 110 pods in one of 10 zones, Ready.
func schedNode(i int) *corev1.Node {
	name := schedNodeName(i)
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(schedNodeCPUs, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(schedNodeMemory),
		corev1.ResourcePods:   *resource.NewQuantity(schedPodsPerNode, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostnameKey: name,
			zoneKey: fmt.Sprintf("zone-%d", i%schedZones), "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
	}
}

// basePod is a pending pod with one container requesting cpu and memory.
func basePod(name, cpu, mem string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: schedNamespace, UID: types.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

// schedPod is the i-th measured pod of case c.
func schedPod(c string, i int) *corev1.Pod {
	name := fmt.Sprintf("%s-%06d", c, i)
	switch c {
	case SchedSpread:
		p := basePod(name, schedPodCPU, schedPodMemory, map[string]string{"app": "spread"})
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}
		return p
	case SchedAntiAffinity:
		group := map[string]string{"app": "anti", "group": fmt.Sprint(i / schedGroup)}
		p := basePod(name, schedPodCPU, schedPodMemory, group)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: hostnameKey,
				LabelSelector: &metav1.LabelSelector{MatchLabels: group}}}}}
		return p
	case SchedPreemption:
		p := basePod(name, "1", "500Mi", map[string]string{"app": "preemptor"})
		p.Spec.Priority = new(preemptorPriority)
		return p
	}
	return basePod(name, schedPodCPU, schedPodMemory, map[string]string{"app": "plain"})
}

// victimPod is the j-th low-priority pod bound to node i in the preemption case: one CPU, no grace period
// (upstream's pod-low-priority), so that preemption's delete removes it at once.
func victimPod(i, j int) *corev1.Pod {
	p := basePod(fmt.Sprintf("victim-%05d-%d", i, j), "1", "500Mi", map[string]string{"app": "victim"})
	p.Spec.NodeName = schedNodeName(i)
	p.Spec.Priority = new(victimPriority)
	p.Spec.TerminationGracePeriodSeconds = new(int64(0))
	return p
}

// measuredPods is how many pods case c places.
func (cfg *SchedConfig) measuredPods(c string) int {
	if c == SchedPreemption {
		return cfg.Preemptors
	}
	return cfg.Pods
}
