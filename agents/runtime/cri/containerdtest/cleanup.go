package containerdtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cleanupTimeout bounds each waiting step of Close (containerd's exit, processes dying).
const cleanupTimeout = 10 * time.Second

// Close removes everything the instance created, in an order that works whether containerd is healthy,
// crashed or wedged:
//
//  1. through CRI (if containerd still runs), stop and remove every pod sandbox, which stops and removes its
//     containers, their shims, rootfs mounts, cgroups and shim sockets;
//  2. SIGTERM containerd, SIGKILL after 10 s;
//  3. SIGKILL leftover shims (containerd-shim-runc-v2 naming this instance's socket, root or state: shims
//     outlive containerd) and delete the sockets they leave in /run/containerd/s;
//  4. in every cgroup hierarchy, the cgroups named by a task ID of this instance (runc's cgroupfs driver names
//     the leaf after the container: /k8s.io/<id> by default, <cgroup_parent>/<id> when CRI's caller gives a
//     parent): SIGKILL their processes (the containers of a killed shim), then remove them;
//  5. unmount every mount under Dir (snapshot rootfs overlays, sandbox /dev/shm, netns bind mounts), deepest
//     first, detached;
//  6. remove Root, State and the socket dir (all of Dir if Launch created it); the last live instance of the
//     process also removes the host-wide directories that did not exist before the first one started (see
//     hostDirs).
//
// Every step runs even when an earlier one failed; the error joins what went wrong in any of them.
// Cgroup parents that CRI's caller names (LinuxPodSandboxConfig.cgroup_parent) are the caller's to remove.
// Close may be called more than once; later calls return the first one's result.
func (c *Containerd) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.cleanup() })
	return c.closeErr
}

// cleanup is Close's work, done once.
func (c *Containerd) cleanup() error {
	defer hostDirs.release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if c.cmd != nil {
		errs = append(errs, c.removePods(ctx), c.stop())
	}
	if c.conn != nil {
		_ = c.conn.Close()
	}
	ids := c.taskIDs()
	errs = append(errs, c.killShims())
	removeShimSockets(c.shimSockets())
	for _, h := range cgroupHierarchies() {
		errs = append(errs, removeCgroups(h, ids))
	}
	if err := c.unmountAll(); err != nil {
		errs = append(errs, err)
	} else {
		dirs := []string{c.Root, c.State, c.sockDir}
		if c.ownDir {
			dirs = []string{c.Dir, c.sockDir}
		}
		for _, d := range dirs {
			errs = append(errs, os.RemoveAll(d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("containerdtest: close: %w", err)
	}
	return nil
}

// running says whether containerd has not exited.
func (c *Containerd) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// removePods stops and removes every pod sandbox through CRI.
func (c *Containerd) removePods(ctx context.Context) error {
	if !c.running() {
		c.log.Warn("containerd had exited; forcing the cleanup", "err", c.waitErr)
		return nil
	}
	if c.conn == nil {
		return nil
	}
	rt := c.Runtime()
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// stop sends containerd SIGTERM and waits for it to exit, sending SIGKILL after cleanupTimeout.
func (c *Containerd) stop() error {
	if !c.running() {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(cleanupTimeout)
	defer timer.Stop()
	select {
	case <-c.exited:
		return nil
	case <-timer.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	return fmt.Errorf("containerd did not exit %s after SIGTERM; killed it", cleanupTimeout)
}

// taskIDs are the IDs of the tasks (runtime v2 bundles, any namespace) and of the CRI sandboxes and
// containers the instance still has on disk: after a clean removal, none.
func (c *Containerd) taskIDs() map[string]bool {
	ids := map[string]bool{}
	add := func(dir string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			ids[e.Name()] = true
		}
	}
	nss, _ := os.ReadDir(filepath.Join(c.State, "io.containerd.runtime.v2.task"))
	for _, ns := range nss {
		add(filepath.Join(c.State, "io.containerd.runtime.v2.task", ns.Name()))
	}
	for _, kind := range []string{"sandboxes", "containers"} {
		add(filepath.Join(c.Root, "io.containerd.grpc.v1.cri", kind))
		add(filepath.Join(c.State, "io.containerd.grpc.v1.cri", kind))
	}
	return ids
}

// ownShim says whether a command line is one of this instance's shims: "-address <Socket>", or a path under
// Root or State.
func (c *Containerd) ownShim(args []string) bool {
	if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	return slices.ContainsFunc(args[1:], func(a string) bool {
		return a == c.Socket || within(a, c.Root) || within(a, c.State)
	})
}

// killShims SIGKILLs the shims of this instance and waits until they are gone.
func (c *Containerd) killShims() error {
	var pids []int
	for _, p := range processes() {
		if c.ownShim(p.args) {
			c.log.Warn("killing a leftover shim", "pid", p.pid, "cmdline", strings.Join(p.args, " "))
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			pids = append(pids, p.pid)
		}
	}
	if err := waitGone(pids); err != nil {
		return fmt.Errorf("shims: %w", err)
	}
	return nil
}

// shimSockets are the sockets of the instance's shims that may outlive them, from the "address" file the
// runc v2 shim writes in each bundle ("unix:///run/containerd/s/<sha256>": the directory is hard-coded in
// containerd 1.6 whatever the state directory).
func (c *Containerd) shimSockets() []string {
	files, _ := filepath.Glob(filepath.Join(c.State, "io.containerd.runtime.v2.task", "*", "*", "address"))
	var socks []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "unix://"); ok {
			socks = append(socks, s)
		}
	}
	return socks
}

// removeShimSockets deletes the sockets of shims that were killed; a shim that exits normally has done so.
func removeShimSockets(socks []string) {
	for _, s := range socks {
		if filepath.Dir(s) == "/run/containerd/s" {
			_ = os.Remove(s)
		}
	}
}

// unmountAll unmounts every mount under Dir and the socket dir, deepest first (MNT_DETACH), and fails if
// some are left.
func (c *Containerd) unmountAll() error {
	mine := func(m string) bool { return within(m, c.Dir) || within(m, c.sockDir) }
	var errs []error
	for range 5 {
		var left []string
		for _, m := range mountPoints() {
			if mine(m) {
				left = append(left, m)
			}
		}
		if len(left) == 0 {
			return nil
		}
		// Deepest first: a parent detached before its children takes them along and they vanish.
		slices.SortFunc(left, func(a, b string) int { return len(b) - len(a) })
		for _, m := range left {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(append(errs, fmt.Errorf("mounts left under %s; not removing it", c.Dir))...)
}

// tail is the last n lines of containerd's log.
func (c *Containerd) tail(n int) string {
	b, err := os.ReadFile(c.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// within says whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// process is a process's PID and command line.
type process struct {
	pid  int
	args []string
}

// processes lists the machine's processes with a non-empty command line (kernel threads have none).
func processes() []process {
	entries, _ := os.ReadDir("/proc")
	var ps []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		ps = append(ps, process{pid: pid, args: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")})
	}
	return ps
}

// waitGone polls until every pid has exited (or is a zombie, waiting for its parent), for cleanupTimeout.
func waitGone(pids []int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(cleanupTimeout)
	for {
		pids = slices.DeleteFunc(pids, func(pid int) bool { return !alive(pid) })
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive %s after SIGKILL", pids, cleanupTimeout)
		}
		<-tick.C
	}
}

// alive says whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// mountPoints are the mount points of the test process's mount namespace, from /proc/self/mountinfo.
func mountPoints() []string {
	return mountinfo(func(fields []string) (string, bool) { return unescapeMount(fields[4]), true })
}

// cgroupHierarchies are the mount points of the cgroup (v1) and cgroup2 filesystems.
func cgroupHierarchies() []string {
	return mountinfo(func(fields []string) (string, bool) {
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) || (fields[i+1] != "cgroup" && fields[i+1] != "cgroup2") {
			return "", false
		}
		return unescapeMount(fields[4]), true
	})
}

// mountinfo applies pick to the fields of each line of /proc/self/mountinfo and collects what it keeps.
func mountinfo(pick func(fields []string) (string, bool)) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if v, ok := pick(fields); ok {
			out = append(out, v)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes, below the hierarchy mounted at root, every cgroup named by one of ids, after killing
// the processes in it.
func removeCgroups(root string, ids map[string]bool) error {
	if len(ids) == 0 {
		return nil
	}
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root && ids[d.Name()] {
			found = append(found, p)
		}
		return nil
	})
	var errs []error
	for _, cg := range found {
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroup SIGKILLs the processes of the cgroup at dir and its children until none is left, then removes
// them, deepest first, polling for cleanupTimeout: a killed process leaves the cgroup only once it is gone,
// which may be a little after it stops showing as alive.
func removeCgroup(dir string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(cleanupTimeout)
	for {
		err := killAndRemove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		<-tick.C
	}
}

// killAndRemove is one attempt of removeCgroup.
func killAndRemove(dir string) error {
	var cgs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			cgs = append(cgs, p)
		}
		return nil
	})
	var procs []string
	for _, cg := range cgs {
		b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				procs = append(procs, f)
			}
		}
	}
	if len(procs) > 0 {
		return fmt.Errorf("processes %s still in it", strings.Join(procs, ", "))
	}
	slices.Reverse(cgs) // WalkDir lists parents before children
	for _, cg := range cgs {
		if err := os.Remove(cg); err != nil {
			return err
		}
	}
	return nil
}

// hostDirs tracks the directories outside an instance's own that containerd and runc create on the host and
// never remove, shared by all instances: /run/containerd/s (shim sockets, a path hard-coded in containerd
// 1.6), /run/containerd, and k8s.io at the top of each cgroup hierarchy (runc's default cgroup parent for
// sandboxes without a cgroup_parent: containerd's default spec names /k8s.io/<id>). Those that did not exist
// when the first live instance of the process started are removed, if empty, when the last one is cleaned up.
// A containerd of another process (a parallel test package) may still be using them: removing a non-empty
// directory fails and is ignored.
var hostDirs hostDirSet

// hostDirSet is the type of hostDirs.
type hostDirSet struct {
	mu      sync.Mutex // guards live and created
	live    int        // instances started and not yet cleaned up
	created []string   // host directories absent when live went from 0 to 1, deepest first
}

// acquire counts an instance in, noting the host directories that do not exist yet if it is the first.
func (s *hostDirSet) acquire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == 0 {
		s.created = nil
		candidates := []string{"/run/containerd/s", "/run/containerd"}
		for _, h := range cgroupHierarchies() {
			candidates = append(candidates, filepath.Join(h, "k8s.io"))
		}
		for _, d := range candidates {
			if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
				s.created = append(s.created, d)
			}
		}
	}
	s.live++
}

// release counts an instance out; the last one removes the directories noted by acquire, if empty.
func (s *hostDirSet) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if s.live > 0 {
		return
	}
	for _, d := range s.created {
		_ = os.Remove(d)
	}
	s.created = nil
}
