package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The shim is the container process's parent for its whole life, like
// containerd-shim: it runs in a session of its own (an agent that exits or is
// killed does not take it along), copies the process's stdout and stderr to
// the CRI log with rotation, relays the signals it gets to the process group,
// and when the process exits writes exit.json with the code, time and reason
// (OOMKilled from the cgroup's oom_kill counter). The runtime learns that the
// start succeeded, or why not, from StatusPipeFD.
const (
	StatusPipeFD = 3
	StatusOK     = "ok"
	// drainTimeout bounds how long output is still copied after the process
	// exited (its children may hold the pipes open forever).
	drainTimeout = 2 * time.Second
)

func runShim(dir string) error {
	status := os.NewFile(StatusPipeFD, "status")
	dir, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprint(status, err.Error())
		status.Close()
		return err
	}
	cmd, logs, err := startInit(dir)
	if err != nil {
		fmt.Fprint(status, err.Error())
		status.Close()
		return err
	}
	self, err := Identify(os.Getpid())
	if err == nil {
		var child Identity
		child, err = Identify(cmd.Process.Pid)
		st := State{Shim: self, Process: child, StartedAt: time.Now().UnixNano()}
		if err == nil {
			err = WriteJSON(filepath.Join(dir, ShimFile), st)
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		fmt.Fprint(status, err.Error())
		status.Close()
		return err
	}
	fmt.Fprint(status, StatusOK)
	status.Close()
	go relaySignals(cmd.Process.Pid)
	return superviseInit(dir, cmd, logs)
}

// shimLogs copies the process's output into the CRI log and to attach
// sessions.
type shimLogs struct {
	log    *criLog
	hub    *attachHub
	pipes  []*os.File // read ends, closed to stop a stuck copy
	stdin  *os.File   // write end of the process's stdin pipe, if any
	copies sync.WaitGroup
}

// startInit starts the init helper with its stdio wired to the shim (a pty
// for tty containers, else pipes; stdin only when the container asks for
// it) and waits until it has exec'd the command or failed.
func startInit(dir string) (*exec.Cmd, *shimLogs, error) {
	var spec Spec
	if err := ReadJSON(filepath.Join(dir, SpecFile), &spec); err != nil {
		return nil, nil, err
	}
	log, err := openCRILog(spec.LogPath, spec.LogMaxBytes, spec.LogMaxFiles)
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	failR, failW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:       SelfExe,
		Args:       []string{Prefix + "init", dir},
		Dir:        "/",
		ExtraFiles: []*os.File{failW},
	}
	logs := &shimLogs{log: log}
	var childEnds []*os.File // closed once the child has them
	var outputs []string     // the streams of logs.pipes
	var ptmx *os.File
	if spec.Tty {
		var tty *os.File
		if ptmx, tty, err = pty.Open(); err != nil {
			return nil, nil, fmt.Errorf("open pty: %w", err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		childEnds = append(childEnds, tty)
		logs.pipes, outputs = []*os.File{ptmx}, []string{"stdout"}
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		childEnds = append(childEnds, outW, errW)
		logs.pipes, outputs = []*os.File{outR, errR}, []string{"stdout", "stderr"}
		if spec.Stdin {
			inR, inW, err := os.Pipe()
			if err != nil {
				return nil, nil, err
			}
			cmd.Stdin, logs.stdin = inR, inW
			childEnds = append(childEnds, inR)
		}
	}
	l, err := listenAttach(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("attach socket: %w", err)
	}
	var stdin io.WriteCloser
	switch {
	case ptmx != nil && spec.Stdin:
		stdin = ptmx
	case logs.stdin != nil:
		stdin = logs.stdin
	}
	logs.hub = newAttachHub(l, stdin, ptmx, spec.StdinOnce)

	err = cmd.Start()
	for _, f := range childEnds {
		f.Close()
	}
	failW.Close()
	if err != nil {
		logs.hub.Close()
		return nil, nil, fmt.Errorf("start init: %w", err)
	}
	msg, _ := io.ReadAll(failR)
	failR.Close()
	if len(msg) > 0 {
		_ = cmd.Wait()
		logs.hub.Close()
		return nil, nil, errors.New(string(msg))
	}
	for i, stream := range outputs {
		kind := byte(AttachStdout)
		if stream == "stderr" {
			kind = AttachStderr
		}
		src := io.TeeReader(eioIsEOF{logs.pipes[i]}, logs.hub.writer(kind))
		logs.copies.Add(1)
		go func() {
			defer logs.copies.Done()
			if err := log.copyFrom(stream, src); err != nil {
				fmt.Fprintf(os.Stderr, "copy %s: %v\n", stream, err)
			}
		}()
	}
	return cmd, logs, nil
}

// eioIsEOF reads a pty master, which fails with EIO once the last process
// holding the terminal is gone: that is its end of file.
type eioIsEOF struct{ r io.Reader }

func (e eioIsEOF) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

// relaySignals forwards the shim's termination signals to the container's
// process group.
func relaySignals(pid int) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	for sig := range ch {
		_ = unix.Kill(-pid, sig.(syscall.Signal))
	}
}

// superviseInit waits for the process, drains its output and records its exit.
func superviseInit(dir string, cmd *exec.Cmd, logs *shimLogs) error {
	waitErr := cmd.Wait()
	drained := make(chan struct{})
	go func() { logs.copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		for _, p := range logs.pipes {
			p.Close()
		}
		<-drained
	}
	logs.hub.Close()
	if logs.stdin != nil {
		logs.stdin.Close()
	}
	logs.log.Close()

	var spec Spec
	_ = ReadJSON(filepath.Join(dir, SpecFile), &spec)
	ex := Exit{FinishedAt: time.Now().UnixNano()}
	var ee *exec.ExitError
	switch {
	case errors.As(waitErr, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		ex.ExitCode = int32(ws.ExitStatus())
		if ws.Signaled() {
			ex.ExitCode = 128 + int32(ws.Signal())
		}
	case waitErr != nil:
		ex.ExitCode, ex.Message = 255, waitErr.Error()
	}
	ex.Reason = ExitReason(ex.ExitCode, OOMKilled(spec.OOMFiles))
	return WriteJSON(filepath.Join(dir, ExitFile), ex)
}

// ExitReason is CRI's reason for a terminated container.
func ExitReason(code int32, oom bool) string {
	switch {
	case oom:
		return "OOMKilled"
	case code == 0:
		return "Completed"
	default:
		return "Error"
	}
}

// OOMKilled reports whether any of the memory.events / memory.oom_control
// files counts an OOM kill.
func OOMKilled(files []string) bool {
	for _, f := range files {
		if ReadKeyed(f, "oom_kill") > 0 {
			return true
		}
	}
	return false
}
