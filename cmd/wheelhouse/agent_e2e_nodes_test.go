package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The agent e2e test's machines: the test's own network namespace is the server's host, and each node is a
// network namespace of its own on a bridge of that host — a LAN of three machines on one kernel. Everything
// here is removed when the test ends, also after a failure.

// lanPrefix is the LAN's /24 (the server's address is .1, node i is .2+i): a private range that no default
// container or VM network uses.
const lanPrefix = "192.168.250"

// lan is the host's bridge and the nodes on it.
type lan struct {
	bridge string
	hostIP string
	nodes  []lanNode
}

// lanNode is a node's network namespace: eth0 with ip on the LAN, a default route via the host.
type lanNode struct {
	name, netns, ip string
}

// nsPath is where `ip netns` keeps the namespace.
func (n lanNode) nsPath() string { return "/run/netns/" + n.netns }

// requireNamespaces skips the test when the machine cannot run nodes: no network namespaces for this user
// (not root), or no cgroup file system.
func requireNamespaces(t *testing.T) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go discards the thread with its new namespace
		errc <- unix.Unshare(unix.CLONE_NEWNET)
	}()
	if err := <-errc; err != nil {
		t.Skipf("this machine cannot create network namespaces for nodes (needs root or CAP_SYS_ADMIN): %v", err)
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skipf("this machine has no cgroup file system for pods: %v", err)
	}
}

// lans counts the LANs this test process made: each one's names are new, since the kernel removes a deleted
// namespace's veth pairs asynchronously and the next test's could otherwise still find them (seen in CI).
var lans atomic.Int32

// newLAN makes the bridge on the host with address .1 and one namespace per node name, each with a veth pair
// onto the bridge. Names carry the test process's ID, so a leftover of a killed run does not collide, and the
// LAN's number in the process.
func newLAN(t *testing.T, names ...string) *lan {
	t.Helper()
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the agent e2e test needs %s (iproute2, util-linux): %v", tool, err)
		}
	}
	if out := ipOut(t, "-4", "-o", "addr", "show", "to", lanPrefix+".0/24"); strings.TrimSpace(out) != "" {
		t.Fatalf("%s.0/24 is already used on this host (a leftover of an earlier run? delete its whe2e* links):\n%s", lanPrefix, out)
	}
	id := fmt.Sprintf("%04x%x", os.Getpid()&0xffff, lans.Add(1)&0xf) // bridge "whe2e" + 5, veths one more: ≤ 15 bytes
	l := &lan{bridge: "whe2e" + id, hostIP: lanPrefix + ".1"}
	t.Cleanup(func() { l.remove(t) })
	ip(t, "link", "add", l.bridge, "type", "bridge")
	ip(t, "addr", "add", l.hostIP+"/24", "dev", l.bridge)
	ip(t, "link", "set", l.bridge, "up")
	for i, name := range names {
		n := lanNode{name: name, netns: "whe2e-" + id + "-" + name, ip: fmt.Sprintf("%s.%d", lanPrefix, 2+i)}
		l.nodes = append(l.nodes, n)
		veth := fmt.Sprintf("%s%d", l.bridge, i)
		ip(t, "netns", "add", n.netns)
		ip(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
		ip(t, "link", "set", veth, "master", l.bridge, "up")
		ip(t, "-n", n.netns, "addr", "add", n.ip+"/24", "dev", "eth0")
		ip(t, "-n", n.netns, "link", "set", "lo", "up")
		ip(t, "-n", n.netns, "link", "set", "eth0", "up")
		ip(t, "-n", n.netns, "route", "add", "default", "via", l.hostIP)
	}
	return l
}

// remove deletes the namespaces (their veth pairs, bridges, routes and nftables tables go with them) and the
// host's bridge. The host ends of the veth pairs are deleted first, synchronously.
func (l *lan) remove(t *testing.T) {
	for i := range l.nodes {
		_ = exec.Command("ip", "link", "del", fmt.Sprintf("%s%d", l.bridge, i)).Run()
	}
	for _, n := range l.nodes {
		if out, err := exec.Command("ip", "netns", "del", n.netns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", n.netns, err, out)
		}
	}
	if out, err := exec.Command("ip", "link", "del", l.bridge).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
		t.Errorf("ip link del %s: %v\n%s", l.bridge, err, out)
	}
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	ipOut(t, args...)
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// agentProcess is `wheelhouse agent` of one node, run in the node's network namespace; it may be stopped and
// started again on the same data dir.
type agentProcess struct {
	bin, server string
	node        lanNode
	dataDir     string
	log         *logLines // every run's output, each headed by a line naming the run
	runs        int
	cmd         *exec.Cmd
	exited      chan struct{} // closed when the current run's cmd.Wait returned; then waitErr is set
	waitErr     error
	args        []string // more flags for every run (--runtime containerd ...)
}

// newAgent prepares the agent of node n; its cleanup kills it and whatever its pods left (shims, containers,
// mounts, cgroups) so that nothing survives the test.
func newAgent(t *testing.T, bin, podBin, server string, n lanNode) *agentProcess {
	a := &agentProcess{bin: bin, server: server, node: n, dataDir: t.TempDir(), log: &logLines{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent of %s log:\n%s", n.name, a.log.String())
		}
		a.kill(t)
		a.removeLeftovers(t, bin, podBin)
	})
	return a
}

// start runs the agent with token (empty: the identity in the data dir is reused).
//
// It runs under `nsenter --net`, not `ip netns exec`: the latter also gives the process a mount namespace of
// its own with a fresh /sys, where the cgroup hierarchies are not mounted, and pods' namespaces mounted in
// it would be lost to the next run of the agent.
func (a *agentProcess) start(t *testing.T, token string) {
	t.Helper()
	args := []string{"--net=" + a.node.nsPath(), "--", a.bin, "agent", "--server", a.server, "--data-dir", a.dataDir,
		"--node-name", a.node.name}
	args = append(args, a.args...)
	if token != "" {
		args = append(args, "--token", token)
	}
	cmd := exec.Command("nsenter", args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHEELHOUSE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	a.runs++
	fmt.Fprintf(a.log, "=== run %d of the agent of %s\n", a.runs, a.node.name)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the agent of %s: %v", a.node.name, err)
	}
	a.cmd, a.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		a.waitErr = cmd.Wait()
		close(exited)
	}(a.exited)
}

// running reports whether the current run has not exited.
func (a *agentProcess) running() bool {
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// stop sends sig to the agent's process group and waits for it to exit; SIGTERM must end it with status 0.
func (a *agentProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-a.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("signal %v to the agent of %s: %v", sig, a.node.name, err)
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent of %s still runs 30s after %v", a.node.name, sig)
	}
	if sig == syscall.SIGTERM && a.waitErr != nil {
		t.Errorf("the agent of %s exited with %v after SIGTERM, want status 0", a.node.name, a.waitErr)
	}
}

func (a *agentProcess) kill(t *testing.T) {
	if a.running() {
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.exited
	}
}

// removeLeftovers ends what the agent's pods left running (shims and containers outlive the agent by design):
// the processes of this test's binaries that are shims or containers, then unmounts what is mounted under
// the data dir and removes the pods' cgroups.
func (a *agentProcess) removeLeftovers(t *testing.T, bin, podBin string) {
	for _, pid := range leftoverPIDs(bin, podBin) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if pids := leftoverPIDs(bin, podBin); len(pids) > 0 {
		deadline := time.Now().Add(5 * time.Second)
		for len(leftoverPIDs(bin, podBin)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the killed processes are being reaped
		}
	}
	mounts, err := mountsUnder(a.dataDir)
	if err != nil {
		t.Errorf("list mounts: %v", err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
	sandboxes, _ := os.ReadDir(filepath.Join(a.dataDir, "runtime", "sandboxes"))
	for _, sb := range sandboxes {
		for _, pattern := range []string{"/sys/fs/cgroup/*/wheelhouse/pod-" + sb.Name(), "/sys/fs/cgroup/wheelhouse/pod-" + sb.Name()} {
			dirs, _ := filepath.Glob(pattern)
			for _, d := range dirs {
				removeCgroup(d)
			}
		}
	}
}

// leftoverPIDs are the processes running podBin, or bin as the runtime's shim or helper (argv[0]
// "wheelhouse-runtime:..."; the server runs bin too).
func leftoverPIDs(bin, podBin string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		argv, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if exe == podBin || (exe == bin && bytes.HasPrefix(argv, []byte("wheelhouse-runtime"))) {
			out = append(out, pid)
		}
	}
	return out
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, nil
}

// removeCgroup removes a cgroup directory and its children (rmdir only: cgroup files cannot be deleted).
func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	_ = unix.Rmdir(dir)
}
