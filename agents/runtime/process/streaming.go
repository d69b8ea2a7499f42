package process

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// Exec returns the streaming URL for an exec in a running container.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := r.runningPID(req.GetContainerId()); err != nil {
		return nil, err
	}
	resp, err := r.stream.GetExec(req)
	if err == nil {
		r.tokens.add(resp.Url, req)
	}
	return resp, err
}

// Attach returns the streaming URL for attaching to a running container's
// stdio, which its shim serves (see attach.go).
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := r.runningPID(req.GetContainerId()); err != nil {
		return nil, err
	}
	resp, err := r.stream.GetAttach(req)
	if err == nil {
		r.tokens.add(resp.Url, req)
	}
	return resp, err
}

// attachIn attaches sio to a running container: its output from now on, and
// sio.stdin to its stdin when the container has one (else stdin is ignored).
func (r *Runtime) attachIn(ctx context.Context, containerID string, sio execIO) error {
	if _, err := r.runningPID(containerID); err != nil {
		return err
	}
	r.mu.Lock()
	rec := r.containers[containerID]
	hasStdin := rec != nil && rec.config.GetStdin()
	r.mu.Unlock()
	if !hasStdin {
		sio.stdin = nil
	}
	return attachTo(ctx, r.containerDir(containerID), sio.stdin, sio.stdout, sio.stderr, sio.resize)
}

// PortForward returns the streaming URL for forwarding ports of a sandbox.
func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	sb := r.sandbox(req.GetPodSandboxId())
	if sb == nil {
		return nil, runtime.NotFoundError("sandbox", req.GetPodSandboxId())
	}
	if !sb.Ready {
		return nil, runtime.PreconditionError("sandbox %q is not ready", sb.ID)
	}
	return r.stream.GetPortForward(req)
}

// streamRuntime serves the streaming server's requests.
type streamRuntime struct{ r *Runtime }

var _ streaming.Runtime = streamRuntime{}

func (s streamRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	sio := execIO{stdin: in, tty: tty, resize: resize}
	// Nil interfaces, not typed nils, for absent streams.
	if out != nil {
		sio.stdout = out
	}
	if errw != nil {
		sio.stderr = errw
	}
	return s.r.execIn(ctx, containerID, cmd, sio)
}

func (s streamRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	sio := execIO{stdin: in, tty: tty, resize: resize}
	if out != nil {
		sio.stdout = out
	}
	if errw != nil {
		sio.stderr = errw
	}
	return s.r.attachIn(ctx, containerID, sio)
}

// PortForward connects stream to 127.0.0.1:port in the sandbox's network
// namespace (the host's for host-network sandboxes).
func (s streamRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	sb := s.r.sandbox(podSandboxID)
	if sb == nil {
		return runtime.NotFoundError("sandbox", podSandboxID)
	}
	var conn net.Conn
	err := inNetns(sb.NetNS, func() error {
		var err error
		// The socket is created on this thread, hence in the namespace.
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		return err
	})
	if err != nil {
		return fmt.Errorf("port-forward to %d in sandbox %s: %w", port, podSandboxID, err)
	}
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, err = io.Copy(stream, conn)
	return err
}
