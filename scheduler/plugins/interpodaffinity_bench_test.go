package plugins

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// fxBigCluster is 5,000 nodes in 10 zones with 10,000 pods of 100 apps; every tenth pod has a required
// anti-affinity to its own app by hostname.
func fxBigCluster(b *testing.B) *framework.Snapshot {
	b.Helper()
	nodes := make([]*framework.NodeInfo, 5000)
	for i := range nodes {
		nodes[i] = framework.NewNodeInfo(fxNode(fmt.Sprint("node-", i), 0, fxZone, fmt.Sprint("zone-", i%10)))
	}
	for j := range 10000 {
		app := fmt.Sprint("app-", j%100)
		pb := fxPod(fmt.Sprint("pod-", j)).label("app", app)
		if j%10 == 0 {
			pb.podAntiAffinity(corev1.LabelHostname, "app", app)
		}
		n := nodes[j%len(nodes)]
		pb.p.Spec.NodeName = n.Name()
		n.AddPod(fxInfo(b, pb.obj()))
	}
	return fxSnapshot(nodes...)
}

func BenchmarkInterPodAffinityPreFilter(b *testing.B) {
	snap := fxBigCluster(b)
	fw := fxFramework(b, &fxSource{}, fxPlugin{name: InterPodAffinityName})
	pod := fxPod("incoming").label("app", "app-7").
		podAffinity(fxZone, "app", "app-3").
		podAntiAffinity(corev1.LabelHostname, "app", "app-7").info(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, st := fw.RunPreFilterPlugins(ctx, framework.NewCycleState(), pod, snap); !st.IsSuccess() {
			b.Fatal(st.Message())
		}
	}
}
