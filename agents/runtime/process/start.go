package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// shimStartTimeout bounds a start when ctx has no deadline.
const shimStartTimeout = 30 * time.Second

// startShim starts the shim of the container in dir, in a session of its
// own, and waits for its verdict on the status pipe: "ok" once the process
// runs, else the reason it could not start.
func (r *Runtime) startShim(ctx context.Context, dir string) error {
	shimLog, err := os.OpenFile(filepath.Join(dir, shim.ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer shimLog.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer statusR.Close()
	cmd := &exec.Cmd{
		Path:        shim.SelfExe,
		Args:        []string{shim.Prefix + "shim", dir},
		Dir:         "/",
		Stdout:      shimLog,
		Stderr:      shimLog,
		ExtraFiles:  []*os.File{statusW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		return fmt.Errorf("start shim: %w", err)
	}
	// Reap the shim when it exits while we live; after an agent restart,
	// init (or a subreaper) does.
	go func() { _ = cmd.Wait() }()

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(shimStartTimeout)
	}
	_ = statusR.SetReadDeadline(deadline)
	msg, err := io.ReadAll(statusR)
	switch {
	case string(msg) == shim.StatusOK:
		return nil
	case len(msg) > 0:
		return errors.New(string(msg))
	case err != nil:
		_ = cmd.Process.Kill()
		return fmt.Errorf("shim did not report: %w", err)
	default:
		return fmt.Errorf("shim exited without reporting: %s", tail(filepath.Join(dir, shim.ShimLogFile)))
	}
}

// tail returns the last line of a file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
