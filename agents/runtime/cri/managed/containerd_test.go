package managed_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// TestManagedLifecycle runs the agent's containerd for real: it starts and answers CRI, a pod survives a kill -9
// of containerd (the supervisor restarts it and the new containerd re-adopts the pod), ending Start's context
// leaves no containerd process, and nothing of a system containerd's is created or changed.
func TestManagedLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: containerd mounts snapshots, runc creates namespaces and cgroups")
	}
	system := systemState()
	removeHostDirsCreated(t)
	dir := t.TempDir()
	c, err := managed.New(managed.Config{Dir: dir, PauseImage: containerdtest.PauseImage, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("Start returned before containerd was ready: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("containerd not ready after a minute")
	}

	conn, err := managed.Dial(c.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	v, err := rt.Version(t.Context(), &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "containerd" {
		t.Fatalf("CRI Version = %v, %v; want containerd's", v, err)
	}
	importPause(t, c.Socket())
	sb, err := rt.RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(t)})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	first := c.PID()

	// kill -9: the supervisor starts a new containerd, which finds the pod still ready.
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a new containerd answering with the pod re-adopted", func() (bool, string) {
		pid := c.PID()
		if pid == 0 || pid == first {
			return false, fmt.Sprintf("pid %d", pid)
		}
		st, err := rt.PodSandboxStatus(t.Context(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
		if err != nil {
			return false, err.Error()
		}
		return st.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY, st.Status.State.String()
	})
	second := c.PID()
	if _, err := rt.StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Errorf("StopPodSandbox after the restart: %v", err)
	}
	if _, err := rt.RemovePodSandbox(t.Context(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Errorf("RemovePodSandbox after the restart: %v", err)
	}

	stop()
	if err := <-done; err != nil {
		t.Errorf("Start = %v after its context ended, want nil", err)
	}
	for _, pid := range []int{first, second} {
		if managed.Alive(pid) {
			t.Errorf("containerd %d still alive after Start returned", pid)
		}
	}
	if left := processesNaming(dir); len(left) > 0 {
		t.Errorf("processes naming the instance's dir after Start returned: %q", left)
	}
	if c.PID() != 0 {
		t.Errorf("PID() = %d after Start returned, want 0", c.PID())
	}
	if got := systemState(); got != system {
		t.Errorf("a system containerd's files changed:\nbefore: %s\nafter:  %s", system, got)
	}
	netns, _ := filepath.Glob(filepath.Join(c.State(), "netns", "*"))
	t.Logf("pod network namespaces were under %s (left: %q)", c.State(), netns)
}

// TestManagedStopsLeftover checks that Start stops a containerd of the same instance that an earlier process
// left running, and refuses to start where another runtime answers on the socket.
func TestManagedStopsLeftover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: containerd mounts snapshots, runc creates namespaces and cgroups")
	}
	dir := t.TempDir()
	cfg := managed.Config{Dir: dir, Logger: testLogger(t)}
	c, err := managed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A leftover: containerd with the instance's configuration that is not Start's child.
	left := exec.Command("containerd", "--config", c.ConfigPath())
	if err := managed.StartChild(left); err != nil {
		t.Fatal(err)
	}
	go left.Wait() //nolint:errcheck // reaped so that it does not linger as a zombie
	if err := os.WriteFile(filepath.Join(dir, "containerd.pid"), []byte(fmt.Sprint(left.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the leftover answering", func() (bool, string) {
		return managed.Answers(t.Context(), c.Socket(), time.Second), "no answer"
	})

	other, err := managed.New(managed.Config{Dir: t.TempDir(), Socket: c.Socket(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "another runtime answers") {
		t.Errorf("Start on a socket another containerd serves = %v, want a refusal", err)
	}

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("Start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("containerd not ready after a minute")
	}
	if managed.Alive(left.Process.Pid) || c.PID() == left.Process.Pid {
		t.Errorf("the leftover containerd %d is still running", left.Process.Pid)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Start = %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  managed.Config
		want string
	}{
		{"no dir", managed.Config{}, "Dir is required"},
		{"long socket", managed.Config{Dir: "/tmp", Socket: "/tmp/" + strings.Repeat("s", 110) + ".sock"}, "longer than"},
		{"defaults", managed.Config{Dir: "/tmp", Socket: "/tmp/x.sock"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if _, lerr := exec.LookPath("containerd"); lerr != nil && !errors.Is(err, managed.ErrNoBinary) {
					t.Errorf("Validate without containerd installed = %v, want ErrNoBinary", err)
				}
				if err == nil && (tc.cfg.CNIConfDir != "/tmp/net.d" || tc.cfg.StopGrace != 10*time.Second || tc.cfg.RestrictOOMScoreAdj == nil) {
					t.Errorf("defaults not filled in: %+v", tc.cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// systemState describes what a system containerd keeps on this machine: its root, state, runc state,
// configuration and the host's netns dir (each path, and for files their size and modification time).
func systemState() string {
	var b strings.Builder
	for _, p := range []string{"/var/lib/containerd", "/run/containerd/containerd.sock", "/run/containerd/runc",
		"/run/containerd/io.containerd.runtime.v2.task", "/etc/containerd/config.toml", "/var/run/netns"} {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s: absent; ", p)
			continue
		}
		fmt.Fprintf(&b, "%s: %s %d %s; ", p, fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
	}
	return b.String()
}

// removeHostDirsCreated removes, when the test ends, the shared directories containerd 1.6 creates whatever its
// configuration (/run/containerd/s for shim sockets) if they did not exist before and are empty.
func removeHostDirsCreated(t *testing.T) {
	var created []string
	for _, d := range []string{"/run/containerd/s", "/run/containerd"} {
		if _, err := os.Lstat(d); err != nil {
			created = append(created, d)
		}
	}
	t.Cleanup(func() {
		for _, d := range created {
			_ = os.Remove(d)
		}
	})
}

// processesNaming lists the command lines of the processes whose command line names dir.
func processesNaming(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil && managed.Alive(pid) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// importPause builds the test pause image and imports it with ctr into the CRI plugin's namespace.
func importPause(t *testing.T, socket string) {
	t.Helper()
	img := containerdtest.Pause(t)
	out, err := exec.CommandContext(t.Context(), "ctr", "--address", socket, "-n", containerdtest.Namespace,
		"images", "import", "--no-unpack=false", "--snapshotter", managed.Snapshotter, img.Tar).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
}

// sandboxConfig is a pod in the node's network namespace (no CNI needed), under a cgroup parent of the test's
// own, removed when the test ends.
func sandboxConfig(t *testing.T) *runtimeapi.PodSandboxConfig {
	parent := "/wheelhouse-managed-test-" + filepath.Base(t.TempDir())
	t.Cleanup(func() {
		hs, _ := filepath.Glob("/sys/fs/cgroup/*")
		for _, h := range append(hs, "/sys/fs/cgroup") {
			_ = os.Remove(filepath.Join(h, parent))
		}
	})
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "managed", Namespace: "default", Uid: "uid-managed"},
		LogDirectory: t.TempDir(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: parent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
}

// testLogger logs to the test, containerd's output included.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventually polls cond every 50 ms until it holds or timeout passes; cond says what it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
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
