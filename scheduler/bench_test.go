package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchNode is a 4-core, 16 GiB node in one of 10 zones.
func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%05d", i)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name,
		"topology.kubernetes.io/zone": fmt.Sprint("zone-", i%10)}}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
}

// benchPod is a pending pod requesting 100m and 128 MiB.
func benchPod(i int) *corev1.Pod {
	name := fmt.Sprintf("pod-%06d", i)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}}
}

// BenchmarkScheduleAlgorithm5000Nodes: one scheduling cycle (filter, score, assume) on 5,000 nodes already
// holding pods, with the default profile. b.N pods are placed; ns/op is the time per pod.
func BenchmarkScheduleAlgorithm5000Nodes(b *testing.B) {
	sim, err := NewSimulator(nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 5000 {
		sim.AddNode(benchNode(i))
	}
	ctx := context.Background()
	for i := range 5000 { // one pod per node to start with
		p := benchPod(1_000_000 + i)
		p.Spec.NodeName = fmt.Sprintf("node-%05d", i)
		if err := sim.AddPod(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		node, msg, err := sim.Schedule(ctx, benchPod(i))
		if err != nil || node == "" {
			b.Fatalf("pod %d not placed: %v %s", i, err, msg)
		}
	}
}
