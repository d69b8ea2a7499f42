package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Versioner reports the runtime's name and version (CRI Version).
type Versioner interface {
	// Version returns the runtime name, runtime version and CRI API version.
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
}

// SandboxManager runs pod sandboxes: the network namespace and cgroup that a
// pod's containers share.
type SandboxManager interface {
	// RunPodSandbox creates and starts a sandbox and returns its ID; the
	// sandbox is READY when it returns. runtimeHandler is ignored by runtimes
	// that have a single handler.
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	// StopPodSandbox kills the sandbox's running containers and tears its
	// network down; the sandbox is NOTREADY after. Idempotent.
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	// RemovePodSandbox stops the sandbox if needed and removes it with its
	// containers, state, cgroups and logs. Idempotent.
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	// PodSandboxStatus returns the sandbox's status; NotFound if unknown.
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	// ListPodSandbox lists the sandboxes matching filter (nil: all).
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// ContainerManager creates, runs and inspects containers inside sandboxes.
type ContainerManager interface {
	// CreateContainer creates a container (state CREATED) in a READY sandbox.
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// StartContainer starts a CREATED container; it is RUNNING when this
	// returns nil. FailedPrecondition if it is not CREATED.
	StartContainer(ctx context.Context, containerID string) error
	// StopContainer sends SIGTERM, waits up to timeout seconds, then SIGKILL;
	// it returns once the container is EXITED. Idempotent.
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	// RemoveContainer kills the container if it runs and removes it. Idempotent.
	RemoveContainer(ctx context.Context, containerID string) error
	// ListContainers lists the containers matching filter (nil: all).
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ContainerStatus returns the container's status; NotFound if unknown.
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// UpdateContainerResources applies new cpu and memory limits (CRI's LinuxContainerResources: shares, quota
	// and period, memory limit) to a CREATED or RUNNING container in place, without restarting it (in-place pod
	// resize); ContainerStatus reports them from then on. NotFound if unknown. An exited container is refused
	// (FailedPrecondition) by some runtimes and accepted for nothing by others (containerd): callers update
	// running ones only.
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
	// ExecSync runs cmd in the container and returns its output. A non-zero
	// exit is a k8s.io/utils/exec.CodeExitError (with the output still
	// returned); a timeout (0: none) is a k8s.io/utils/exec timeout error.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error)
}

// Streamer hands out URLs of the runtime's streaming server, to which the
// kubelet API proxies kubectl exec, attach and port-forward.
type Streamer interface {
	// Exec prepares a streaming endpoint to run a command in a container.
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	// Attach prepares a streaming endpoint to attach to a container's stdio.
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	// PortForward prepares a streaming endpoint to forward ports of a sandbox.
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// Runtime is everything the kubelet asks of a container runtime. Its methods
// are those of k8s.io/cri-api/pkg/apis.RuntimeService of the same names.
type Runtime interface {
	Versioner
	SandboxManager
	ContainerManager
	Streamer
}

// ImagePuller is the part of CRI's ImageService the kubelet uses. Runtimes
// without images (process, fake) record the image and return its name as the
// image reference.
type ImagePuller interface {
	// PullImage pulls (or records) an image and returns its reference.
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// ImageService is the part of CRI's ImageService the kubelet's image manager uses with a runtime that runs
// images (cri): whether an image is present, pulls, and garbage collection.
type ImageService interface {
	ImagePuller
	// ImageStatus returns the image's status; a nil Image in the response means the runtime does not have it.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	// ListImages lists the images matching filter (nil: all).
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// RemoveImage removes an image; removing one the runtime does not have succeeds.
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	// ImageFsInfo returns the usage of the filesystems holding images.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// StatsProvider is the part of CRI's RuntimeService that reports running containers' resource usage, for the
// kubelet's Summary API (/stats/summary). Runtimes that cannot measure usage do not implement it, and the
// summary then has no usage for their containers.
type StatsProvider interface {
	// ListContainerStats returns the CPU (cumulative core-nanoseconds) and memory usage of the running
	// containers matching filter (nil: all).
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}
