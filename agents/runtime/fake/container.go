package fake

import (
	"context"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// CreateContainer implements runtime.ContainerManager.
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if config.GetMetadata() == nil {
		return "", runtime.InvalidArgumentError("container config has no metadata")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("CreateContainer")
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return "", runtime.NotFoundError("sandbox", podSandboxID)
	}
	if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", runtime.PreconditionError("sandbox %q is not ready", podSandboxID)
	}
	id := newID()
	logPath := ""
	if config.LogPath != "" {
		logPath = filepath.Join(r.sbConfigs[podSandboxID].GetLogDirectory(), config.LogPath)
	}
	r.containers[id] = &runtimeapi.ContainerStatus{
		Id:          id,
		Metadata:    clone(config.Metadata),
		State:       runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt:   r.now().UnixNano(),
		Image:       &runtimeapi.ImageSpec{Image: config.GetImage().GetImage()},
		ImageRef:    config.GetImage().GetImage(),
		Labels:      copyMap(config.Labels),
		Annotations: copyMap(config.Annotations),
		LogPath:     logPath,
	}
	if res := config.GetLinux().GetResources(); res != nil {
		r.containers[id].Resources = &runtimeapi.ContainerResources{Linux: clone(res)}
	}
	r.ctrSandbox[id] = podSandboxID
	return id, nil
}

// StartContainer implements runtime.ContainerManager.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("StartContainer")
	c, ok := r.containers[containerID]
	if !ok {
		return runtime.NotFoundError("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return runtime.PreconditionError("container %q is %s, not created", containerID, c.State)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = r.now().UnixNano()
	return nil
}

// StopContainer implements runtime.ContainerManager: a running container
// exits at once with 143 (as after SIGTERM); others are left as they are.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("StopContainer")
	c, ok := r.containers[containerID]
	if !ok {
		return nil
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exitLocked(c, 143, "Error", "")
	}
	return nil
}

// RemoveContainer implements runtime.ContainerManager.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("RemoveContainer")
	delete(r.containers, containerID)
	delete(r.ctrSandbox, containerID)
	return nil
}

// ListContainers implements runtime.ContainerManager.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("ListContainers")
	var out []*runtimeapi.Container
	for id, c := range r.containers {
		ctr := &runtimeapi.Container{ // as in ListPodSandbox: copied only when it matches
			Id:           id,
			PodSandboxId: r.ctrSandbox[id],
			Metadata:     c.Metadata,
			Image:        c.Image,
			ImageRef:     c.ImageRef,
			State:        c.State,
			CreatedAt:    c.CreatedAt,
			Labels:       c.Labels,
			Annotations:  c.Annotations,
		}
		if runtime.MatchContainer(filter, ctr) {
			ctr.Metadata, ctr.Image, ctr.Labels, ctr.Annotations = clone(c.Metadata), clone(c.Image), copyMap(c.Labels), copyMap(c.Annotations)
			out = append(out, ctr)
		}
	}
	return out, nil
}

// ContainerStatus implements runtime.ContainerManager.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("ContainerStatus")
	c, ok := r.containers[containerID]
	if !ok {
		return nil, runtime.NotFoundError("container", containerID)
	}
	return &runtimeapi.ContainerStatusResponse{Status: clone(c)}, nil
}

// UpdateContainerResources implements runtime.ContainerManager: the container's status reports the new
// resources; an UpdateHook's error fails the call instead.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("UpdateContainerResources")
	c, ok := r.containers[containerID]
	if !ok {
		return runtime.NotFoundError("container", containerID)
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return runtime.PreconditionError("container %q has exited", containerID)
	}
	if r.updateHook != nil {
		if err := r.updateHook(containerID, resources); err != nil {
			return err
		}
	}
	c.Resources = clone(resources)
	return nil
}

// exitLocked moves c to EXITED; r.mu must be held.
func (r *Runtime) exitLocked(c *runtimeapi.ContainerStatus, code int32, reason, message string) {
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.FinishedAt = r.now().UnixNano()
	c.ExitCode = code
	c.Reason = reason
	c.Message = message
}
