package cri_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/network"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/runtimetest"
)

var podCIDR = netip.MustParsePrefix("10.244.0.0/24")

// node is a "node" as the agent makes it with containerd: a network namespace with the agent's pod network,
// its CNI configuration written by the network, and a real containerd in that namespace using it.
type node struct {
	ns         string
	rt         *cri.Runtime
	cgroupRoot string
}

func startNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	ns := netnstest.New(t, dir, "node")
	n, err := network.New(network.Config{PodCIDR: podCIDR, ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		StateDir: filepath.Join(dir, "network"), NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	cniDir := filepath.Join(dir, "cni")
	if err := n.WriteCNIConfig(cniDir, filepath.Join(dir, "ipam")); err != nil {
		t.Fatal(err)
	}
	c := containerdtest.Start(t, containerdtest.Options{NetNS: ns, CNIConfDir: cniDir})
	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
	root := fmt.Sprintf("/wheelhouse-test-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := cri.Open(ctx, cri.Config{Endpoint: c.Socket, CgroupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		for _, m := range cgroupDirs(t, root) {
			os.Remove(m) // the root itself; the pods' are RemovePodSandbox's (checked by the tests)
		}
	})
	// The network reports ready once containerd has loaded the CNI configuration.
	poll(t, 20*time.Second, func() error {
		if ok, why := r.Ready(t.Context()); !ok {
			return errors.New(why)
		}
		return nil
	})
	return &node{ns: ns, rt: r, cgroupRoot: root}
}

// poll calls fn every 50 ms until it succeeds, failing the test with its last error after timeout.
func poll(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(timeout)
	for err := fn(); err != nil; err = fn() {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		<-tick.C
	}
}

// cgroupDirs are the directories of the cgroup at path in every mounted hierarchy that has it.
func cgroupDirs(t *testing.T, path string) []string {
	t.Helper()
	mounts, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		t.Fatal(err)
	}
	mounts = append(mounts, "/sys/fs/cgroup")
	var out []string
	for _, m := range mounts {
		if fi, err := os.Stat(filepath.Join(m, path)); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(m, path))
		}
	}
	return out
}

// TestContainerdConformance: the runtime suite against a real containerd, through the client.
func TestContainerdConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New:         func(t *testing.T) runtime.Runtime { return startNode(t).rt },
		LongRunning: []string{"/podserver", "tick"},
		Succeeds:    []string{"/podserver", "echo"},
		Image:       containerdtest.ServerImage,
	})
}

// TestContainerdPod: a pod as the kubelet runs it — on the node's pod network (an address of the pod CIDR, reached
// from the node), its cgroup under the root, logs in the CRI format, exec with exit codes and timeouts — and the
// pod's cgroup gone after RemovePodSandbox.
func TestContainerdPod(t *testing.T) {
	nd := startNode(t)
	ctx := t.Context()
	logDir := t.TempDir()
	sbCfg := runtimetest.SandboxConfig("web")
	sbCfg.LogDirectory = logDir
	sbCfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "pod" + sbCfg.Metadata.Uid}
	sb, err := nd.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := nd.rt.PodSandboxStatus(ctx, sb, false)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(st.GetStatus().GetNetwork().GetIp())
	if err != nil || !podCIDR.Contains(ip) || ip == podCIDR.Addr().Next() {
		t.Fatalf("pod IP %q (%v), want a pod address of %v", st.GetStatus().GetNetwork().GetIp(), err, podCIDR)
	}
	if dirs := cgroupDirs(t, filepath.Join(nd.cgroupRoot, "pod"+sbCfg.Metadata.Uid)); len(dirs) == 0 {
		t.Errorf("the pod's cgroup is not under %s", nd.cgroupRoot)
	}

	cfg := runtimetest.ContainerConfig("server", []string{"/podserver", "serve"})
	cfg.Image.Image = containerdtest.ServerImage
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "POD_NAME", Value: []byte("web")}}
	id, err := nd.rt.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	if got := nd.rt.SandboxImage(ctx); got != containerdtest.PauseImage {
		t.Errorf("SandboxImage %q, want %q", got, containerdtest.PauseImage)
	}

	t.Run("reachable from the node", func(t *testing.T) {
		var body string
		poll(t, 20*time.Second, func() error {
			// The connection is made on this thread, in the node's namespace (an http.Client dials on another).
			var conn net.Conn
			if err := netnstest.Run(nd.ns, func() (err error) {
				conn, err = net.DialTimeout("tcp", netip.AddrPortFrom(ip, 8080).String(), time.Second)
				return err
			}); err != nil {
				return err
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
				return err
			}
			req, err := http.NewRequest(http.MethodGet, "http://"+conn.RemoteAddr().String()+"/", nil)
			if err != nil {
				return err
			}
			if err := req.Write(conn); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			body = string(b)
			return err
		})
		if body != "hello from web\n" {
			t.Errorf("answer %q", body)
		}
	})

	t.Run("log", func(t *testing.T) {
		cst, err := nd.rt.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(logDir, cfg.LogPath); cst.Status.LogPath != want {
			t.Fatalf("log path %q, want %q", cst.Status.LogPath, want)
		}
		data, err := os.ReadFile(cst.Status.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		// CRI's format: time stream tag message.
		if line, _, _ := strings.Cut(string(data), "\n"); len(strings.Fields(line)) < 4 || !strings.Contains(line, " stdout F ") && !strings.Contains(line, " stderr F ") {
			t.Errorf("log line %q is not in the CRI format", line)
		}
	})

	t.Run("exec", func(t *testing.T) {
		out, _, err := nd.rt.ExecSync(ctx, id, []string{"/podserver", "echo", "hi"}, 10*time.Second)
		if err != nil || string(out) != "hi\n" {
			t.Errorf("echo: %q, %v", out, err)
		}
		_, _, err = nd.rt.ExecSync(ctx, id, []string{"/podserver", "crash"}, 10*time.Second)
		var exit utilexec.CodeExitError
		if !errors.As(err, &exit) || exit.Code != 3 {
			t.Errorf("crash: %v, want exit code 3", err)
		}
		if _, _, err := nd.rt.ExecSync(ctx, id, []string{"/podserver", "tick"}, time.Second); !errors.Is(err, runtime.ErrCommandTimedOut) {
			t.Errorf("tick past its timeout: %v, want runtime.ErrCommandTimedOut", err)
		}
	})

	if err := nd.rt.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := nd.rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if dirs := cgroupDirs(t, filepath.Join(nd.cgroupRoot, "pod"+sbCfg.Metadata.Uid)); len(dirs) != 0 {
		t.Errorf("the pod's cgroups are left: %v", dirs)
	}
}

// TestRemoveOwnSandboxes: uninstalling (`wheelhouse agent cleanup`) removes the agent's sandboxes and their
// cgroups from containerd, and leaves a sandbox someone else made on the same containerd.
func TestRemoveOwnSandboxes(t *testing.T) {
	nd := startNode(t)
	ctx := t.Context()
	var ours []*runtimeapi.PodSandboxConfig
	for _, name := range []string{"ours-1", "ours-2"} {
		cfg := runtimetest.SandboxConfig(name)
		cfg.LogDirectory = t.TempDir()
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "pod" + cfg.Metadata.Uid}
		if _, err := nd.rt.RunPodSandbox(ctx, cfg, ""); err != nil {
			t.Fatal(err)
		}
		ours = append(ours, cfg)
	}
	foreignCfg := runtimetest.SandboxConfig("foreign")
	foreignCfg.LogDirectory = t.TempDir()
	foreign, err := nd.rt.RuntimeService.RunPodSandbox(ctx, foreignCfg, "") // not through the agent's runtime
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = nd.rt.StopPodSandbox(context.Background(), foreign)
		_ = nd.rt.RemovePodSandbox(context.Background(), foreign)
	})
	n, err := nd.rt.RemoveOwnSandboxes(ctx)
	if err != nil || n != 2 {
		t.Fatalf("removed %d sandboxes, %v; want 2", n, err)
	}
	left, err := nd.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].GetId() != foreign {
		t.Fatalf("left %v, want only the foreign sandbox %s", left, foreign)
	}
	for _, cfg := range ours {
		if dirs := cgroupDirs(t, filepath.Join(nd.cgroupRoot, "pod"+cfg.Metadata.Uid)); len(dirs) != 0 {
			t.Errorf("%s's cgroups are left: %v", cfg.Metadata.Name, dirs)
		}
	}
	if n, err := nd.rt.RemoveOwnSandboxes(ctx); err != nil || n != 0 {
		t.Fatalf("a second run removed %d, %v", n, err)
	}
}
