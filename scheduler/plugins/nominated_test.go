package plugins

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// TestFilterWithNominatedPods: a node must take the pod both as it is and with the pods of at least the pod's
// priority nominated to it; lower-priority nominees and the pod's own nomination do not count.
func TestFilterWithNominatedPods(t *testing.T) {
	web := func(name string) *corev1.Pod { return fxPod(name).label("app", "web").cpu(1000).obj() }
	tests := []struct {
		name     string
		pod      *fxPodB
		existing []*corev1.Pod
		nominees []*corev1.Pod
		want     string // "" feasible, else the status's code and reasons
	}{
		{name: "an equal-priority nominee takes the room",
			pod: fxPod("p").prio(10).cpu(2000), nominees: []*corev1.Pod{fxPod("n").prio(10).cpu(3000).obj()},
			want: "Unschedulable: Insufficient cpu"},
		{name: "a lower-priority nominee does not count",
			pod: fxPod("p").prio(10).cpu(2000), nominees: []*corev1.Pod{fxPod("n").prio(5).cpu(3000).obj()}},
		{name: "the pod's own nomination does not count",
			pod: fxPod("p").prio(10).cpu(3000), nominees: []*corev1.Pod{fxPod("p").prio(10).cpu(3000).obj()}},
		{name: "a full node rejects whatever is nominated",
			pod: fxPod("p").prio(10).cpu(2000), existing: []*corev1.Pod{fxPod("e").cpu(3000).obj()},
			nominees: []*corev1.Pod{fxPod("n").prio(5).cpu(100).obj()}, want: "Unschedulable: Insufficient cpu"},
		{name: "affinity met only by a nominee is not met",
			pod:      fxPod("p").prio(10).cpu(100).podAffinity(corev1.LabelHostname, "app", "web"),
			nominees: []*corev1.Pod{fxPod("w").label("app", "web").prio(10).cpu(100).obj()},
			want:     "UnschedulableAndUnresolvable: node(s) didn't match pod affinity rules"},
		{name: "affinity met by a running pod, room left beside the nominee",
			pod:      fxPod("p").prio(10).cpu(1000).podAffinity(corev1.LabelHostname, "app", "web"),
			existing: []*corev1.Pod{web("w")}, nominees: []*corev1.Pod{fxPod("n").prio(10).cpu(1000).obj()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := fxFramework(t, &fxSource{}, fxPlugin{name: NodeResourcesFitName}, fxPlugin{name: InterPodAffinityName})
			node := fxNodeInfo(t, fxNode("n1", 4000), tc.existing...)
			snap := fxSnapshot(node)
			var nominees []framework.Nominee
			for _, p := range tc.nominees {
				nominees = append(nominees, framework.NewNominee(fxInfo(t, p)))
			}
			snap.Nominated = func(string) []framework.Nominee { return nominees }
			_, statuses, feasible, st := fxFilter(t, fw, tc.pod.info(t), snap)
			if st != nil {
				t.Fatalf("PreFilter: %s", fxReasons(st))
			}
			got := fxReasons(statuses["n1"])
			if got != tc.want || (tc.want == "") != (len(feasible) == 1) {
				t.Fatalf("node n1: %q (feasible %d), want %q", got, len(feasible), tc.want)
			}
		})
	}
}
