package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// RuntimeName is what Version reports.
const RuntimeName = "wheelhouse-fake"

// ExecHook decides the outcome of an ExecSync: its output and exit code.
type ExecHook func(containerID string, cmd []string) (stdout, stderr []byte, exitCode int)

// UpdateHook decides whether an UpdateContainerResources fails (non-nil error) before it is applied.
type UpdateHook func(containerID string, resources *runtimeapi.ContainerResources) error

// Runtime is the in-memory runtime. The zero value is not usable; call New.
type Runtime struct {
	now func() time.Time

	mu         sync.Mutex // guards every field below
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	sbConfigs  map[string]*runtimeapi.PodSandboxConfig
	containers map[string]*runtimeapi.ContainerStatus
	ctrSandbox map[string]string // container ID -> sandbox ID
	images     map[string]bool
	execHook   ExecHook
	updateHook UpdateHook
	calls      []string
	noCallLog  bool // calls stays empty (WithoutCallLog)
}

var (
	_ runtime.Runtime     = (*Runtime)(nil)
	_ runtime.ImagePuller = (*Runtime)(nil)
)

// Option configures a Runtime.
type Option func(*Runtime)

// WithClock makes the runtime read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(r *Runtime) { r.now = now } }

// WithoutCallLog stops the runtime from keeping the names of the methods called (Calls returns nothing), so a
// long-lived runtime, a hollow node's, does not grow without end.
func WithoutCallLog() Option { return func(r *Runtime) { r.noCallLog = true } }

// New returns an empty Runtime.
func New(opts ...Option) *Runtime {
	r := &Runtime{
		now:        time.Now,
		sandboxes:  map[string]*runtimeapi.PodSandboxStatus{},
		sbConfigs:  map[string]*runtimeapi.PodSandboxConfig{},
		containers: map[string]*runtimeapi.ContainerStatus{},
		ctrSandbox: map[string]string{},
		images:     map[string]bool{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetExecHook makes ExecSync answer with hook (nil: success, no output).
func (r *Runtime) SetExecHook(hook ExecHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execHook = hook
}

// SetUpdateHook makes UpdateContainerResources ask hook first (nil: every update succeeds).
func (r *Runtime) SetUpdateHook(hook UpdateHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updateHook = hook
}

// Exit makes a RUNNING container exit with code; reason and message are
// reported by ContainerStatus (empty reason: Completed for 0, Error otherwise).
func (r *Runtime) Exit(containerID string, code int32, reason, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[containerID]
	if !ok {
		return runtime.NotFoundError("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return runtime.PreconditionError("container %q is %s, not running", containerID, c.State)
	}
	r.exitLocked(c, code, reason, message)
	return nil
}

// Calls returns the names of the methods called so far, in order.
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// Images returns the images PullImage recorded, sorted.
func (r *Runtime) Images() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.images))
	for img := range r.images {
		out = append(out, img)
	}
	sort.Strings(out)
	return out
}

// record notes a call; r.mu must be held.
func (r *Runtime) record(method string) {
	if !r.noCallLog {
		r.calls = append(r.calls, method)
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Version implements runtime.Versioner.
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    "0.1.0",
		RuntimeApiVersion: "v1",
	}, nil
}

// PullImage records the image and returns its name as the reference.
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if image.GetImage() == "" {
		return "", runtime.InvalidArgumentError("image is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("PullImage")
	r.images[image.Image] = true
	return image.Image, nil
}

// ExecSync implements runtime.ContainerManager.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	r.mu.Lock()
	r.record("ExecSync")
	c, ok := r.containers[containerID]
	hook := r.execHook
	r.mu.Unlock()
	if !ok {
		return nil, nil, runtime.NotFoundError("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, runtime.PreconditionError("container %q is not running", containerID)
	}
	if hook == nil {
		return nil, nil, nil
	}
	stdout, stderr, code := hook(containerID, cmd)
	if code != 0 {
		err := fmt.Errorf("command %q exited with %d", cmd, code)
		return stdout, stderr, utilexec.CodeExitError{Err: err, Code: code}
	}
	return stdout, stderr, nil
}

// Exec implements runtime.Streamer with a URL nothing serves.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := r.checkRunning(req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: "http://fake.invalid/exec/" + newID()}, nil
}

// Attach implements runtime.Streamer with a URL nothing serves.
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := r.checkRunning(req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: "http://fake.invalid/attach/" + newID()}, nil
}

// PortForward implements runtime.Streamer with a URL nothing serves.
func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[req.GetPodSandboxId()]; !ok {
		return nil, runtime.NotFoundError("sandbox", req.GetPodSandboxId())
	}
	return &runtimeapi.PortForwardResponse{Url: "http://fake.invalid/portforward/" + newID()}, nil
}

func (r *Runtime) checkRunning(containerID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[containerID]
	if !ok {
		return runtime.NotFoundError("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return runtime.PreconditionError("container %q is not running", containerID)
	}
	return nil
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }
