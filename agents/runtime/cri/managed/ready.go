package managed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrNoCRI is WaitReady's error for a containerd that serves without its CRI plugin (it failed to load; the
// log says why). Waiting longer does not help.
var ErrNoCRI = errors.New("managed: containerd's CRI plugin did not load")

// Dial is a gRPC client connection to the containerd socket at path, with a short reconnect back-off (50 ms
// growing to 1 s): gRPC's default (1 s growing to 2 min) would stretch the wait for a containerd that is still
// setting up its services. It does not connect until first used.
func Dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}))
}

// WaitReady waits until the socket at path exists, then until CRI answers Version and reports RuntimeReady,
// polling every 50 ms until ctx ends. It returns the connection it made (the caller closes it), fails at once
// when exited is closed (containerd exited) or the CRI plugin did not load (ErrNoCRI), and otherwise fails with
// the last check's error once ctx ends.
func WaitReady(ctx context.Context, path string, exited <-chan struct{}) (*grpc.ClientConn, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var conn *grpc.ClientConn
	fail := func(err error) (*grpc.ClientConn, error) {
		if conn != nil {
			_ = conn.Close()
		}
		return nil, err
	}
	for {
		var last error
		if conn == nil {
			if _, last = os.Stat(path); last == nil {
				conn, last = Dial(path)
			}
		}
		if conn != nil {
			last = Probe(ctx, conn)
			if last == nil {
				return conn, nil
			}
			if errors.Is(last, ErrNoCRI) {
				return fail(last)
			}
		}
		select {
		case <-exited:
			return fail(fmt.Errorf("containerd exited while starting (last check: %v)", last))
		case <-ctx.Done():
			return fail(fmt.Errorf("containerd not ready: %w (last check: %v)", ctx.Err(), last))
		case <-tick.C:
		}
	}
}

// Probe is one readiness check over conn: CRI answers Version (ErrNoCRI when the service is not there) and its
// Status reports RuntimeReady (NetworkReady is not asked for: it waits for a CNI configuration). Each call has
// 2 s at most.
func Probe(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		if status.Code(err) == codes.Unimplemented {
			return fmt.Errorf("%w: CRI Version: %v", ErrNoCRI, err)
		}
		return fmt.Errorf("CRI Version: %w", err)
	}
	st, err := rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI Status: %w", err)
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.RuntimeReady {
			if cond.Status {
				return nil
			}
			return fmt.Errorf("RuntimeReady false: %s: %s", cond.Reason, cond.Message)
		}
	}
	return errors.New("CRI Status has no RuntimeReady condition")
}

// Answers says whether a containerd (any CRI runtime) answers CRI Version on the socket at path within
// timeout: how the agent tells a system containerd from a stale socket (refused at once) or none.
func Answers(ctx context.Context, path string, timeout time.Duration) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	conn, err := Dial(path)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err == nil
}
