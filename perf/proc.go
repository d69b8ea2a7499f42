package perf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a server or helper process the harness started. It runs in its own process group and is killed by
// the kernel if the harness dies (Pdeathsig), so a crash or a second Ctrl-C leaves nothing behind.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
	stop    sync.Once
}

// startChild starts cmd with its output going to logPath.
func startChild(name string, cmd *exec.Cmd, logPath string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and waits.
func (c *child) Stop(grace time.Duration) {
	c.stop.Do(func() {
		if c.exited() {
			return
		}
		_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
			<-c.done
		}
	})
}

// logTail is the end of the child's log, for error messages.
func (c *child) logTail() string { return tailFile(c.logPath, 2000) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// rssBytes is a process's resident set size (VmRSS in /proc/<pid>/status).
func rssBytes(pid int) (int64, error) {
	return procStatusKB(pid, "VmRSS:")
}

func procStatusKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// pssBytes is a process's proportional set size (shared pages divided among their users).
func pssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("smaps_rollup: no Pss")
}

// cpuTicks is the user+system CPU time a process has used, in clock ticks (USER_HZ, 100 on Linux). With
// reaped it adds the time of its children that have exited and been waited for.
func cpuTicks(pid int, reaped bool) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may contain spaces; fields after the closing parenthesis are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0
	}
	fields := f[11:13] // utime, stime
	if reaped {
		fields = f[11:15] // and cutime, cstime
	}
	var t int64
	for _, v := range fields {
		n, _ := strconv.ParseInt(v, 10, 64)
		t += n
	}
	return t
}

const clockTick = 100 // USER_HZ

// cpuTime is the CPU time a process has used, to better than cpuTicks' 10 ms, which truncates each process's
// time and so hides the share of many small processes (shims): the larger of cpuTicks and the sum of its live
// threads' run time in nanoseconds (/proc/<pid>/task/*/schedstat, which misses threads that have exited, as a
// Go thread locked to enter a namespace does). With reaped it adds, in ticks, the time of its children that
// have exited and been waited for.
func cpuTime(pid int, reaped bool) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var threads time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(b), " ")
		ns, _ := strconv.ParseInt(first, 10, 64)
		threads += time.Duration(ns)
	}
	tick := time.Second / clockTick
	t := max(threads, time.Duration(cpuTicks(pid, false))*tick)
	if reaped {
		t += time.Duration(cpuTicks(pid, true)-cpuTicks(pid, false)) * tick
	}
	return t
}

// childrenByParent maps each process to its children, from one pass over /proc.
func childrenByParent() map[int][]int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := map[int][]int{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		parent, _ := strconv.Atoi(f[1])
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[parent] = append(out[parent], pid)
	}
	return out
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int { return childrenByParent()[pid] }

// procGroup is a process and, optionally, its direct children (PostgreSQL's backends).
type procGroup struct {
	pid      int
	children bool
}

func (g procGroup) pids() []int {
	if g.pid == 0 {
		return nil
	}
	if !g.children {
		return []int{g.pid}
	}
	return append([]int{g.pid}, childrenOf(g.pid)...)
}

// ticks is the CPU used so far by the group. With children it counts the live children plus, through the
// parent's reaped-children time, those that have exited (PostgreSQL backends come and go with kine's pool).
func (g procGroup) ticks() int64 {
	if g.pid == 0 {
		return 0
	}
	t := cpuTicks(g.pid, g.children)
	if g.children {
		for _, p := range childrenOf(g.pid) {
			t += cpuTicks(p, false)
		}
	}
	return t
}

// pss is the group's summed proportional set size.
func (g procGroup) pss() int64 {
	var t int64
	for _, p := range g.pids() {
		if n, err := pssBytes(p); err == nil {
			t += n
		}
	}
	return t
}
