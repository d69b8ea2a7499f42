package process

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// checkPIDNamespace checks a container's process namespace request against what the runtime gives: no process
// namespace of a container's or a sandbox's own, every container runs in the host's. Pid CONTAINER and POD are
// therefore met only in the sense that the container sees at least the processes they promise; TARGET (an
// ephemeral container with a targetContainerName) is met as asked, since the target runs in that same
// namespace: the debugging container sees the target's processes, as it sees the host's. Its TargetId must
// name a container of the same sandbox, else the create is refused (NotFound for an unknown container,
// InvalidArgument for none named or another pod's), as containerd refuses a target it cannot join.
func (r *Runtime) checkPIDNamespace(sandboxID string, config *runtimeapi.ContainerConfig) error {
	ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET {
		return nil
	}
	name := config.GetMetadata().GetName()
	if ns.GetTargetId() == "" {
		return runtime.InvalidArgumentError("container %q: process namespace TARGET names no target container", name)
	}
	target := r.container(ns.TargetId)
	if target == nil {
		return runtime.NotFoundError("target container", ns.TargetId)
	}
	if target.SandboxID != sandboxID {
		return runtime.InvalidArgumentError("container %q: target container %s is not in sandbox %s", name, ns.TargetId, sandboxID)
	}
	return nil
}
