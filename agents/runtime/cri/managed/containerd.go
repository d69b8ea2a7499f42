package managed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Containerd is a containerd the caller runs as a child process (New, then Start). Its methods are safe for
// concurrent use.
type Containerd struct {
	cfg Config
	log *slog.Logger

	ready     chan struct{} // closed when a start is first ready
	readyOnce sync.Once

	mu   sync.Mutex // guards proc
	proc *proc      // the running containerd, nil between runs
}

// proc is one run of containerd.
type proc struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for; err is set before
	err     error
	outMu   sync.Mutex // guards out
	out     []string   // the last outputLines lines of output
	started time.Time
}

// outputLines is how many of containerd's last output lines an exit's warning carries.
const outputLines = 10

// New validates cfg (filling in its defaults), creates the instance's directories (0700) and writes its
// configuration (WriteConfig) to Dir/config.toml. It starts nothing.
func New(cfg Config) (*Containerd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := cfg.layout()
	for _, d := range []string{cfg.Dir, l.Root, l.State, cfg.CNIConfDir, filepath.Dir(cfg.Socket)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("managed: %w", err)
		}
	}
	c := &Containerd{cfg: cfg, log: cfg.Logger.With("component", "containerd"), ready: make(chan struct{})}
	if err := WriteConfig(c.ConfigPath(), l); err != nil {
		return nil, err
	}
	return c, nil
}

// Socket is the path of containerd's gRPC socket, where the CRI services answer.
func (c *Containerd) Socket() string { return c.cfg.Socket }

// Root and State are containerd's root and state directories.
func (c *Containerd) Root() string  { return c.cfg.layout().Root }
func (c *Containerd) State() string { return c.cfg.layout().State }

// CNIConfDir is the CNI configuration directory containerd reads; the caller writes the pod network's there.
func (c *Containerd) CNIConfDir() string { return c.cfg.CNIConfDir }

// ConfigPath is the path of the configuration New wrote.
func (c *Containerd) ConfigPath() string { return filepath.Join(c.cfg.Dir, "config.toml") }

// pidFile records the running containerd's process ID, for a later agent to stop one it left behind.
func (c *Containerd) pidFile() string { return filepath.Join(c.cfg.Dir, "containerd.pid") }

// Ready is closed once containerd has first answered CRI and reported RuntimeReady.
func (c *Containerd) Ready() <-chan struct{} { return c.ready }

// PID is the running containerd's process ID, 0 while none runs.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Start runs containerd until ctx ends, then stops it (SIGTERM; SIGKILL after StopGrace) and returns nil once
// it has exited. A containerd that exits on its own is started again after RestartBackoff (doubling after each
// start that never became ready, up to MaxRestartBackoff); its pods' shims outlive it and the next start
// re-adopts them. Before the first start, a containerd of this instance left running (by an agent that died
// without stopping it) is stopped, and Start fails if something else answers on the socket. Start fails, too,
// when containerd cannot be executed at all.
func (c *Containerd) Start(ctx context.Context) error {
	if err := c.stopLeftover(); err != nil {
		return err
	}
	wait := c.cfg.RestartBackoff
	for {
		p, err := c.launch()
		if err != nil {
			return err
		}
		ready := c.waitReady(ctx, p)
		select {
		case <-ctx.Done():
			return c.stop(p)
		case <-p.exited:
		}
		c.forget(p)
		if ready {
			wait = c.cfg.RestartBackoff
		}
		c.log.Warn("containerd exited; restarting it", "err", p.err, "ran", time.Since(p.started).Round(time.Millisecond),
			"restartIn", wait, "lastOutput", p.tail())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if !ready {
			wait = min(2*wait, c.cfg.MaxRestartBackoff)
		}
	}
}

// launch starts one run of containerd, its output logged at debug, and records its process ID.
func (c *Containerd) launch() (*proc, error) {
	// A stale socket from a run that was killed would make containerd's listen fail.
	for _, s := range []string{c.cfg.Socket, c.cfg.ttrpcSocket()} {
		_ = os.Remove(s)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("managed: %w", err)
	}
	p := &proc{cmd: exec.Command(c.cfg.Binary, "--config", c.ConfigPath()), exited: make(chan struct{}), started: time.Now()}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	err = StartChild(p.cmd)
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("managed: start %s: %w", c.cfg.Binary, err)
	}
	go p.logOutput(r, c.log)
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	pid := p.cmd.Process.Pid
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		c.log.Warn("cannot record containerd's process ID", "err", err)
	}
	c.log.Info("containerd started", "pid", pid, "socket", c.cfg.Socket, "config", c.ConfigPath())
	return p, nil
}

// waitReady waits for p to become ready (ReadyTimeout at most) and says whether it did.
func (c *Containerd) waitReady(ctx context.Context, p *proc) bool {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	conn, err := WaitReady(rctx, c.cfg.Socket, p.exited)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("containerd did not become ready", "err", err, "lastOutput", p.tail())
		}
		return false
	}
	_ = conn.Close()
	c.log.Info("containerd ready", "pid", p.cmd.Process.Pid, "after", time.Since(p.started).Round(time.Millisecond))
	c.readyOnce.Do(func() { close(c.ready) })
	return true
}

// stop ends p: SIGTERM, then SIGKILL after StopGrace. It returns once p has exited.
func (c *Containerd) stop(p *proc) error {
	defer c.forget(p)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(c.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
		c.log.Info("containerd stopped", "pid", p.cmd.Process.Pid)
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	c.log.Warn("containerd did not exit after SIGTERM; killed it", "pid", p.cmd.Process.Pid, "grace", c.cfg.StopGrace)
	return nil
}

// forget clears the record of p, which has exited.
func (c *Containerd) forget(p *proc) {
	c.mu.Lock()
	if c.proc == p {
		c.proc = nil
	}
	c.mu.Unlock()
	_ = os.Remove(c.pidFile())
}

// logOutput logs each line of containerd's output at debug and keeps the last ones.
func (p *proc) logOutput(r io.ReadCloser, log *slog.Logger) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		log.Debug("containerd output", "pid", p.cmd.Process.Pid, "line", line)
		p.outMu.Lock()
		p.out = append(p.out, line)
		if len(p.out) > outputLines {
			p.out = slices.Delete(p.out, 0, len(p.out)-outputLines)
		}
		p.outMu.Unlock()
	}
}

// tail is the last lines of p's output read so far.
func (p *proc) tail() string {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	return strings.Join(p.out, "\n")
}

// stopLeftover stops a containerd of this instance still running from an earlier Start whose process died
// without stopping it (found by the PID file and its command line naming this configuration), and fails when
// anything else answers on the socket.
func (c *Containerd) stopLeftover() error {
	if b, err := os.ReadFile(c.pidFile()); err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && c.isOurs(pid) {
			c.log.Warn("stopping a containerd left running by an earlier agent", "pid", pid)
			if err := stopPID(pid, c.cfg.StopGrace); err != nil {
				return fmt.Errorf("managed: stop the containerd left running: %w", err)
			}
		}
		_ = os.Remove(c.pidFile())
	}
	if Answers(context.Background(), c.cfg.Socket, 2*time.Second) {
		return fmt.Errorf("managed: another runtime answers on %s; not starting containerd there", c.cfg.Socket)
	}
	return nil
}

// isOurs says whether pid runs containerd with this instance's configuration.
func (c *Containerd) isOurs(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	i := slices.Index(args, "--config")
	return filepath.Base(args[0]) == "containerd" && i > 0 && i+1 < len(args) && args[i+1] == c.ConfigPath()
}

// stopPID sends pid SIGTERM, then SIGKILL after grace, and waits until it is gone (it is not our child: its
// parent, or init, reaps it).
func stopPID(pid int, grace time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, grace) {
		return nil
	}
	return fmt.Errorf("process %d still alive after SIGKILL", pid)
}

// waitGone polls until pid has exited or is a zombie, for timeout; it says whether it did.
func waitGone(pid int, timeout time.Duration) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(timeout)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// Alive says whether pid exists and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may contain anything.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// forkThread runs functions on one OS thread locked for the life of the process.
var forkThread = sync.OnceValue(func() chan<- func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked, so the thread is never reused or ended
		for f := range ch {
			f()
		}
	}()
	return ch
})

// StartChild starts cmd so that it is killed (SIGKILL) when this process dies, whatever way it dies
// (Pdeathsig), and not before. The kernel sends Pdeathsig when the thread that forked the child ends, not the
// process: forked from an arbitrary thread, the child would be killed whenever a goroutine that locked its
// thread (to enter a network namespace, say) exits and Go ends that thread; so cmd is started from one thread
// locked for the life of the process. A SysProcAttr of cmd's is kept, with Pdeathsig set.
func StartChild(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error, 1)
	forkThread() <- func() { done <- cmd.Start() }
	return <-done
}
