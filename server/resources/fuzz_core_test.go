package resources

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzValidatePod decodes arbitrary JSON into a Pod and runs Default, Validate, the table and the field set:
// none may panic, and defaulting must be idempotent enough that a defaulted pod validates the same way twice.
func FuzzValidatePod(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"containers":[{"name":"web","image":"nginx"}]}}`,
		`{"spec":{"containers":[{"name":"web","image":"nginx","ports":[{"containerPort":80,"hostPort":80}],` +
			`"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"port":"http"}},` +
			`"env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['x']"}}}]}],` +
			`"volumes":[{"name":"v"},{"name":"p","projected":{"sources":[{"serviceAccountToken":{"path":"t"}}]}}],` +
			`"hostNetwork":true,"tolerations":[{"operator":"Exists"}],"dnsPolicy":"None"}}`,
		`{"spec":{"initContainers":[{"name":"i","restartPolicy":"Always"}],"ephemeralContainers":[{"name":"d"}],` +
			`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{}]}}}},` +
			`"status":{"initContainerStatuses":[{"name":"i","state":{"terminated":{"exitCode":1}}}]}}`,
		`{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{"resources":{"limits":{"cpu":"-1"}}}}`,
	} {
		f.Add([]byte(seed))
	}
	r := coreResourceF(f, "pods")
	f.Fuzz(func(t *testing.T, data []byte) {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(data, pod); err != nil {
			return
		}
		r.Default(pod)
		first := len(r.Validate(pod))
		r.Default(pod)
		if second := len(r.Validate(pod)); second != first {
			t.Errorf("validation of a re-defaulted pod changed: %d then %d errors", first, second)
		}
		r.ValidateUpdate(pod, pod.DeepCopy())
		r.Table.Cells(pod, tableNow)
		r.Fields(pod)
	})
}

// coreResourceF is coreResource for fuzz targets.
func coreResourceF(f *testing.F, plural string) *Resource {
	f.Helper()
	for _, r := range Default().All() {
		if r.GVK.Group == "" && r.Plural == plural {
			return r
		}
	}
	f.Fatalf("core/v1 %s not registered", plural)
	return nil
}
