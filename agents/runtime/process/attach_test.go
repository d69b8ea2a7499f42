package process_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// syncBuffer is a bytes.Buffer safe for a streaming goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// attachExecutors are client-go's two ways to stream: SPDY and websocket
// (v5.channel.k8s.io, what kubectl tries first).
var attachExecutors = map[string]func(u string) (remotecommand.Executor, error){
	"spdy": func(u string) (remotecommand.Executor, error) {
		pu, err := url.Parse(u)
		if err != nil {
			return nil, err
		}
		return remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", pu)
	},
	"websocket": func(u string) (remotecommand.Executor, error) {
		return remotecommand.NewWebSocketExecutor(&rest.Config{}, "GET", u)
	},
}

// attach starts an attach session of the container in the background; the
// returned channel yields its end.
func attach(ctx context.Context, t *testing.T, rt *process.Runtime, newExecutor func(string) (remotecommand.Executor, error), req *runtimeapi.AttachRequest, opts remotecommand.StreamOptions) <-chan error {
	t.Helper()
	resp := must(rt.Attach(ctx, req))(t)
	ex := must(newExecutor(resp.Url))(t)
	done := make(chan error, 1)
	go func() { done <- ex.StreamWithContext(ctx, opts) }()
	return done
}

func waitDone(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not end", what)
		return nil
	}
}

// TestAttachStdinOnce: a session's stdin reaches the container, its output
// reaches the session, and with StdinOnce the end of the session's stdin
// is the end of the container's: it exits and the session ends cleanly.
func TestAttachStdinOnce(t *testing.T) {
	for name, newExecutor := range attachExecutors {
		t.Run(name, func(t *testing.T) {
			rt, _ := testRuntime(t)
			sbCfg := sandboxConfig("attach-once")
			sb := runSandbox(t, rt, sbCfg)
			cc := containerConfig("app", "sh", "-c", `echo started; while read l; do echo "got $l"; echo "err $l" >&2; done; echo bye`)
			cc.Stdin, cc.StdinOnce = true, true
			id := startContainer(t, rt, sb, sbCfg, cc)
			logPath := status(t, rt, id).LogPath
			eventually(t, 10*time.Second, "the container to start", func() bool {
				return logText(readLog(t, logPath), "stdout") == "started\n"
			})

			var stdout, stderr syncBuffer
			done := attach(t.Context(), t, rt, newExecutor,
				&runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true},
				remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
			if err := waitDone(t, done, "the attach session"); err != nil {
				t.Fatalf("attach: %v", err)
			}
			if stdout.String() != "got hello\nbye\n" || stderr.String() != "err hello\n" {
				t.Errorf("session saw stdout %q stderr %q; want what the container wrote after the attach", stdout.String(), stderr.String())
			}
			st := waitExited(t, rt, id)
			if st.ExitCode != 0 {
				t.Errorf("exit code %d", st.ExitCode)
			}
			if got := logText(readLog(t, logPath), "stdout"); got != "started\ngot hello\nbye\n" {
				t.Errorf("log %q: the log still has everything", got)
			}
			if _, err := rt.Attach(t.Context(), &runtimeapi.AttachRequest{ContainerId: id, Stdout: true}); !runtime.IsFailedPrecondition(err) {
				t.Errorf("attach to an exited container: %v, want FailedPrecondition", err)
			}
		})
	}
}

// TestAttachStdinStaysOpen: without StdinOnce the container's stdin outlives
// a session, so a second session can write to it; a session without stdin
// only watches.
func TestAttachStdinStaysOpen(t *testing.T) {
	newExecutor := attachExecutors["websocket"]
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("attach-open")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sh", "-c", `while read l; do echo "got $l"; done; echo stdin-closed; sleep 300`)
	cc.Stdin = true
	id := startContainer(t, rt, sb, sbCfg, cc)

	watchCtx, stopWatching := context.WithCancel(t.Context())
	var watched syncBuffer
	watching := attach(watchCtx, t, rt, newExecutor,
		&runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true},
		remotecommand.StreamOptions{Stdout: &watched, Stderr: io.Discard})

	for _, word := range []string{"one", "two"} {
		ctx, cancel := context.WithCancel(t.Context())
		in, inW := io.Pipe()
		var out syncBuffer
		done := attach(ctx, t, rt, newExecutor,
			&runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true},
			remotecommand.StreamOptions{Stdin: in, Stdout: &out, Stderr: io.Discard})
		_, _ = io.WriteString(inW, word+"\n")
		eventually(t, 10*time.Second, "the container's answer to "+word, func() bool {
			return strings.Contains(out.String(), "got "+word+"\n")
		})
		inW.Close() // the session's stdin ends; the container's does not
		cancel()
		_ = waitDone(t, done, "session "+word)
	}
	eventually(t, 10*time.Second, "the watching session to see both answers", func() bool {
		return watched.String() == "got one\ngot two\n"
	})
	if strings.Contains(watched.String(), "stdin-closed") {
		t.Errorf("the container's stdin was closed by a session: %q", watched.String())
	}
	stopWatching()
	_ = waitDone(t, watching, "the watching session")
}

// TestAttachTTY: a tty container gets a terminal as stdin and stdout; a
// session reaches it through the same pty and can resize it.
func TestAttachTTY(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("attach-tty")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sh", "-c", `test -t 0 && test -t 1 && echo on-a-tty; while read l; do [ "$l" = q ] && break; stty size; done; echo bye`)
	cc.Stdin, cc.StdinOnce, cc.Tty = true, true, true
	id := startContainer(t, rt, sb, sbCfg, cc)
	logPath := status(t, rt, id).LogPath
	eventually(t, 10*time.Second, "the container to start", func() bool {
		return strings.Contains(logText(readLog(t, logPath), "stdout"), "on-a-tty")
	})

	sizes := make(chan *remotecommand.TerminalSize, 1)
	sizes <- &remotecommand.TerminalSize{Width: 91, Height: 33}
	in, inW := io.Pipe()
	var out syncBuffer
	done := attach(t.Context(), t, rt, attachExecutors["spdy"],
		&runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Tty: true},
		remotecommand.StreamOptions{Stdin: in, Stdout: &out, Tty: true, TerminalSizeQueue: sizeQueue(sizes)})
	// The resize and stdin travel apart: ask for the size (each poll) until the new one shows.
	eventually(t, 10*time.Second, "the terminal to take the session's size", func() bool {
		if strings.Contains(out.String(), "33 91\r\n") {
			return true
		}
		_, _ = io.WriteString(inW, "size\n")
		return false
	})
	_, _ = io.WriteString(inW, "q\n")
	if err := waitDone(t, done, "the tty session"); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if got := out.String(); !strings.Contains(got, "bye\r\n") {
		t.Errorf("tty session saw %q; want the container's last words with the terminal's line endings", got)
	}
}

// sizeQueue hands out the sizes sent on ch.
type sizeQueue chan *remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q }
