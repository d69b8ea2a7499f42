// Package cri is the agent's runtime over the Container Runtime Interface: a CRI v1 client (k8s.io/cri-client)
// on a runtime's unix socket — containerd's CRI plugin in practice (docs/design/containerd.md) — behind the
// agent's runtime interfaces (runtime.Runtime, runtime.StatsProvider, runtime.ImageService).
//
// The interfaces have CRI's signatures, so the client satisfies them as it is; what this package adds:
//
//   - a sandbox's relative cgroup parent (the kubelet's "pod<uid>") goes under Config.CgroupRoot, and
//     RemovePodSandbox removes the pod's cgroup after the sandbox (the runtime removes only its containers');
//   - ExecSync's timeout error wraps runtime.ErrCommandTimedOut (the probes' code checks for it, whatever the
//     runtime);
//   - Open waits for the runtime to answer (an agent may start before containerd), and Status says whether the
//     runtime and its network are ready, for the Node's Ready condition.
//
// Errors are the runtime's gRPC statuses, unchanged: codes.NotFound for an unknown ID, as runtime.IsNotFound
// expects.
package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// DefaultEndpoint is containerd's socket where Debian's package (and upstream's) puts it.
const DefaultEndpoint = "unix:///run/containerd/containerd.sock"

// DefaultTimeout bounds every call but image pulls and ExecSync (which add their own): the kubelet's
// --runtime-request-timeout.
const DefaultTimeout = 2 * time.Minute

// Config configures Open.
type Config struct {
	// Endpoint is the runtime's socket: "unix:///path" or a plain path (default DefaultEndpoint).
	Endpoint string
	// Timeout bounds each call (default DefaultTimeout).
	Timeout time.Duration
	// CgroupRoot is the absolute cgroup under which pods' relative cgroup parents go (default DefaultCgroupRoot).
	CgroupRoot string
	// Logger receives Open's messages (default slog.Default()); the client itself logs through klog.
	Logger *slog.Logger
}

// Runtime is a CRI runtime: runtime.Runtime, runtime.StatsProvider and runtime.ImageService.
type Runtime struct {
	internalapi.RuntimeService
	images     internalapi.ImageManagerService
	cgroupRoot string
	log        *slog.Logger
}

var (
	_ runtime.Runtime       = (*Runtime)(nil)
	_ runtime.StatsProvider = (*Runtime)(nil)
	_ runtime.ImageService  = (*Runtime)(nil)
)

// Open connects to the runtime at cfg.Endpoint, waiting until it answers Version or ctx ends (the agent may start
// before the runtime; the connection attempts back off up to 5 s apart).
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if !strings.Contains(cfg.Endpoint, "://") {
		cfg.Endpoint = "unix://" + cfg.Endpoint
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	delay := 100 * time.Millisecond
	for {
		r, err := open(ctx, cfg)
		if err == nil {
			return r, nil
		}
		cfg.Logger.Info("waiting for the container runtime", "endpoint", cfg.Endpoint, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("cri: the container runtime at %s did not answer: %w", cfg.Endpoint, err)
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func open(ctx context.Context, cfg Config) (*Runtime, error) {
	// Each attempt gets a short deadline, so that one unanswered dial does not use up ctx.
	attempt := min(cfg.Timeout, 10*time.Second)
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(cfg.Endpoint).WithConnectionTimeout(attempt).
		WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, err
	}
	is, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(cfg.Endpoint).WithConnectionTimeout(attempt).
		WithTracerProvider(nil).Build(ctx)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, err
	}
	return &Runtime{RuntimeService: rs, images: is, cgroupRoot: cfg.CgroupRoot, log: cfg.Logger}, nil
}

// Close releases the connections.
func (r *Runtime) Close() error {
	ctx := context.Background()
	return errors.Join(r.RuntimeService.Close(ctx), r.images.Close(ctx))
}

// execSync is the client's ExecSync with its timeout error wrapping runtime.ErrCommandTimedOut.
func (r *Runtime) execSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	stdout, stderr, err := r.RuntimeService.ExecSync(ctx, containerID, cmd, timeout)
	if errors.Is(err, remote.ErrCommandTimedOut) {
		err = fmt.Errorf("%w: %w", runtime.ErrCommandTimedOut, err)
	}
	return stdout, stderr, err
}

func isTimeout(err error) bool { return errors.Is(err, runtime.ErrCommandTimedOut) }

func isExit(err error) bool {
	var exit interface{ ExitStatus() int }
	return errors.As(err, &exit)
}

// PullImage pulls an image with the credentials given (nil: anonymous) and returns its reference.
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	return r.images.PullImage(ctx, image, auth, sandbox)
}

// ImageStatus returns the image's status; a nil Image in the response means the runtime does not have it.
func (r *Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return r.images.ImageStatus(ctx, image, verbose)
}

// ListImages lists the runtime's images.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return r.images.ListImages(ctx, filter)
}

// RemoveImage removes an image (none is not an error).
func (r *Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return r.images.RemoveImage(ctx, image)
}

// ImageFsInfo returns the image filesystems' usage.
func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return r.images.ImageFsInfo(ctx)
}

// Ready reports whether the runtime answers and says that it and its network are ready; the reason says what is
// not, in the kubelet's words ("container runtime is down", "container runtime network not ready: ...").
func (r *Runtime) Ready(ctx context.Context) (ready bool, reason string) {
	resp, err := r.Status(ctx, false)
	if err != nil {
		return false, fmt.Sprintf("container runtime is down: %v", err)
	}
	var notReady []string
	for _, c := range resp.GetStatus().GetConditions() {
		if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && !c.Status {
			notReady = append(notReady, fmt.Sprintf("%s=false reason:%s message:%s", c.Type, c.Reason, c.Message))
		}
	}
	switch {
	case len(notReady) == 0:
		return true, ""
	case strings.HasPrefix(notReady[0], runtimeapi.NetworkReady):
		return false, "container runtime network not ready: " + strings.Join(notReady, ", ")
	default:
		return false, "container runtime not ready: " + strings.Join(notReady, ", ")
	}
}

// SandboxImage is the pause image the runtime runs sandboxes from, as its verbose status reports it
// (containerd's CRI configuration, "sandboxImage"); "" when it does not say. The image manager never collects it.
func (r *Runtime) SandboxImage(ctx context.Context) string {
	resp, err := r.Status(ctx, true)
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(resp.GetInfo()["config"]), &cfg) != nil {
		return ""
	}
	return cfg.SandboxImage
}

// Healthy is Ready as an error (nil when ready), for the Node's Ready condition (kubelet.NodeConfig.Healthy).
func (r *Runtime) Healthy(ctx context.Context) error {
	if ok, why := r.Ready(ctx); !ok {
		return errors.New(why)
	}
	return nil
}
