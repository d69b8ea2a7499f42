package process_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMountsAreVisibleInTheContainerOnly(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("vol")
	sb := runSandbox(t, rt, sbCfg)

	roSrc, rwSrc := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(roSrc, "config"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	roDst, rwDst := filepath.Join(base, "etc", "app"), filepath.Join(base, "data") // missing: created
	cc := containerConfig("app", "sh", "-c",
		`cat `+roDst+`/config; echo; touch `+roDst+`/x 2>/dev/null && echo writable || echo readonly; echo written > `+rwDst+`/out`)
	cc.Mounts = []*runtimeapi.Mount{
		{HostPath: roSrc, ContainerPath: roDst, Readonly: true},
		{HostPath: rwSrc, ContainerPath: rwDst},
	}
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, cc))
	if st.ExitCode != 0 {
		t.Fatalf("exit %d: %s", st.ExitCode, logText(readLog(t, st.LogPath), "stderr"))
	}
	if got := logText(readLog(t, st.LogPath), "stdout"); got != "from host\nreadonly\n" {
		t.Errorf("container saw %q, want the host file through a read-only mount", got)
	}
	if b, err := os.ReadFile(filepath.Join(rwSrc, "out")); err != nil || string(b) != "written\n" {
		t.Errorf("rw mount: host source has %q, %v", b, err)
	}
	// The mount points exist on the host (no rootfs), but the mounts do not.
	for _, dst := range []string{roDst, rwDst} {
		entries, err := os.ReadDir(dst)
		if err != nil || len(entries) != 0 {
			t.Errorf("host view of %s = %v, %v; want an empty mount point", dst, entries, err)
		}
	}
}

func TestCgroupLimitsAreWritten(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("limits")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sleep", "300")
	cc.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: 64 << 20, CpuQuota: 50000, CpuPeriod: 100000, CpuShares: 512,
	}}
	id := startContainer(t, rt, sb, sbCfg, cc)
	pid := must(rt.ContainerStatus(t.Context(), id, true))(t).Info["pid"]

	// Read the limits of the cgroups the process is really in.
	files := map[string]string{}
	if cgroupV2() {
		dir := filepath.Join("/sys/fs/cgroup", procCgroup(t, pid, ""))
		files[filepath.Join(dir, "memory.max")] = "67108864"
		files[filepath.Join(dir, "cpu.max")] = "50000 100000"
		files[filepath.Join(dir, "cpu.weight")] = "59"
	} else {
		mem := filepath.Join("/sys/fs/cgroup/memory", procCgroup(t, pid, "memory"))
		cpu := filepath.Join("/sys/fs/cgroup/cpu", procCgroup(t, pid, "cpu"))
		files[filepath.Join(mem, "memory.limit_in_bytes")] = "67108864"
		files[filepath.Join(cpu, "cpu.cfs_quota_us")] = "50000"
		files[filepath.Join(cpu, "cpu.cfs_period_us")] = "100000"
		files[filepath.Join(cpu, "cpu.shares")] = "512"
	}
	for f, want := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%v", err)
		} else if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if !strings.Contains(procCgroup(t, pid, "memory"), id) {
		t.Errorf("process %s is not in the container's cgroup", pid)
	}
}

// TestUpdateContainerResourcesRewritesCgroup: an in-place resize rewrites the running container's cgroup — new
// limits where there were others, none where they are lifted — and the process keeps running in it.
func TestUpdateContainerResourcesRewritesCgroup(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("resize")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sleep", "300")
	cc.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: 64 << 20, CpuQuota: 50000, CpuPeriod: 100000, CpuShares: 512,
	}}
	id := startContainer(t, rt, sb, sbCfg, cc)
	pid := must(rt.ContainerStatus(t.Context(), id, true))(t).Info["pid"]
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	type step struct {
		res   *runtimeapi.LinuxContainerResources
		files map[string]string
	}
	var steps []step
	if cgroupV2() {
		dir := filepath.Join("/sys/fs/cgroup", procCgroup(t, pid, ""))
		steps = []step{
			{&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 96 << 20, CpuQuota: 1000, CpuPeriod: 100000, CpuShares: 1024},
				map[string]string{dir + "/memory.max": "100663296", dir + "/cpu.max": "1000 100000", dir + "/cpu.weight": "100"}},
			{&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuShares: 2},
				map[string]string{dir + "/memory.max": "max", dir + "/cpu.max": "max 100000", dir + "/cpu.weight": "1"}},
		}
	} else {
		mem := filepath.Join("/sys/fs/cgroup/memory", procCgroup(t, pid, "memory"))
		cpu := filepath.Join("/sys/fs/cgroup/cpu", procCgroup(t, pid, "cpu"))
		steps = []step{
			{&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 96 << 20, CpuQuota: 1000, CpuPeriod: 100000, CpuShares: 1024},
				map[string]string{mem + "/memory.limit_in_bytes": "100663296", cpu + "/cpu.cfs_quota_us": "1000", cpu + "/cpu.shares": "1024"}},
			{&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 32 << 20, CpuPeriod: 100000, CpuShares: 2},
				map[string]string{mem + "/memory.limit_in_bytes": "33554432", cpu + "/cpu.cfs_quota_us": "-1", cpu + "/cpu.shares": "2"}},
		}
	}
	for i, s := range steps {
		if err := rt.UpdateContainerResources(t.Context(), id, &runtimeapi.ContainerResources{Linux: s.res}); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		for f, want := range s.files {
			if got := read(f); got != want {
				t.Errorf("update %d: %s = %q, want %q", i, f, got, want)
			}
		}
		st := must(rt.ContainerStatus(t.Context(), id, true))(t)
		if st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Info["pid"] != pid {
			t.Errorf("update %d: container %s pid %s, want the same process running", i, st.Status.State, st.Info["pid"])
		}
		if got := st.Status.GetResources().GetLinux(); got.GetCpuShares() != s.res.CpuShares || got.GetMemoryLimitInBytes() != s.res.MemoryLimitInBytes {
			t.Errorf("update %d: status resources %v", i, got)
		}
	}
}

func TestMemoryLimitIsOOMKilled(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("oom")
	sb := runSandbox(t, rt, sbCfg)
	cc := testProgramConfig(t, "hog", "alloc")
	cc.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 48 << 20}}
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, cc))
	if st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Errorf("exit %d %q, want 137 OOMKilled", st.ExitCode, st.Reason)
	}
}

// recordingNetwork is a Network hook that records its calls.
type recordingNetwork struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (n *recordingNetwork) SetUp(ctx context.Context, id, netns string) (string, error) {
	n.record("setup " + id + " " + netns)
	return "192.0.2.10", nil
}

func (n *recordingNetwork) TearDown(ctx context.Context, id, netns string) error {
	n.record("teardown " + id + " " + netns)
	return nil
}

func (n *recordingNetwork) record(call string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, call)
}

func TestNetworkNamespaces(t *testing.T) {
	rt, cfg := testRuntime(t)
	ctx := t.Context()
	net := &recordingNetwork{}
	cfg.Network = net
	rt.Close()
	rt = openRuntime(t, cfg)

	podCfg := sandboxConfig("pod-net")
	pod := runSandbox(t, rt, podCfg)
	hostCfg := sandboxConfig("host-net")
	hostCfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
	}}
	host := runSandbox(t, rt, hostCfg)

	podIfaces := logText(readLog(t, waitExited(t, rt, startContainer(t, rt, pod, podCfg, testProgramConfig(t, "ifaces", "ifaces"))).LogPath), "stdout")
	if podIfaces != "lo\n" {
		t.Errorf("pod network interfaces %q, want only lo", podIfaces)
	}
	hostIfaces := logText(readLog(t, waitExited(t, rt, startContainer(t, rt, host, hostCfg, testProgramConfig(t, "ifaces", "ifaces"))).LogPath), "stdout")
	if hostIfaces != hostInterfaces(t) {
		t.Errorf("host network container saw %q, want the host's %q", hostIfaces, hostInterfaces(t))
	}
	if ip := must(rt.PodSandboxStatus(ctx, pod, false))(t).Status.Network.Ip; ip != "192.0.2.10" {
		t.Errorf("pod IP %q, want the hook's", ip)
	}
	if err := rt.StopPodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	netns := filepath.Join(cfg.StateDir, "netns", pod)
	want := []string{"setup " + pod + " " + netns, "teardown " + pod + " " + netns}
	net.mu.Lock()
	defer net.mu.Unlock()
	if strings.Join(net.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("network calls %q, want %q", net.calls, want)
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Errorf("netns %s still exists after stop: %v", netns, err)
	}
}

func TestRunAsUser(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("user")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sh", "-c", "id -u; id -g; id -G")
	cc.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		RunAsUser: &runtimeapi.Int64Value{Value: 4242}, RunAsGroup: &runtimeapi.Int64Value{Value: 4343},
		SupplementalGroups: []int64{4444},
	}}
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, cc))
	if got := logText(readLog(t, st.LogPath), "stdout"); got != "4242\n4343\n4343 4444\n" {
		t.Errorf("ids %q, want uid 4242 gid 4343 groups 4343 4444", got)
	}
}

func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// procCgroup returns pid's cgroup path for a v1 controller ("" for v2).
func procCgroup(t *testing.T, pid, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return parts[2]
			}
		}
	}
	t.Fatalf("pid %s has no %q cgroup in %s", pid, controller, b)
	return ""
}

func hostInterfaces(t *testing.T) string {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	idx := func(name string) int {
		b, _ := os.ReadFile(filepath.Join("/sys/class/net", name, "ifindex"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.SortFunc(names, func(a, b string) int { return idx(a) - idx(b) })
	return strings.Join(names, "\n") + "\n"
}

// TestSandboxDNSConfigIsTheContainersResolvConf: a sandbox's DNSConfig becomes /etc/resolv.conf in its
// containers (as containerd does) while the host's stays as it was; a sandbox without one leaves the host's.
func TestSandboxDNSConfigIsTheContainersResolvConf(t *testing.T) {
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatalf("the test compares with the host's /etc/resolv.conf: %v", err)
	}
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("dns")
	sbCfg.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.244.0.1"},
		Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}}
	sb := runSandbox(t, rt, sbCfg)
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, containerConfig("c", "cat", "/etc/resolv.conf")))
	want := "search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.244.0.1\noptions ndots:5\n"
	if got := logText(readLog(t, st.LogPath), "stdout"); got != want {
		t.Errorf("the container's resolv.conf:\n%s\nwant:\n%s", got, want)
	}
	if after, _ := os.ReadFile("/etc/resolv.conf"); string(after) != string(host) {
		t.Errorf("the host's /etc/resolv.conf changed:\n%s", after)
	}

	plainCfg := sandboxConfig("nodns")
	plain := runSandbox(t, rt, plainCfg)
	st = waitExited(t, rt, startContainer(t, rt, plain, plainCfg, containerConfig("c", "cat", "/etc/resolv.conf")))
	if got := logText(readLog(t, st.LogPath), "stdout"); got != string(host) {
		t.Errorf("without a DNSConfig the container saw:\n%s\nwant the host's:\n%s", got, host)
	}
}
