package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// DefaultTolerationSeconds is upstream's admission plugin of that name: a pod created or updated without a
// toleration of the node.kubernetes.io/not-ready or node.kubernetes.io/unreachable NoExecute taint gets one for
// Seconds (on update too, so an update that replaces the tolerations keeps the ones it was given, which pod
// validation requires), so the node lifecycle controller evicts it that long after its node is lost rather than
// at once. A toleration
// with an empty key (every taint) or an empty effect (every effect) counts, as upstream. Seconds is the
// server's --default-toleration-seconds (300 by default, upstream's as well); negative turns the step off.
type DefaultTolerationSeconds struct{ Seconds int64 }

// Admit adds the missing tolerations to a pod being created or updated.
func (d DefaultTolerationSeconds) Admit(_ context.Context, req kubeapi.AdmissionRequest) error {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok || (req.Operation != "CREATE" && req.Operation != "UPDATE") || req.Subresource != "" || d.Seconds < 0 {
		return nil
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if !toleratesNoExecute(pod.Spec.Tolerations, key) {
			seconds := d.Seconds
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key,
				Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds})
		}
	}
	return nil
}

// toleratesNoExecute reports whether one of the tolerations names the key's NoExecute taint, by key or by
// wildcard, whatever its operator, value and seconds (upstream's test, which a user's own choice satisfies).
func toleratesNoExecute(tols []corev1.Toleration, key string) bool {
	for _, t := range tols {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}
