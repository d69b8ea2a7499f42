package process_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// agentProgram is the test program "agent": it opens a runtime on the state
// dir args[0] (logs args[1], cgroup root args[2]), starts a ticking container,
// prints its ID and exits at once, leaving everything running as a crashed
// agent would.
func agentProgram(args []string) int {
	rt, err := process.New(process.Config{StateDir: args[0], LogDir: args[1], CgroupRoot: args[2]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	sbCfg := sandboxConfig("survivor")
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cc := containerConfig("ticker", "sh", "-c", `i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done`)
	id, err := rt.CreateContainer(ctx, sb, cc, sbCfg)
	if err == nil {
		err = rt.StartContainer(ctx, id)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(id)
	return 0
}

func TestReadoptionAfterAgentExit(t *testing.T) {
	rt, cfg := testRuntime(t)
	rt.Close() // the "agent" process owns the state now

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(self, cfg.StateDir, cfg.LogDir, cfg.CgroupRoot)
	agent.Env = append(os.Environ(), "WH_TEST_PROGRAM=agent")
	var stderr bytes.Buffer
	agent.Stderr = &stderr
	out, err := agent.Output()
	if err != nil {
		t.Fatalf("agent: %v: %s", err, stderr.String())
	}
	id := string(out)

	rt = openRuntime(t, cfg)
	ctx := t.Context()
	running := &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.container.name": "ticker"},
	}
	list := must(rt.ListContainers(ctx, running))(t)
	if len(list) != 1 || list[0].Id != id {
		t.Fatalf("running tickers after agent exit = %v, want [%s]", list, id)
	}
	sbs := must(rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-survivor"}}))(t)
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || sbs[0].Id != list[0].PodSandboxId {
		t.Fatalf("sandboxes of the survivor = %v", sbs)
	}

	// The shim outlived the agent: the log still grows.
	st := status(t, rt, id)
	n := len(readLog(t, st.LogPath))
	eventually(t, 10*time.Second, "the log to grow without the agent", func() bool {
		return len(readLog(t, st.LogPath)) > n+2
	})

	if err := rt.StopContainer(ctx, id, 10); err != nil {
		t.Fatal(err)
	}
	st = status(t, rt, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
		t.Errorf("after stop: %s exit %d, want EXITED 143 (SIGTERM)", st.State, st.ExitCode)
	}
	if !strings.HasPrefix(logText(readLog(t, st.LogPath), "stdout"), "tick 0\ntick 1\n") {
		t.Errorf("log does not start with the first ticks")
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("stubborn")
	sb := runSandbox(t, rt, sbCfg)
	id := startContainer(t, rt, sb, sbCfg, testProgramConfig(t, "stubborn", "ignore-term"))
	st := status(t, rt, id)
	eventually(t, 10*time.Second, "the program to ignore SIGTERM", func() bool {
		return logText(readLog(t, st.LogPath), "stdout") == "ready\n"
	})
	if err := rt.StopContainer(t.Context(), id, 1); err != nil {
		t.Fatal(err)
	}
	st = status(t, rt, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Errorf("after stop: %s exit %d, want EXITED 137 (SIGKILL after the timeout)", st.State, st.ExitCode)
	}
	if err := rt.StopContainer(t.Context(), id, 1); err != nil {
		t.Errorf("second stop: %v", err)
	}
}
