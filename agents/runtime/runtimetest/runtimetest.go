// Package runtimetest is the conformance suite of runtime.Runtime: the
// behaviour the kubelet relies on, run against every implementation (fake
// and process) so that code tested with the fake behaves the same for real.
package runtimetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// Harness adapts an implementation to the suite.
type Harness struct {
	// New returns an empty runtime for one test and arranges its cleanup.
	New func(t *testing.T) runtime.Runtime
	// LongRunning is a container command that runs until it is stopped.
	LongRunning []string
	// Succeeds is a command that exits 0 inside a LongRunning container (default "true").
	Succeeds []string
	// Image is the image containers run ("": ContainerConfig's, which runtimes without images only record). A
	// runtime with images reports its own reference of it (a digest); the others report the name.
	Image string
}

func (h Harness) succeeds() []string {
	if len(h.Succeeds) == 0 {
		return []string{"true"}
	}
	return h.Succeeds
}

// container is ContainerConfig with the harness's image.
func (h Harness) container(name string, cmd []string) *runtimeapi.ContainerConfig {
	c := ContainerConfig(name, cmd)
	if h.Image != "" {
		c.Image.Image = h.Image
	}
	return c
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"Version", testVersion},
		{"SandboxLifecycle", testSandboxLifecycle},
		{"ContainerLifecycle", testContainerLifecycle},
		{"NotFound", testNotFound},
		{"StopSandboxStopsContainers", testStopSandboxStopsContainers},
		{"RemoveSandboxRemovesContainers", testRemoveSandboxRemovesContainers},
		{"UpdateContainerResources", testUpdateContainerResources},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, h) })
	}
}

// SandboxConfig is a pod's sandbox config with kubelet-style labels.
func SandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name, Attempt: 1},
		Labels:      map[string]string{"io.kubernetes.pod.uid": "uid-" + name, "io.kubernetes.pod.name": name},
		Annotations: map[string]string{"kubernetes.io/config.source": "api"},
	}
}

// ContainerConfig is a container config with kubelet-style labels.
func ContainerConfig(name string, cmd []string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name, Attempt: 2},
		Image:       &runtimeapi.ImageSpec{Image: "registry.example/app:v1"},
		Command:     cmd,
		LogPath:     name + "/2.log",
		Labels:      map[string]string{"io.kubernetes.container.name": name},
		Annotations: map[string]string{"io.kubernetes.container.hash": "abc"},
	}
}

func testVersion(t *testing.T, h Harness) {
	v, err := h.New(t).Version(t.Context(), "v1")
	if err != nil || v.RuntimeApiVersion != "v1" || v.RuntimeName == "" {
		t.Errorf("Version = %v, %v", v, err)
	}
}

func testSandboxLifecycle(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	cfg := SandboxConfig("web")
	id := must(rt.RunPodSandbox(ctx, cfg, ""))(t)
	other := must(rt.RunPodSandbox(ctx, SandboxConfig("other"), ""))(t)

	st := must(rt.PodSandboxStatus(ctx, id, false))(t).Status
	want := &runtimeapi.PodSandboxStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Labels: cfg.Labels, Annotations: cfg.Annotations}
	opts := cmp.Options{protocmp.Transform(), protocmp.IgnoreFields(&runtimeapi.PodSandboxStatus{}, "created_at", "network", "linux", "runtime_handler")}
	if diff := cmp.Diff(want, st, opts); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if st.CreatedAt == 0 {
		t.Error("CreatedAt is zero")
	}
	byUID := &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-web"}}
	if got := sandboxIDs(must(rt.ListPodSandbox(ctx, byUID))(t)); !cmp.Equal(got, []string{id}) {
		t.Errorf("by label: %v, want [%s]", got, id)
	}
	if got := sandboxIDs(must(rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: other}))(t)); !cmp.Equal(got, []string{other}) {
		t.Errorf("by id: %v, want [%s]", got, other)
	}

	for range 2 { // idempotent
		if err := rt.StopPodSandbox(ctx, id); err != nil {
			t.Fatalf("StopPodSandbox: %v", err)
		}
	}
	notReady := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}
	if got := sandboxIDs(must(rt.ListPodSandbox(ctx, notReady))(t)); !cmp.Equal(got, []string{id}) {
		t.Errorf("NOTREADY: %v, want [%s]", got, id)
	}
	if _, err := rt.CreateContainer(ctx, id, h.container("late", h.LongRunning), cfg); !runtime.IsFailedPrecondition(err) {
		t.Errorf("CreateContainer in a stopped sandbox: %v, want FailedPrecondition", err)
	}
	for range 2 {
		if err := rt.RemovePodSandbox(ctx, id); err != nil {
			t.Fatalf("RemovePodSandbox: %v", err)
		}
	}
	if _, err := rt.PodSandboxStatus(ctx, id, false); !runtime.IsNotFound(err) {
		t.Errorf("status after remove: %v, want NotFound", err)
	}
}

func testContainerLifecycle(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	sbCfg := SandboxConfig("app")
	sb := must(rt.RunPodSandbox(ctx, sbCfg, ""))(t)
	cfg := h.container("main", h.LongRunning)
	id := must(rt.CreateContainer(ctx, sb, cfg, sbCfg))(t)
	st := must(rt.ContainerStatus(ctx, id, false))(t).Status
	if st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("after create: %s", st.State)
	}
	opts := cmp.Options{protocmp.Transform()}
	if !cmp.Equal(cfg.Labels, st.Labels) || !cmp.Equal(cfg.Annotations, st.Annotations) || !cmp.Equal(cfg.Metadata, st.Metadata, opts) {
		t.Errorf("status does not round-trip labels %v, annotations %v, metadata %v", st.Labels, st.Annotations, st.Metadata)
	}
	if st.Image.GetImage() == "" || st.ImageRef == "" || h.Image == "" && (st.Image.GetImage() != cfg.Image.Image || st.ImageRef != cfg.Image.Image) {
		t.Errorf("image %v / %q, want %q", st.Image, st.ImageRef, cfg.Image.Image)
	}

	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); !runtime.IsFailedPrecondition(err) {
		t.Errorf("second start: %v, want FailedPrecondition", err)
	}
	running := &runtimeapi.ContainerFilter{PodSandboxId: sb, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	list := must(rt.ListContainers(ctx, running))(t)
	if len(list) != 1 || list[0].Id != id || list[0].PodSandboxId != sb || list[0].Labels["io.kubernetes.container.name"] != "main" {
		t.Fatalf("running containers: %v", list)
	}
	if _, _, err := rt.ExecSync(ctx, id, h.succeeds(), 10*time.Second); err != nil {
		t.Errorf("ExecSync: %v", err)
	}
	for range 2 {
		if err := rt.StopContainer(ctx, id, 10); err != nil {
			t.Fatalf("StopContainer: %v", err)
		}
	}
	st = must(rt.ContainerStatus(ctx, id, false))(t).Status
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode == 0 || st.Reason != "Error" || st.FinishedAt < st.StartedAt {
		t.Errorf("after stop: %s exit %d %q started %d finished %d", st.State, st.ExitCode, st.Reason, st.StartedAt, st.FinishedAt)
	}
	if _, _, err := rt.ExecSync(ctx, id, h.succeeds(), time.Second); !runtime.IsFailedPrecondition(err) {
		t.Errorf("ExecSync in an exited container: %v, want FailedPrecondition", err)
	}
	for range 2 {
		if err := rt.RemoveContainer(ctx, id); err != nil {
			t.Fatalf("RemoveContainer: %v", err)
		}
	}
	if _, err := rt.ContainerStatus(ctx, id, false); !runtime.IsNotFound(err) {
		t.Errorf("status after remove: %v, want NotFound", err)
	}
}

// testUpdateContainerResources: a running container's resources change in place (it keeps running, the same
// instance) and its status reports the new ones; an unknown container is NotFound.
func testUpdateContainerResources(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	sbCfg := SandboxConfig("resize")
	sb := must(rt.RunPodSandbox(ctx, sbCfg, ""))(t)
	cfg := h.container("main", h.LongRunning)
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20}}
	id := must(rt.CreateContainer(ctx, sb, cfg, sbCfg))(t)
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 20000, MemoryLimitInBytes: 128 << 20}
	if err := rt.UpdateContainerResources(ctx, id, &runtimeapi.ContainerResources{Linux: want}); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	st := must(rt.ContainerStatus(ctx, id, false))(t).Status
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the update: %s, want the same instance running", st.State)
	}
	got := st.GetResources().GetLinux()
	if got.GetCpuShares() != want.CpuShares || got.GetCpuQuota() != want.CpuQuota || got.GetCpuPeriod() != want.CpuPeriod ||
		got.GetMemoryLimitInBytes() != want.MemoryLimitInBytes {
		t.Errorf("status resources %v, want %v", got, want)
	}
	if err := rt.UpdateContainerResources(ctx, "nope", &runtimeapi.ContainerResources{Linux: want}); !runtime.IsNotFound(err) {
		t.Errorf("update of an unknown container: %v, want NotFound", err)
	}
}

func testNotFound(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	for name, call := range map[string]func() error{
		"PodSandboxStatus": func() error { _, err := rt.PodSandboxStatus(ctx, "nope", false); return err },
		"ContainerStatus":  func() error { _, err := rt.ContainerStatus(ctx, "nope", false); return err },
		"StartContainer":   func() error { return rt.StartContainer(ctx, "nope") },
		"ExecSync":         func() error { _, _, err := rt.ExecSync(ctx, "nope", h.succeeds(), time.Second); return err },
		"CreateContainer": func() error {
			_, err := rt.CreateContainer(ctx, "nope", h.container("c", h.LongRunning), SandboxConfig("x"))
			return err
		},
	} {
		if err := call(); !runtime.IsNotFound(err) {
			t.Errorf("%s of an unknown ID: %v, want NotFound", name, err)
		}
	}
	for name, call := range map[string]func() error{
		"StopPodSandbox":   func() error { return rt.StopPodSandbox(ctx, "nope") },
		"RemovePodSandbox": func() error { return rt.RemovePodSandbox(ctx, "nope") },
		"StopContainer":    func() error { return rt.StopContainer(ctx, "nope", 1) },
		"RemoveContainer":  func() error { return rt.RemoveContainer(ctx, "nope") },
	} {
		if err := call(); err != nil {
			t.Errorf("%s of an unknown ID: %v, want success", name, err)
		}
	}
}

func testStopSandboxStopsContainers(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	sbCfg := SandboxConfig("stop")
	sb := must(rt.RunPodSandbox(ctx, sbCfg, ""))(t)
	id := must(rt.CreateContainer(ctx, sb, h.container("c", h.LongRunning), sbCfg))(t)
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if st := must(rt.ContainerStatus(ctx, id, false))(t).Status; st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("container after StopPodSandbox: %s, want EXITED", st.State)
	}
}

func testRemoveSandboxRemovesContainers(t *testing.T, h Harness) {
	rt, ctx := h.New(t), t.Context()
	sbCfg := SandboxConfig("rm")
	sb := must(rt.RunPodSandbox(ctx, sbCfg, ""))(t)
	id := must(rt.CreateContainer(ctx, sb, h.container("c", h.LongRunning), sbCfg))(t)
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if list := must(rt.ListContainers(ctx, nil))(t); len(list) != 0 {
		t.Errorf("containers after RemovePodSandbox: %v", list)
	}
	if _, err := rt.ContainerStatus(ctx, id, false); !runtime.IsNotFound(err) {
		t.Errorf("container status after RemovePodSandbox: %v, want NotFound", err)
	}
}

func sandboxIDs(list []*runtimeapi.PodSandbox) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Id)
	}
	return out
}

// must turns (value, error) into a value, failing the test on an error.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
