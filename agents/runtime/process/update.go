package process

import (
	"context"
	"fmt"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// UpdateContainerResources rewrites a created or running container's cgroup with new limits (v2: memory.max,
// cpu.max, cpu.weight; v1: memory.limit_in_bytes, cpu.cfs_quota_us and cpu.cfs_period_us, cpu.shares) without
// touching its processes, and records them in its configuration, which ContainerStatus reports. A limit the
// new resources leave unset is lifted. Only the cpu and memory fields are read: the rest of a CRI update
// (hugepages, cpuset, unified) is not applied by this runtime at creation either.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	linux := resources.GetLinux()
	if linux == nil {
		return runtime.InvalidArgumentError("container %q: the update has no Linux resources", containerID)
	}
	r.updates.Lock()
	defer r.updates.Unlock()
	r.mu.Lock()
	rec, ok := r.containers[containerID]
	var state runtimeapi.ContainerState
	if ok {
		state = r.observe(rec).state
	}
	r.mu.Unlock()
	switch {
	case !ok:
		return runtime.NotFoundError("container", containerID)
	case state == runtimeapi.ContainerState_CONTAINER_EXITED:
		return runtime.PreconditionError("container %q has exited", containerID)
	}
	// The swap limit the container was created with stays: the kubelet's resize does not change it.
	res := resourcesOf(linux)
	res.SwapLimit = rec.config.GetLinux().GetResources().GetMemorySwapLimitInBytes()
	if err := r.cg.update(rec.Cgroup, res); err != nil {
		return fmt.Errorf("update container %s: %w", containerID, err)
	}
	cfg := clone(rec.config)
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	kept := clone(linux)
	kept.MemorySwapLimitInBytes = res.SwapLimit
	cfg.Linux.Resources = kept
	cfgJSON, err := marshalProto(cfg)
	if err != nil {
		return runtime.InvalidArgumentError("container config: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[containerID] != rec {
		return runtime.NotFoundError("container", containerID) // removed meanwhile
	}
	next := *rec
	next.Config, next.config = cfgJSON, cfg
	if err := shim.WriteJSON(filepath.Join(r.containerDir(containerID), containerFile), &next); err != nil {
		return fmt.Errorf("update container %s: %w", containerID, err)
	}
	rec.Config, rec.config = cfgJSON, cfg
	return nil
}
