package kubelet

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// downRuntime is the tests' recording fake runtime that can be made unreachable, as containerd is when it has
// died or stops answering: every call the pod workers make then fails with codes.Unavailable, as a CRI client's
// calls do, while the containers go on (or stop) in the fake underneath. With containersDown only the listing
// of containers fails (a containerd too busy to answer it in time).
type downRuntime struct {
	*recording
	down, containersDown atomic.Bool
	// statusDown makes only ContainerStatus fail (the runtime dying between a sync's list and its status calls);
	// its refusals count in refused too.
	statusDown atomic.Bool
	// lists and refused count the pod workers' list calls (those with a filter: the orphan collection lists
	// everything), all and those refused while down, to know that the workers have synced.
	lists, refused atomic.Int64
}

// list counts a list call (of containers or not) and says whether it is refused.
func (d *downRuntime) list(filtered, containers bool) bool {
	down := d.down.Load() || containers && d.containersDown.Load()
	if filtered {
		d.lists.Add(1)
		if down {
			d.refused.Add(1)
		}
	}
	return down
}

func (d *downRuntime) unavailable() error {
	return status.Error(codes.Unavailable, "connection error: dial unix /run/containerd/containerd.sock: connect: connection refused")
}

func (d *downRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if d.list(f != nil, false) {
		return nil, d.unavailable()
	}
	return d.recording.ListPodSandbox(ctx, f)
}

func (d *downRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if d.list(f != nil, true) {
		return nil, d.unavailable()
	}
	return d.recording.ListContainers(ctx, f)
}

func (d *downRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if d.down.Load() {
		return nil, d.unavailable()
	}
	return d.recording.PodSandboxStatus(ctx, id, verbose)
}

func (d *downRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if d.statusDown.Load() {
		d.refused.Add(1)
	}
	if d.down.Load() || d.statusDown.Load() {
		return nil, d.unavailable()
	}
	return d.recording.ContainerStatus(ctx, id, verbose)
}

func (d *downRuntime) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if d.down.Load() {
		return "", d.unavailable()
	}
	return d.recording.RunPodSandbox(ctx, c, handler)
}

func (d *downRuntime) StopPodSandbox(ctx context.Context, id string) error {
	if d.down.Load() {
		return d.unavailable()
	}
	return d.recording.StopPodSandbox(ctx, id)
}

func (d *downRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	if d.down.Load() {
		return d.unavailable()
	}
	return d.recording.RemovePodSandbox(ctx, id)
}

func (d *downRuntime) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	if d.down.Load() {
		return "", d.unavailable()
	}
	return d.recording.CreateContainer(ctx, sb, c, sbc)
}

func (d *downRuntime) StartContainer(ctx context.Context, id string) error {
	if d.down.Load() {
		return d.unavailable()
	}
	return d.recording.StartContainer(ctx, id)
}

func (d *downRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	if d.down.Load() {
		return d.unavailable()
	}
	return d.recording.StopContainer(ctx, id, timeout)
}

func (d *downRuntime) RemoveContainer(ctx context.Context, id string) error {
	if d.down.Load() {
		return d.unavailable()
	}
	return d.recording.RemoveContainer(ctx, id)
}

func (d *downRuntime) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	if d.down.Load() {
		return "", d.unavailable()
	}
	return d.recording.PullImage(ctx, img, auth, sbc)
}

// newDownEnv is newPodEnv whose pod manager runs on a downRuntime.
func newDownEnv(t *testing.T) (*podEnv, *downRuntime) {
	var rt *downRuntime
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		if rt == nil {
			rt = &downRuntime{recording: e.rt}
		}
		c.Runtime, c.Images = rt, rt
	})
	return e, rt
}

// waitLists waits until n more list calls than now have reached the runtime (refused ones counted by refused):
// each of the pod worker's syncs lists at least once, so n calls are at least n/2 syncs done.
func waitLists(t *testing.T, what string, counter *atomic.Int64, n int64) {
	t.Helper()
	base := counter.Load()
	apitest.Eventually(t, what, func() bool { return counter.Load() >= base+n })
}

// TestPodStatusKeptWhileRuntimeDown: while the container runtime does not answer, the pod workers skip their
// syncs (upstream's "skipping pod synchronization - container runtime is down") and the pod's status stays as
// last reported: its container ID and Running. A blank status (no container IDs, waiting, sandbox gone) was
// written from the failed lists before, and when only the containers could not be listed the pod's sandbox was
// replaced. Once the runtime answers again the pod is synced as usual, and a container that died meanwhile is
// reported and restarted in the same sandbox.
func TestPodStatusKeptWhileRuntimeDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(rt *downRuntime) *atomic.Bool
	}{
		{"runtime down", func(rt *downRuntime) *atomic.Bool { return &rt.down }},
		{"containers not listed", func(rt *downRuntime) *atomic.Bool { return &rt.containersDown }},
		{"container status refused", func(rt *downRuntime) *atomic.Bool { return &rt.statusDown }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, rt := newDownEnv(t)
			statusKeptWhileDown(t, e, rt, tc.down(rt))
		})
	}
}

func statusKeptWhileDown(t *testing.T, e *podEnv, rt *downRuntime, down *atomic.Bool) {
	e.create(simple("web", corev1.RestartPolicyAlways))
	e.until("Running and Ready", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue &&
			len(cs) == 1 && cs[0].ContainerID != "" && cs[0].State.Running != nil
	}, "web")
	waitLists(t, "a few syncs of the running pod", &rt.lists, 6) // whatever they wrote has settled
	before := e.pod("web")
	id := e.running("app")
	sbs, err := e.rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodName: "web"}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("the pod's sandboxes: %v, %v", sbs, err)
	}
	sandbox := sbs[0].Id

	down.Store(true)
	// Each sync refuses at least one list, and a sync's status write comes before the next sync's first list: six
	// refused lists are several syncs, each finished.
	waitLists(t, "syncs while the runtime is down", &rt.refused, 6)
	// The container dies while nobody can ask the runtime about it.
	if err := e.rt.Exit(id, 137, "Error", ""); err != nil {
		t.Fatalf("the container is no longer in the runtime (its sandbox replaced while it could not be read?): %v", err)
	}
	waitLists(t, "more syncs while the runtime is down", &rt.refused, 6)
	during := e.pod("web")
	if diff := cmp.Diff(before.Status, during.Status); diff != "" {
		t.Fatalf("the pod status changed while the runtime was down (-before +during):\n%s", diff)
	}
	if during.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the pod was written while the runtime was down: resourceVersion %s, was %s", during.ResourceVersion, before.ResourceVersion)
	}

	down.Store(false)
	p := e.until("the exit reported and the container restarted", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil &&
			cs[0].LastTerminationState.Terminated != nil && cs[0].LastTerminationState.Terminated.ExitCode == 137
	}, "web")
	cs := p.Status.ContainerStatuses[0]
	if old := before.Status.ContainerStatuses[0].ContainerID; cs.LastTerminationState.Terminated.ContainerID != old || cs.ContainerID == old {
		t.Errorf("container IDs after the restart: %s (last state %s), the dead one was %s", cs.ContainerID, cs.LastTerminationState.Terminated.ContainerID, old)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s after the restart", p.Status.Phase)
	}
	sbs, err = e.rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodName: "web"}})
	if err != nil || len(sbs) != 1 || sbs[0].Id != sandbox {
		t.Errorf("the pod's sandboxes after the outage: %v, %v; want only %s", sbs, err, sandbox)
	}
}

// TestPodDeletionWaitsForRuntime: a pod deleted while the runtime does not answer stays (Terminating) with its
// container running, since nobody can stop it or say that it stopped; it was removed from the API at once
// before. Once the runtime answers, the container is stopped and the pod removed as usual.
func TestPodDeletionWaitsForRuntime(t *testing.T) {
	e, rt := newDownEnv(t)
	e.create(simple("db", corev1.RestartPolicyAlways))
	e.until("Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "db")
	id := e.running("app")

	rt.down.Store(true)
	base := rt.refused.Load()
	if err := e.admin.CoreV1().Pods("default").Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "syncs of the deleted pod while the runtime is down", func() bool {
		return rt.refused.Load() >= base+6 || e.pod("db") == nil
	})
	if p := e.pod("db"); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("the pod was removed from the API while the runtime could not stop its container: %v", p)
	}
	if e.running("app") != id {
		t.Fatalf("the container %s is no longer running", id)
	}

	rt.down.Store(false)
	apitest.Eventually(t, "the pod object removed", func() bool {
		_, err := e.admin.CoreV1().Pods("default").Get(t.Context(), "db", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	apitest.Eventually(t, "its container removed from the runtime", func() bool {
		_, err := e.rt.ContainerStatus(t.Context(), id, false)
		return err != nil
	})
}
