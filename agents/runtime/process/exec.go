package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// execWaitDelay bounds how long output is still copied after an exec'd
// command exited (its children may keep the pipes open).
const execWaitDelay = 2 * time.Second

// ExecSync runs cmd in the container's namespaces and cgroup, as its user,
// with its environment and working directory.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	err := r.execIn(ctx, containerID, cmd, execIO{stdout: &stdout, stderr: &stderr})
	if errors.Is(err, context.DeadlineExceeded) && timeout > 0 {
		err = fmt.Errorf("%w: %q after %s", runtime.ErrCommandTimedOut, strings.Join(cmd, " "), timeout)
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// execIO are the streams of an exec; nil ones are /dev/null.
type execIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	resize         <-chan remotecommand.TerminalSize
}

// execIn runs cmd in a running container and waits for it. A non-zero exit
// is a utilexec.CodeExitError; ctx's end kills the command.
func (r *Runtime) execIn(ctx context.Context, containerID string, cmd []string, sio execIO) error {
	if len(cmd) == 0 {
		return runtime.InvalidArgumentError("exec: empty command")
	}
	pid, err := r.runningPID(containerID)
	if err != nil {
		return err
	}
	c := &exec.Cmd{
		Path:      shim.SelfExe,
		Args:      append([]string{shim.Prefix + "exec", r.containerDir(containerID), strconv.Itoa(pid)}, cmd...),
		Dir:       "/",
		WaitDelay: execWaitDelay,
	}
	failR, failW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer failR.Close()
	c.ExtraFiles = []*os.File{failW}
	wait, err := startExec(c, sio)
	failW.Close()
	if err != nil {
		return status.Errorf(codes.Internal, "exec in %s: %v", containerID, err)
	}
	if msg, _ := io.ReadAll(failR); len(msg) > 0 {
		_ = wait(context.Background())
		return status.Errorf(codes.Unknown, "exec in %s: %s", containerID, msg)
	}
	return wait(ctx)
}

// startExec starts c wired to sio (through a pty if sio.tty) and returns
// the function that waits for it.
func startExec(c *exec.Cmd, sio execIO) (func(context.Context) error, error) {
	if sio.tty {
		return startExecTTY(c, sio)
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Stdout, c.Stderr = sio.stdout, sio.stderr
	var stdinW *os.File
	if sio.stdin != nil {
		// Our own pipe: exec.Cmd would wait for a client's stdin to end.
		stdinR, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer stdinR.Close()
		c.Stdin, stdinW = stdinR, w
	}
	if err := c.Start(); err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, err
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, sio.stdin)
			stdinW.Close()
		}()
	}
	return func(ctx context.Context) error { return waitExec(ctx, c, stdinW) }, nil
}

// startExecTTY starts c on a new pty, copying its output to sio.stdout.
func startExecTTY(c *exec.Cmd, sio execIO) (func(context.Context) error, error) {
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	ptmx, err := pty.StartWithAttrs(c, nil, c.SysProcAttr)
	if err != nil {
		return nil, err
	}
	if sio.resize != nil {
		go func() {
			for size := range sio.resize {
				_ = pty.Setsize(ptmx, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
	}
	if sio.stdin != nil {
		go func() { _, _ = io.Copy(ptmx, sio.stdin) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if sio.stdout != nil {
			_, _ = io.Copy(sio.stdout, ptmx) // ends with EIO once the command exits
		}
	}()
	return func(ctx context.Context) error {
		err := waitExec(ctx, c, nil)
		select {
		case <-copied:
		case <-time.After(execWaitDelay):
		}
		ptmx.Close()
		return err
	}, nil
}

// waitExec waits for c, killing its process group when ctx ends first.
func waitExec(ctx context.Context, c *exec.Cmd, stdinW *os.File) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = unix.Kill(-c.Process.Pid, unix.SIGKILL)
		_ = c.Process.Kill()
		<-done
		err = ctx.Err()
	}
	if stdinW != nil {
		stdinW.Close()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return utilexec.CodeExitError{Err: fmt.Errorf("command exited with %d", code), Code: code}
	}
	return err
}

// runningPID returns the PID of a running container's process.
func (r *Runtime) runningPID(containerID string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.containers[containerID]
	if !ok {
		return 0, runtime.NotFoundError("container", containerID)
	}
	st := r.observe(rec)
	if st.state != runtimeapi.ContainerState_CONTAINER_RUNNING || !st.shim.Process.Alive() {
		return 0, runtime.PreconditionError("container %q is not running", containerID)
	}
	return st.shim.Process.PID, nil
}
