package fake

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// RunPodSandbox implements runtime.SandboxManager.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if config.GetMetadata() == nil {
		return "", runtime.InvalidArgumentError("sandbox config has no metadata")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("RunPodSandbox")
	id := newID()
	r.sbConfigs[id] = clone(config)
	r.sandboxes[id] = &runtimeapi.PodSandboxStatus{
		Id:             id,
		Metadata:       clone(config.Metadata),
		State:          runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:      r.now().UnixNano(),
		Network:        &runtimeapi.PodSandboxNetworkStatus{},
		Labels:         copyMap(config.Labels),
		Annotations:    copyMap(config.Annotations),
		RuntimeHandler: runtimeHandler,
	}
	return id, nil
}

// StopPodSandbox implements runtime.SandboxManager: running containers exit
// with 137 at once.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("StopPodSandbox")
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return nil
	}
	for id, c := range r.containers {
		if r.ctrSandbox[id] == podSandboxID && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exitLocked(c, 137, "Error", "sandbox stopped")
		}
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

// RemovePodSandbox implements runtime.SandboxManager.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("RemovePodSandbox")
	for id := range r.containers {
		if r.ctrSandbox[id] == podSandboxID {
			delete(r.containers, id)
			delete(r.ctrSandbox, id)
		}
	}
	delete(r.sandboxes, podSandboxID)
	delete(r.sbConfigs, podSandboxID)
	return nil
}

// PodSandboxStatus implements runtime.SandboxManager.
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("PodSandboxStatus")
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return nil, runtime.NotFoundError("sandbox", podSandboxID)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: clone(s)}, nil
}

// ListPodSandbox implements runtime.SandboxManager.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("ListPodSandbox")
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sandboxes {
		// Matched on a view sharing the stored maps, copied only when it matches (a hollow node lists its
		// sandboxes by label for every pod's sync).
		ps := &runtimeapi.PodSandbox{
			Id:             s.Id,
			Metadata:       s.Metadata,
			State:          s.State,
			CreatedAt:      s.CreatedAt,
			Labels:         s.Labels,
			Annotations:    s.Annotations,
			RuntimeHandler: s.RuntimeHandler,
		}
		if runtime.MatchSandbox(filter, ps) {
			ps.Metadata, ps.Labels, ps.Annotations = clone(s.Metadata), copyMap(s.Labels), copyMap(s.Annotations)
			out = append(out, ps)
		}
	}
	return out, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
