package process_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// targeting is a container config sharing the process namespace of container target (an ephemeral container
// with a targetContainerName, as the kubelet creates it).
func targeting(cfg *runtimeapi.ContainerConfig, target string) *runtimeapi.ContainerConfig {
	cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: target}}}
	return cfg
}

// TestTargetProcessNamespace: a container created with Pid TARGET runs in its pod's sandbox and in the
// process namespace of its target, whose processes it sees; a target that is not a container of the sandbox is
// refused.
func TestTargetProcessNamespace(t *testing.T) {
	rt, _ := testRuntime(t)
	ctx := t.Context()
	sbCfg := sandboxConfig("debug")
	sb := runSandbox(t, rt, sbCfg)
	app := startContainer(t, rt, sb, sbCfg, containerConfig("app", "sleep", "300"))
	pid := must(rt.ContainerStatus(ctx, app, true))(t).Info["pid"]
	if pid == "" {
		t.Fatal("no pid for the target")
	}
	script := fmt.Sprintf("readlink /proc/self/ns/pid; readlink /proc/self/ns/net; tr '\\0' ' ' < /proc/%s/cmdline; echo", pid)
	dbg := startContainer(t, rt, sb, sbCfg, targeting(containerConfig("debugger", "sh", "-c", script), app))
	st := waitExited(t, rt, dbg)
	if st.ExitCode != 0 {
		t.Fatalf("the debugging container exited %d: %s", st.ExitCode, logText(readLog(t, st.LogPath), "stderr"))
	}
	lines := strings.Split(strings.TrimSpace(logText(readLog(t, st.LogPath), "stdout")), "\n")
	targetPID := must(os.Readlink("/proc/" + pid + "/ns/pid"))(t)
	targetNet := must(os.Readlink("/proc/" + pid + "/ns/net"))(t)
	if len(lines) != 3 || lines[0] != targetPID || lines[1] != targetNet || strings.TrimSpace(lines[2]) != "sleep 300" {
		t.Errorf("the debugging container saw %q; want pid namespace %s, network namespace %s and the target's command",
			lines, targetPID, targetNet)
	}

	other := runSandbox(t, rt, sandboxConfig("other"))
	for _, tc := range []struct {
		name   string
		sb     string
		target string
		code   codes.Code
	}{
		{"no target", sb, "", codes.InvalidArgument},
		{"unknown target", sb, "nope", codes.NotFound},
		{"another pod's container", other, app, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.CreateContainer(ctx, tc.sb, targeting(containerConfig("bad", "true"), tc.target), sbCfg)
			if grpcstatus.Code(err) != tc.code {
				t.Errorf("CreateContainer: %v, want %s", err, tc.code)
			}
		})
	}
}
