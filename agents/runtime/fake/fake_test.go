package fake_test

import (
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/runtimetest"
)

func TestConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New:         func(t *testing.T) runtime.Runtime { return fake.New() },
		LongRunning: []string{"ignored"},
	})
}

func TestExitAndExecHooks(t *testing.T) {
	rt, ctx := fake.New(), t.Context()
	sbCfg := runtimetest.SandboxConfig("p")
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, runtimetest.ContainerConfig("c", nil), sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Exit(id, 0, "", ""); !runtime.IsFailedPrecondition(err) {
		t.Errorf("Exit of a created container: %v, want FailedPrecondition", err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	rt.SetExecHook(func(_ string, cmd []string) ([]byte, []byte, int) {
		if cmd[0] == "fail" {
			return nil, []byte("bad"), 2
		}
		return []byte("ok"), nil, 0
	})
	if out, _, err := rt.ExecSync(ctx, id, []string{"probe"}, time.Second); err != nil || string(out) != "ok" {
		t.Errorf("exec: %q, %v", out, err)
	}
	var exitErr utilexec.CodeExitError
	if _, stderr, err := rt.ExecSync(ctx, id, []string{"fail"}, time.Second); !errors.As(err, &exitErr) || exitErr.Code != 2 || string(stderr) != "bad" {
		t.Errorf("failing exec: %q, %v; want code 2", stderr, err)
	}

	if err := rt.Exit(id, 1, "", "boom"); err != nil {
		t.Fatal(err)
	}
	st, err := rt.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Status; s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 1 || s.Reason != "Error" || s.Message != "boom" {
		t.Errorf("after Exit: %v", s)
	}
	if img, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "a:1"}, nil, sbCfg); err != nil || img != "a:1" {
		t.Errorf("PullImage = %q, %v", img, err)
	}
	if got := rt.Images(); len(got) != 1 || got[0] != "a:1" {
		t.Errorf("Images = %v", got)
	}
}
