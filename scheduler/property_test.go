package scheduler

import (
	"context"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// TestNeverBindsToAnUnfitNode: whatever the nodes (sizes, taints, labels, cordons) and pods (requests, host
// ports, selectors, tolerations), a pod is only placed on a node that passes every filter before it is placed,
// and no node's pods ever request more than it has.
func TestNeverBindsToAnUnfitNode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sim, err := NewSimulator(nil)
		if err != nil {
			t.Fatal(err)
		}
		fw := sim.s.profiles[DefaultSchedulerName]
		nodes := map[string]*corev1.Node{}
		for i := range rapid.IntRange(1, 8).Draw(t, "nodes") {
			name := fmt.Sprint("n", i)
			alloc := corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(rapid.IntRange(0, 4000).Draw(t, "cpu")), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(rapid.IntRange(0, 8).Draw(t, "memGi"))<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(int64(rapid.IntRange(0, 6).Draw(t, "maxPods")), resource.DecimalSI),
			}
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name, "disk": rapid.SampledFrom([]string{"ssd", "hdd"}).Draw(t, "disk")}},
				Spec:   corev1.NodeSpec{Unschedulable: rapid.Bool().Draw(t, "cordoned")},
				Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
			if rapid.Bool().Draw(t, "tainted") {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: rapid.SampledFrom(
					[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}).Draw(t, "effect")}}
			}
			nodes[name] = n
			sim.AddNode(n)
		}
		ctx := context.Background()
		for i := range rapid.IntRange(1, 30).Draw(t, "pods") {
			name := fmt.Sprint("p", i)
			c := corev1.Container{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(rapid.IntRange(0, 2000).Draw(t, "podCPU")), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(rapid.IntRange(0, 4096).Draw(t, "podMiB"))<<20, resource.BinarySI)}}}
			if rapid.Bool().Draw(t, "hostPort") {
				c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: int32(rapid.IntRange(8080, 8082).Draw(t, "port"))}}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
			if rapid.Bool().Draw(t, "selector") {
				pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			}
			if rapid.Bool().Draw(t, "tolerates") {
				pod.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			}
			pi, err := framework.NewPodInfo(pod)
			if err != nil {
				t.Fatal(err)
			}
			// What each node says before placement.
			state := framework.NewCycleState()
			snap := sim.c.snapshot()
			_, pre := fw.RunPreFilterPlugins(ctx, state, pi, snap)
			fits := map[string]bool{}
			for _, n := range snap.Nodes {
				fits[n.Name()] = pre.IsSuccess() && fw.RunFilterPlugins(ctx, state, pi, n).IsSuccess()
			}
			node, _, err := sim.Schedule(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			if node != "" && !fits[node] {
				t.Fatalf("pod %s placed on %s, which fails a filter", name, node)
			}
			anyFits := false
			for _, ok := range fits {
				anyFits = anyFits || ok
			}
			if node == "" && anyFits {
				t.Fatalf("pod %s left pending although a node fits: %v", name, fits)
			}
		}
		for name, n := range nodes {
			ni, _ := sim.c.snapshot().Get(name)
			if ni.Requested.MilliCPU > n.Status.Allocatable.Cpu().MilliValue() || ni.Requested.Memory > n.Status.Allocatable.Memory().Value() ||
				int64(len(ni.Pods)) > n.Status.Allocatable.Pods().Value() {
				t.Fatalf("node %s over-committed: %d m CPU, %d bytes, %d pods requested of %v", name,
					ni.Requested.MilliCPU, ni.Requested.Memory, len(ni.Pods), n.Status.Allocatable)
			}
		}
	})
}
