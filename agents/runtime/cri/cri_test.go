package cri_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/fakecri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/runtimetest"
)

func open(t *testing.T, s *fakecri.Server) *cri.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := cri.Open(ctx, cri.Config{Endpoint: s.Endpoint(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestConformance: the runtime suite through the client and a CRI server over the fake runtime — what the
// kubelet relies on survives the trip over gRPC (statuses, NotFound, FailedPrecondition, labels).
func TestConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New:         func(t *testing.T) runtime.Runtime { return open(t, fakecri.Start(t, fake.New())) },
		LongRunning: []string{"ignored"},
	})
}

func TestExecSync(t *testing.T) {
	rt := fake.New()
	s := fakecri.Start(t, rt)
	r, ctx := open(t, s), t.Context()
	sbCfg := runtimetest.SandboxConfig("p")
	sb, err := r.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.CreateContainer(ctx, sb, runtimetest.ContainerConfig("c", []string{"x"}), sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	rt.SetExecHook(func(_ string, cmd []string) ([]byte, []byte, int) {
		if cmd[0] == "fail" {
			return []byte("out"), []byte("bad"), 3
		}
		return []byte("ok"), nil, 0
	})

	if out, _, err := r.ExecSync(ctx, id, []string{"true"}, time.Second); err != nil || string(out) != "ok" {
		t.Errorf("success: %q, %v", out, err)
	}
	out, stderr, err := r.ExecSync(ctx, id, []string{"fail"}, time.Second)
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 3 || string(out) != "out" || string(stderr) != "bad" {
		t.Errorf("non-zero exit: %q %q %v, want a CodeExitError 3 with the output", out, stderr, err)
	}
	s.Fail("ExecSync", status.Error(codes.DeadlineExceeded, "timeout 1s exceeded"))
	if _, _, err := r.ExecSync(ctx, id, []string{"sleep"}, time.Second); !errors.Is(err, runtime.ErrCommandTimedOut) {
		t.Errorf("timeout: %v, want runtime.ErrCommandTimedOut", err)
	}
	if _, err := r.ContainerStatus(ctx, "nope", false); !runtime.IsNotFound(err) {
		t.Errorf("unknown container: %v, want NotFound", err)
	}
}

func TestImages(t *testing.T) {
	s := fakecri.Start(t, fake.New())
	r, ctx := open(t, s), t.Context()
	s.AddImage("example.test/present:1", 100)
	if st, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "example.test/present:1"}, false); err != nil || st.Image == nil {
		t.Fatalf("present image: %v, %v", st, err)
	}
	if st, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "example.test/absent:1"}, false); err != nil || st.Image != nil {
		t.Fatalf("absent image: %v, %v (want no image, no error)", st, err)
	}
	auth := &runtimeapi.AuthConfig{Username: "u", Password: "p"}
	ref, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "example.test/app:2"}, auth, nil)
	if err != nil || !strings.HasPrefix(ref, "sha256:") {
		t.Fatalf("pull: %q, %v", ref, err)
	}
	if pulls := s.Pulls(); len(pulls) != 1 || pulls[0].Auth.GetUsername() != "u" || pulls[0].Auth.GetPassword() != "p" {
		t.Errorf("the server saw %+v, want one pull with the credentials", pulls)
	}
	s.FailPull("example.test/missing:1", status.Error(codes.NotFound, "not found"))
	if _, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "example.test/missing:1"}, nil, nil); status.Code(err) != codes.NotFound {
		t.Errorf("failed pull: %v", err)
	}
	if imgs, err := r.ListImages(ctx, nil); err != nil || len(imgs) != 2 {
		t.Errorf("ListImages: %d, %v, want 2", len(imgs), err)
	}
	if fs, err := r.ImageFsInfo(ctx); err != nil || fs.ImageFilesystems[0].UsedBytes.Value != 100+1<<20 {
		t.Errorf("ImageFsInfo: %v, %v", fs, err)
	}
	for range 2 { // removing an absent image succeeds
		if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "example.test/present:1"}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "example.test/present:1"}, false); err != nil || st.Image != nil {
		t.Errorf("after remove: %v, %v", st, err)
	}
}

// TestRuntimeDown: Open waits for a runtime that is not up yet; Ready says why the runtime is not usable, in
// the kubelet's words.
func TestRuntimeDown(t *testing.T) {
	s := fakecri.Start(t, fake.New())
	s.Down()
	opened := make(chan *cri.Runtime, 1)
	go func() {
		r, err := cri.Open(t.Context(), cri.Config{Endpoint: s.Endpoint(), Timeout: 2 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- r
	}()
	calls := len(s.Calls())
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	r := <-opened
	if r == nil {
		t.FailNow()
	}
	t.Cleanup(func() { r.Close() })
	if len(s.Calls()) == calls {
		t.Error("Open returned without asking the runtime")
	}
	ctx := t.Context()
	if ok, why := r.Ready(ctx); !ok {
		t.Errorf("ready runtime: %s", why)
	}
	s.SetNetworkReady(false)
	if ok, why := r.Ready(ctx); ok || !strings.HasPrefix(why, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady") {
		t.Errorf("network not ready: %v %q", ok, why)
	}
	s.Down()
	if ok, why := r.Ready(ctx); ok || !strings.HasPrefix(why, "container runtime is down") {
		t.Errorf("runtime down: %v %q", ok, why)
	}
	if _, err := r.ListPodSandbox(ctx, nil); status.Code(err) != codes.Unavailable {
		t.Errorf("a call while down: %v, want Unavailable", err)
	}
	s.SetNetworkReady(true)
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	// The client reconnects by itself (its back-off is short): the next calls succeed.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ok, why := r.Ready(ctx); !ok; ok, why = r.Ready(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready again after Up: %s", why)
		}
		<-tick.C
	}
}

// TestSlowCall: a call slower than the timeout ends with DeadlineExceeded instead of hanging the kubelet.
func TestSlowCall(t *testing.T) {
	s := fakecri.Start(t, fake.New())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := cri.Open(ctx, cri.Config{Endpoint: s.Endpoint(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s.Delay("ListPodSandbox", time.Minute)
	if _, err := r.ListPodSandbox(ctx, nil); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("slow call: %v, want DeadlineExceeded", err)
	}
}
