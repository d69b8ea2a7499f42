package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// TestManagedContainerdAgent drives `wheelhouse agent --runtime containerd` without --containerd-endpoint on a
// machine where no containerd answers on the default socket (issue 22): the agent runs containerd itself under
// its data dir and says so, a pod runs from an image, a kill -9 of containerd is followed by a new containerd
// that re-adopts the pod (same container, no restart), stopping the agent stops containerd, and
// `wheelhouse agent cleanup` removes the pod from it.
func TestManagedContainerdAgent(t *testing.T) {
	requireNamespaces(t)
	if managed.Answers(t.Context(), "/run/containerd/containerd.sock", 2*time.Second) {
		t.Fatal("a system containerd answers on /run/containerd/containerd.sock: this test needs a machine without one")
	}
	l := newLAN(t, "node-m")
	n := l.nodes[0]
	c, token := newAgentCluster(t, l, "/podserver")
	c.podImage = containerdtest.ServerImage
	var a *agentProcess
	t.Cleanup(func() { // after the agent is killed, before the binary and the node's network go
		if out, err := exec.Command("nsenter", "--net="+n.nsPath(), "--", a.bin, "agent", "cleanup", "--data-dir", a.dataDir).CombinedOutput(); err != nil {
			t.Errorf("agent cleanup: %v\n%s", err, out)
		}
	})
	a = newAgent(t, c.bin, "", c.server.url, n)
	a.args = []string{"--runtime", "containerd", "--log-level", "debug"}
	a.start(t, token)
	mcfg := managed.Config{Dir: filepath.Join(a.dataDir, "containerd")}
	if err := mcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(mcfg.Dir, "containerd.pid")

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"the agent runs containerd", func(t *testing.T) {
			eventually(t, 60*time.Second, "node-m Ready", func() (bool, string) {
				node, err := c.cs.CoreV1().Nodes().Get(t.Context(), "node-m", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				ready := readyCondition(node)
				return ready.Status == corev1.ConditionTrue, ready.Message
			})
			if log := a.log.String(); !strings.Contains(log, "no containerd answers on the default socket; running one") ||
				!strings.Contains(log, "containerd output") {
				t.Errorf("the agent's log does not say it runs containerd, or has not its output at debug:\n%s", log)
			}
			if _, err := os.Stat(filepath.Join(mcfg.CNIConfDir, "10-wheelhouse.conflist")); err != nil {
				t.Errorf("no CNI configuration in the managed containerd's net.d: %v", err)
			}
			// No registry here: the images are imported, the pause image under the name the agent gives containerd.
			for _, img := range []containerdtest.Image{containerdtest.Pause(t), containerdtest.Server(t)} {
				ctr(t, mcfg.Socket, "images", "import", "--no-unpack=false", "--snapshotter", managed.Snapshotter, img.Tar)
			}
			ctr(t, mcfg.Socket, "images", "tag", containerdtest.PauseImage, kubelet.DefaultSandboxImage)
		}},
		{"a pod survives containerd's kill -9", func(t *testing.T) {
			c.k.must(c.podManifest("web", "serve", ""), "apply", "-f", "-")
			eventually(t, 60*time.Second, "web Running", func() (bool, string) {
				p := c.pod(t, "web")
				return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
			})
			before := c.pod(t, "web").Status.ContainerStatuses[0]
			first := readPIDFile(t, pidFile)
			if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "a new containerd", func() (bool, string) {
				b, _ := os.ReadFile(pidFile)
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return pid != 0 && pid != first && managed.Answers(t.Context(), mcfg.Socket, time.Second), string(b)
			})
			if !strings.Contains(a.log.String(), "containerd exited; restarting it") {
				t.Errorf("the agent did not log containerd's exit")
			}
			eventually(t, 60*time.Second, "node-m Ready again", func() (bool, string) {
				node, err := c.cs.CoreV1().Nodes().Get(t.Context(), "node-m", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				ready := readyCondition(node)
				return ready.Status == corev1.ConditionTrue, ready.Message
			})
			eventually(t, 60*time.Second, "web's container re-adopted: the same one, running, not restarted", func() (bool, string) {
				after := c.pod(t, "web").Status.ContainerStatuses[0]
				return after.ContainerID == before.ContainerID && after.RestartCount == before.RestartCount && after.State.Running != nil,
					fmt.Sprintf("%s restarts %d running %v; before: %s restarts %d", after.ContainerID, after.RestartCount,
						after.State.Running != nil, before.ContainerID, before.RestartCount)
			})
		}},
		{"stopping the agent stops containerd; cleanup removes the pod", func(t *testing.T) {
			pid := readPIDFile(t, pidFile)
			a.stop(t, syscall.SIGTERM)
			if managed.Alive(pid) {
				t.Errorf("containerd %d still runs after the agent stopped", pid)
			}
			out, err := exec.Command("nsenter", "--net="+n.nsPath(), "--", c.bin, "agent", "cleanup", "--data-dir", a.dataDir).CombinedOutput()
			if err != nil {
				t.Fatalf("wheelhouse agent cleanup: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "sandboxes=1") {
				t.Errorf("cleanup did not remove the pod's sandbox:\n%s", out)
			}
			if left := append(processesNaming(mcfg.Dir), processesNaming(mcfg.Socket)...); len(left) > 0 {
				t.Errorf("processes of the agent's containerd left after cleanup: %q", left)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { c.k.t = t; s.fn(t) }) {
			return // later steps build on earlier ones
		}
	}
}

// ctr runs containerd's own client on socket in the CRI plugin's namespace, failing the test if it fails.
func ctr(t *testing.T, socket string, args ...string) {
	t.Helper()
	args = append([]string{"--address", socket, "-n", containerdtest.Namespace}, args...)
	if out, err := exec.CommandContext(t.Context(), "ctr", args...).CombinedOutput(); err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readPIDFile reads a process ID from a PID file.
func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processesNaming lists the live processes whose command line names path (containerd's configuration, the
// shims' socket).
func processesNaming(path string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), path) && managed.Alive(pid) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
