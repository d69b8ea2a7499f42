package cri_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/runtimetest"
)

// TestContainerdTargetNamespace: an ephemeral container as the kubelet creates one for `kubectl debug
// --target` (NamespaceOption Pid TARGET, TargetId the target's ID) runs in its target's process namespace in
// containerd, and in the pod's network namespace; one with a process namespace of its own does not share it.
func TestContainerdTargetNamespace(t *testing.T) {
	nd := startNode(t)
	ctx := t.Context()
	sbCfg := runtimetest.SandboxConfig("debug")
	sbCfg.LogDirectory = t.TempDir()
	sbCfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "pod" + sbCfg.Metadata.Uid}
	sb, err := nd.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = nd.rt.StopPodSandbox(ctx, sb)
		_ = nd.rt.RemovePodSandbox(ctx, sb)
	})
	start := func(name string, ns *runtimeapi.NamespaceOption) string {
		cfg := runtimetest.ContainerConfig(name, []string{"/podserver", "tick"})
		cfg.Image.Image = containerdtest.ServerImage
		cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}
		id, err := nd.rt.CreateContainer(ctx, sb, cfg, sbCfg)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if err := nd.rt.StartContainer(ctx, id); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		return id
	}
	own := func() *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER,
			Ipc: runtimeapi.NamespaceMode_POD}
	}
	app := start("app", own())
	targeted := own()
	targeted.Pid, targeted.TargetId = runtimeapi.NamespaceMode_TARGET, app
	debug := start("debugger", targeted)
	other := start("other", own())

	ns := func(id, kind string) string {
		st, err := nd.rt.ContainerStatus(ctx, id, true)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Pid int `json:"pid"`
		}
		if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
			t.Fatalf("the pid of %s: %v (info %q)", id, err, st.Info["info"])
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", info.Pid, kind))
		if err != nil {
			t.Fatal(err)
		}
		return link
	}
	if a, d := ns(app, "pid"), ns(debug, "pid"); a != d {
		t.Errorf("the debugging container's process namespace %s, want its target's %s", d, a)
	}
	if a, o := ns(app, "pid"), ns(other, "pid"); a == o {
		t.Errorf("a container with a process namespace of its own shares its neighbour's (%s)", a)
	}
	if a, d := ns(app, "net"), ns(debug, "net"); a != d {
		t.Errorf("the debugging container's network namespace %s, want the pod's %s", d, a)
	}
}
