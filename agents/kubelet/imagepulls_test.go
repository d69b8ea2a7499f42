package kubelet

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestImagePullLimits: three pods of three images absent from the node, whose pulls take a while, start at
// once; the pulls in progress at a time are one by default (kubelet's serializeImagePulls) and at most
// maxParallelImagePulls with parallel pulls; a bound above one without parallel pulls is refused.
func TestImagePullLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits ImagePullLimits
		want   int
	}{
		{"serialized by default", ImagePullLimits{}, 1},
		{"parallel, at most 2", ImagePullLimits{Parallel: true, MaxParallel: 2}, 2},
		{"parallel, no bound", ImagePullLimits{Parallel: true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := newCRIEnv(t, func(ce *criEnv, c *PodsConfig) { c.ImagePulls = tc.limits })
			ce.srv.Delay("PullImage", 500*time.Millisecond)
			for i := range 3 {
				ce.create(imagePod(fmt.Sprintf("p%d", i), fmt.Sprintf("reg.example.test/app%d:1", i), corev1.PullIfNotPresent))
			}
			for i := range 3 {
				ce.until("running", isRunning, fmt.Sprintf("p%d", i))
			}
			if got := ce.srv.MaxPullsInFlight(); got != tc.want {
				t.Errorf("at most %d pulls at once, want %d", got, tc.want)
			}
		})
	}
	for _, bad := range []ImagePullLimits{{MaxParallel: 2}, {Parallel: true, MaxParallel: -1}} {
		if _, err := bad.slots(); err == nil {
			t.Errorf("limits %+v accepted", bad)
		}
	}
}

// TestNodeCredentials: the node's credentials for an image's registry (a registries.yaml's) are tried after the
// pod's pull secrets, and alone for a pod without any; a registry without node credentials is pulled
// anonymously.
func TestNodeCredentials(t *testing.T) {
	ce := newCRIEnv(t, func(ce *criEnv, c *PodsConfig) {
		c.NodeCredentials = func(host string) []*runtimeapi.AuthConfig {
			if host != "reg.example.test" {
				return nil
			}
			return []*runtimeapi.AuthConfig{{Username: "node", Password: "n0de", ServerAddress: "https://reg.example.test"}}
		}
	})
	ce.create(imagePod("node", "reg.example.test/app:1", corev1.PullIfNotPresent))
	ce.until("running", isRunning, "node")
	if got := ce.pulls("reg.example.test/app:1"); len(got) != 1 || got[0].Auth.GetUsername() != "node" || got[0].Auth.GetServerAddress() != "https://reg.example.test" {
		t.Errorf("pulls %+v, want one with the node's credentials", got)
	}
	ce.create(imagePod("anon", "other.example.test/app:1", corev1.PullIfNotPresent))
	ce.until("running", isRunning, "anon")
	if got := ce.pulls("other.example.test/app:1"); len(got) != 1 || got[0].Auth != nil {
		t.Errorf("pulls %+v, want one anonymous", got)
	}
}
