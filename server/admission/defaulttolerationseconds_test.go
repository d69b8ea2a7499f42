package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	secs := func(v int64) *int64 { return &v }
	notReady := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	unreachable := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	own := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(6000)}
	for _, tc := range []struct {
		name       string
		seconds    int64
		op, sub    string
		tols, want []corev1.Toleration
	}{
		{name: "none: both added", seconds: 300, want: []corev1.Toleration{notReady, unreachable}},
		{name: "others kept, both appended", seconds: 300, tols: []corev1.Toleration{gpu}, want: []corev1.Toleration{gpu, notReady, unreachable}},
		{name: "a user's own seconds kept", seconds: 300, tols: []corev1.Toleration{own}, want: []corev1.Toleration{own, notReady}},
		{name: "a NoSchedule toleration of the key does not count", seconds: 300,
			tols: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, notReady, unreachable}},
		{name: "an empty effect counts", seconds: 300, tols: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}, unreachable}},
		{name: "tolerate everything", seconds: 300, tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "configured seconds", seconds: 5, want: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(5)},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(5)}}},
		{name: "turned off", seconds: -1},
		{name: "updates too", seconds: 300, op: "UPDATE", tols: []corev1.Toleration{gpu}, want: []corev1.Toleration{gpu, notReady, unreachable}},
		{name: "deletes untouched", seconds: 300, op: "DELETE"},
		{name: "subresources untouched", seconds: 300, sub: "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{Tolerations: tc.tols}}
			op := tc.op
			if op == "" {
				op = "CREATE"
			}
			req := kubeapi.AdmissionRequest{Operation: op, Subresource: tc.sub, Cluster: "c1", Object: pod}
			if err := (DefaultTolerationSeconds{Seconds: tc.seconds}).Admit(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, pod.Spec.Tolerations); diff != "" {
				t.Fatalf("tolerations (-want +got):\n%s", diff)
			}
		})
	}
	// Other kinds pass through.
	if err := (DefaultTolerationSeconds{Seconds: 300}).Admit(context.Background(), kubeapi.AdmissionRequest{Operation: "CREATE",
		Object: &corev1.ConfigMap{}}); err != nil {
		t.Fatal(err)
	}
}
