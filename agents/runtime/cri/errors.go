package cri

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// containerd answers some calls differently from what the agent's runtime interface promises (agents/runtime's
// package doc): stopping or removing an unknown ID is NotFound, not success; a call that does not fit an object's
// state is Unknown (or NotFound for a stopped sandbox's task), not FailedPrecondition. These methods give the
// interface's answers, asking the runtime for the object's state when a call failed.

// StopPodSandbox stops the sandbox; an unknown one is already stopped.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return ignoreNotFound(r.RuntimeService.StopPodSandbox(ctx, podSandboxID))
}

// StopContainer stops the container; an unknown one is already stopped.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	return ignoreNotFound(r.RuntimeService.StopContainer(ctx, containerID, timeout))
}

// RemoveContainer removes the container; an unknown one is already removed.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	return ignoreNotFound(r.RuntimeService.RemoveContainer(ctx, containerID))
}

// StartContainer starts a CREATED container; one in another state is FailedPrecondition.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	err := r.RuntimeService.StartContainer(ctx, containerID)
	if err == nil || runtime.IsNotFound(err) {
		return err
	}
	return r.containerPrecondition(ctx, containerID, runtimeapi.ContainerState_CONTAINER_CREATED, "start", err)
}

// ExecSync runs cmd in the container; a timeout is an error wrapping runtime.ErrCommandTimedOut, a non-zero exit
// a k8s.io/utils/exec.CodeExitError, a container that is not running FailedPrecondition.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	stdout, stderr, err := r.execSync(ctx, containerID, cmd, timeout)
	if err == nil || isExit(err) || isTimeout(err) || runtime.IsNotFound(err) {
		return stdout, stderr, err
	}
	return stdout, stderr, r.containerPrecondition(ctx, containerID, runtimeapi.ContainerState_CONTAINER_RUNNING, "exec in", err)
}

// CreateContainer creates the container with its sandbox's cgroup parent under the cgroup root; a sandbox that
// is not ready is FailedPrecondition.
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.RuntimeService.CreateContainer(ctx, podSandboxID, config, r.rooted(sandboxConfig))
	if err == nil {
		return id, nil
	}
	st, serr := r.RuntimeService.PodSandboxStatus(ctx, podSandboxID, false)
	switch {
	case serr != nil:
		return "", serr // NotFound for an unknown sandbox
	case st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY:
		return "", runtime.PreconditionError("create a container in sandbox %s: it is %s", podSandboxID, st.GetStatus().GetState())
	}
	return "", err
}

// containerPrecondition is err as FailedPrecondition when the container is not in state want (it failed because
// of its state), else err.
func (r *Runtime) containerPrecondition(ctx context.Context, id string, want runtimeapi.ContainerState, verb string, err error) error {
	st, serr := r.RuntimeService.ContainerStatus(ctx, id, false)
	switch {
	case serr != nil:
		return serr
	case st.GetStatus().GetState() != want:
		return runtime.PreconditionError("%s container %s: it is %s", verb, id, st.GetStatus().GetState())
	}
	return err
}

func ignoreNotFound(err error) error {
	if runtime.IsNotFound(err) {
		return nil
	}
	return err
}
