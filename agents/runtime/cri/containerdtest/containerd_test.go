package containerdtest_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

func TestImportImages(t *testing.T) {
	c := containerdtest.Start(t, containerdtest.Options{})
	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))

	list, err := c.Images().ListImages(t.Context(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	var tags []string
	for _, img := range list.Images {
		tags = append(tags, img.RepoTags...)
	}
	for _, want := range []string{containerdtest.PauseImage, containerdtest.ServerImage} {
		if !slices.Contains(tags, want) {
			t.Errorf("ListImages tags = %q, want %s among them", tags, want)
		}
	}
}

func TestPodLifecycle(t *testing.T) {
	c := containerdtest.Start(t, containerdtest.Options{})
	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
	rt := c.Runtime()

	began := time.Now()
	sbCfg := sandboxConfig(t, "lifecycle")
	sb := must(rt.RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sbCfg}))(t).PodSandboxId
	t.Logf("RunPodSandbox took %s", time.Since(began).Round(time.Millisecond))

	began = time.Now()
	id := startServer(t, c, sb, sbCfg)
	eventually(t, 10*time.Second, "server RUNNING", func() (bool, string) {
		st := must(rt.ContainerStatus(t.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id}))(t).Status
		return st.State == runtimeapi.ContainerState_CONTAINER_RUNNING, st.State.String()
	})
	t.Logf("container create+start took %s", time.Since(began).Round(time.Millisecond))
	logPath := filepath.Join(sbCfg.LogDirectory, "server", "0.log")
	eventually(t, 10*time.Second, "podserver's greeting in its log", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "serving on 127.0.0.1:0"), string(b)
	})

	// The streaming server (exec, attach, port-forward) listens on 127.0.0.1 with a kernel-chosen port.
	exec := must(rt.Exec(t.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"/podserver", "echo", "hi"}, Stdout: true}))(t)
	if u := must(url.Parse(exec.Url))(t); u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Errorf("Exec URL = %s, want one on 127.0.0.1 and a port", exec.Url)
	}

	if _, err := rt.StopContainer(t.Context(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st := must(rt.ContainerStatus(t.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id}))(t).Status
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after StopContainer the state is %s, want EXITED", st.State)
	}
	if _, err := rt.RemoveContainer(t.Context(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := rt.StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := rt.RemovePodSandbox(t.Context(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if sbs := must(rt.ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{}))(t).Items; len(sbs) != 0 {
		t.Errorf("ListPodSandbox after removal = %v, want none", sbs)
	}
}

// TestLaunch drives the API without testing.TB, as the perf harness does: Launch with a directory of its own,
// BuildPause and Import, a pod, PID and Shims; then Close, which leaves nothing (the directory included), and a
// second Close, which returns the first one's result.
func TestLaunch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip(containerdtest.ErrNeedsRoot)
	}
	c, err := containerdtest.Launch(t.Context(), containerdtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close()
		}
	})
	pause, err := containerdtest.BuildPause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Import(t.Context(), pause); err != nil {
		t.Fatal(err)
	}
	if got, want := c.PID(), containerdPID(t, c); got != want {
		t.Errorf("PID() = %d, want %d (the process running containerd --config %s)", got, want, c.Config)
	}
	sb := must(c.Runtime().RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(t, "launch")}))(t).PodSandboxId
	if got, want := len(c.Shims()), len(shims(c)); got != 1 || want != 1 {
		t.Errorf("Shims() found %d, the test's scan %d; want the sandbox's one", got, want)
	}
	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, left := range append(leftovers(c, []string{sb}), leftDir(c.Dir)...) {
		t.Errorf("after Close: %s", left)
	}
}

// leftDir says that dir is still there, if it is.
func leftDir(dir string) []string {
	if _, err := os.Lstat(dir); err == nil {
		return []string{"path " + dir}
	}
	return nil
}

// TestParallelInstances runs two instances at once, each with a pod, and checks each sees only its own.
func TestParallelInstances(t *testing.T) {
	for i := range 2 {
		t.Run(fmt.Sprintf("instance%d", i), func(t *testing.T) {
			t.Parallel()
			c := containerdtest.Start(t, containerdtest.Options{})
			c.ImportImages(t, containerdtest.Pause(t))
			rt := c.Runtime()
			name := fmt.Sprintf("parallel-%d", i)
			sb := must(rt.RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(t, name)}))(t).PodSandboxId
			sbs := must(rt.ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{}))(t).Items
			if len(sbs) != 1 || sbs[0].Id != sb || sbs[0].Metadata.Name != name || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
				t.Errorf("ListPodSandbox = %v, want only %s (%s), ready", sbs, sb, name)
			}
		})
	}
}

// TestCleanupLeavesNothing leaves a running pod behind for the cleanup, with containerd healthy and with
// containerd killed (its shim and containers then outlive it), and checks nothing of the instance is left.
func TestCleanupLeavesNothing(t *testing.T) {
	for _, kill := range []bool{false, true} {
		var c *containerdtest.Containerd
		var ids []string
		name := map[bool]string{false: "containerd-healthy", true: "containerd-killed"}[kill]
		t.Run(name, func(t *testing.T) {
			c = containerdtest.Start(t, containerdtest.Options{})
			c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
			sbCfg := sandboxConfig(t, name)
			sb := must(c.Runtime().RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sbCfg}))(t).PodSandboxId
			ids = []string{sb, startServer(t, c, sb, sbCfg)}
			if !kill {
				return
			}
			pid := containerdPID(t, c)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "containerd gone", func() (bool, string) {
				_, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", pid))
				return err != nil, fmt.Sprint(err)
			})
			if n := len(shims(c)); n == 0 {
				t.Errorf("no shim outlived containerd; the test does not exercise the forced cleanup")
			}
		})
		if c == nil || len(ids) != 2 {
			t.Fatalf("%s: the instance did not get as far as a running pod", name)
		}
		for _, left := range leftovers(c, ids) {
			t.Errorf("%s: after cleanup: %s", name, left)
		}
	}
}

// leftovers lists what of the instance is still on the machine: processes naming its paths, mounts under its
// directory, its directories and socket, the shim sockets and cgroups of the pod ids.
func leftovers(c *containerdtest.Containerd, ids []string) []string {
	var out []string
	for _, p := range procs() {
		if strings.Contains(p, c.Socket) || strings.Contains(p, c.Dir) {
			out = append(out, "process "+p)
		}
	}
	for _, m := range containerdtest.MountPoints() {
		if strings.HasPrefix(m, c.Dir+"/") {
			out = append(out, "mount "+m)
		}
	}
	paths := []string{c.Root, c.State, c.Socket, filepath.Dir(c.Socket)}
	for _, id := range ids {
		paths = append(paths, shimSocket(c, id))
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, "path "+p)
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && slices.Contains(ids, d.Name()) {
			out = append(out, "cgroup "+p)
		}
		return nil
	})
	return out
}

// shimSocket is where containerd 1.6's runc v2 shim for task id puts its socket:
// /run/containerd/s/sha256(<containerd address>/<namespace>/<id>).
func shimSocket(c *containerdtest.Containerd, id string) string {
	return fmt.Sprintf("/run/containerd/s/%x", sha256.Sum256([]byte(filepath.Join(c.Socket, containerdtest.Namespace, id))))
}

// containerdPID finds the instance's containerd by its command line.
func containerdPID(t *testing.T, c *containerdtest.Containerd) int {
	t.Helper()
	for _, p := range procs() {
		pid, cmdline, _ := strings.Cut(p, " ")
		if strings.Contains(cmdline, "containerd --config "+c.Config) {
			return must(strconv.Atoi(pid))(t)
		}
	}
	t.Fatalf("no process runs containerd --config %s", c.Config)
	return 0
}

// shims are the command lines of the instance's shims.
func shims(c *containerdtest.Containerd) []string {
	var out []string
	for _, p := range procs() {
		if strings.Contains(p, "containerd-shim-runc-v2") && strings.Contains(p, c.Socket) {
			out = append(out, p)
		}
	}
	return out
}

// procs are the machine's processes as "PID command line".
func procs() []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		pid := filepath.Base(filepath.Dir(f))
		out = append(out, pid+" "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return out
}

// sandboxConfig is a pod in the node's network namespace (no CNI needed) logging to a temp dir. It has no
// Hostname, as the kubelet gives none to host-network pods: they share the node's UTS namespace and runc
// refuses to set a hostname there ("unable to set hostname without a private UTS namespace").
func sandboxConfig(t *testing.T, name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		LogDirectory: t.TempDir(),
		Labels:       map[string]string{"io.kubernetes.pod.name": name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
}

// startServer creates and starts a podserver container listening on a free loopback port in sandbox sb.
func startServer(t *testing.T, c *containerdtest.Containerd, sb string, sbCfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	rt := c.Runtime()
	id := must(rt.CreateContainer(t.Context(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "server"},
			Image:    &runtimeapi.ImageSpec{Image: containerdtest.ServerImage},
			Args:     []string{"serve", "-listen", "127.0.0.1:0"},
			LogPath:  "server/0.log",
		},
		SandboxConfig: sbCfg,
	}))(t).ContainerId
	if _, err := rt.StartContainer(t.Context(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

// must turns (value, error) into a value, failing the test on an error: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes; cond says what it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last saw: %s", timeout, what, saw)
		}
		<-tick.C
	}
}

// TestNetNS runs containerd in a network namespace of the test's and checks that containerd and a
// host-network pod are in it.
func TestNetNS(t *testing.T) {
	ns := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(ns, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+ns, "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare --net: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = syscall.Unmount(ns, syscall.MNT_DETACH) })
	c := containerdtest.Start(t, containerdtest.Options{NetNS: ns})
	c.ImportImages(t, containerdtest.Pause(t))
	want := netnsOf(t, ns)
	if got := netnsOf(t, fmt.Sprintf("/proc/%d/ns/net", containerdPID(t, c))); got != want {
		t.Errorf("containerd's network namespace is %s, want %s", got, want)
	}
	rt := c.Runtime()
	sb := must(rt.RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(t, "netns")}))(t).PodSandboxId
	st := must(rt.PodSandboxStatus(t.Context(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb, Verbose: true}))(t)
	var info struct{ Pid int }
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("sandbox status info %q: %v", st.Info["info"], err)
	}
	if got := netnsOf(t, fmt.Sprintf("/proc/%d/ns/net", info.Pid)); got != want {
		t.Errorf("the host-network pod's network namespace is %s, want %s", got, want)
	}
}

// netnsOf identifies the network namespace at path (an nsfs file) by device and inode.
func netnsOf(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}
