package plugins

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

func BenchmarkPodTopologySpreadPreFilter(b *testing.B) {
	snap := fxBigCluster(b)
	fw := fxFramework(b, &fxSource{}, fxPlugin{name: PodTopologySpreadName})
	pod := fxPod("incoming").label("app", "app-7").
		spread(fxSpread(fxZone, 1, corev1.DoNotSchedule, "app-7")).
		spread(fxSpread(corev1.LabelHostname, 1, corev1.DoNotSchedule, "app-7")).info(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, st := fw.RunPreFilterPlugins(ctx, framework.NewCycleState(), pod, snap); !st.IsSuccess() {
			b.Fatal(st.Message())
		}
	}
}
