package kubelet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Ephemeral containers (pods/ephemeralcontainers: `kubectl debug`), as upstream's kubelet runs them: each is
// started once, in the pod's sandbox (its network, IPC and volumes), as soon as the sandbox is ready and whatever
// its init containers are doing; it is never restarted, has no probes or hooks, and plays no part in the pod's
// phase or conditions. One with a targetContainerName shares that container's process namespace (CRI
// NamespaceMode TARGET) unless the whole pod shares one. Its status is in status.ephemeralContainerStatuses,
// sorted by name.

// ephemeralContainers starts the pod's ephemeral containers that have never been started: none in the runtime,
// and none the API's status shows with a container ID (one that ran in a sandbox since replaced stays ended).
func (w *worker) ephemeralContainers(ctx context.Context, pod *corev1.Pod, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if len(ob.containers[ec.Name]) > 0 || ephemeralRan(pod, ec.Name) {
			continue
		}
		w.start(ctx, pod, (*corev1.Container)(&ec.EphemeralContainerCommon), sandboxID, sbConfig, nil, ob)
	}
}

// ephemeralRan reports whether the pod's status shows that its ephemeral container name was created once.
func ephemeralRan(pod *corev1.Pod, name string) bool {
	cs := previousStatus(pod.Status.EphemeralContainerStatuses, name)
	return cs != nil && cs.ContainerID != ""
}

func previousStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	if i := slices.IndexFunc(list, func(cs corev1.ContainerStatus) bool { return cs.Name == name }); i >= 0 {
		return &list[i]
	}
	return nil
}

// ephemeralSpec is the pod's ephemeral container name, or nil.
func ephemeralSpec(pod *corev1.Pod, name string) *corev1.EphemeralContainer {
	i := slices.IndexFunc(pod.Spec.EphemeralContainers, func(ec corev1.EphemeralContainer) bool { return ec.Name == name })
	if i < 0 {
		return nil
	}
	return &pod.Spec.EphemeralContainers[i]
}

// ephemeralContainerSpecs are the pod's ephemeral containers as containers (for stopping them with the rest).
func ephemeralContainerSpecs(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out = append(out, (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// targetNamespace points the CRI config of the pod's container name at its target's process namespace when name
// is an ephemeral container with a targetContainerName: NamespaceMode TARGET with the runtime ID of the target's
// newest instance (upstream's getTargetID: it must have been created). A pod whose containers share one process
// namespace (shareProcessNamespace, hostPID) keeps it: the target is in it already.
func targetNamespace(pod *corev1.Pod, name string, cfg *runtimeapi.ContainerConfig, ob *observed) error {
	ec := ephemeralSpec(pod, name)
	if ec == nil || ec.TargetContainerName == "" || sharesPIDNamespace(pod) {
		return nil
	}
	target := ob.containers[ec.TargetContainerName].latest()
	if target == nil {
		return fmt.Errorf("unable to find target container %v", ec.TargetContainerName)
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.SecurityContext == nil {
		cfg.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{}
	}
	ns := cfg.Linux.SecurityContext.NamespaceOptions
	if ns == nil {
		ns = podNamespaces(pod)
		cfg.Linux.SecurityContext.NamespaceOptions = ns
	}
	ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, target.Id
	return nil
}

func sharesPIDNamespace(pod *corev1.Pod) bool {
	return pod.Spec.HostPID || (pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace)
}

// podNamespaces are the namespaces of a container of pod as upstream's namespacesForPod has them: the pod's
// network and IPC (the node's with hostNetwork, hostIPC), a process namespace of its own.
func podNamespaces(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER,
		Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// ephemeralStatuses are the pod's ephemeral container statuses, sorted by name as upstream's status manager
// keeps them. Never ready, no started flag (ephemeral containers have no probes); an instance that was created
// is reported as it is, never waiting to restart. One the status showed created but the runtime no longer has
// (its sandbox was replaced) ended unseen: terminated, with upstream's ContainerStatusUnknown when its end was
// not observed.
func ephemeralStatuses(pod *corev1.Pod, ob observed, runtimeName, created string) []corev1.ContainerStatus {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
		prev := previousStatus(pod.Status.EphemeralContainerStatuses, c.Name)
		switch cur := ob.containers[c.Name].latest(); {
		case cur != nil:
			cs.ContainerID, cs.ImageID = containerID(runtimeName, cur.Id), cur.ImageRef
			if cs.ImageID == "" {
				cs.ImageID = c.Image
			}
			cs.State = containerState(cur, runtimeName)
			if w, ok := ob.waiting[c.Name]; ok && cs.State.Waiting != nil { // created, its start failed
				cs.State.Waiting.Reason, cs.State.Waiting.Message = w[0], w[1]
			}
		case prev != nil && prev.ContainerID != "":
			cs = *prev.DeepCopy()
			if cs.State.Terminated == nil {
				t := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
					Message: "The container could not be located when the pod was terminated", ContainerID: cs.ContainerID}
				if cs.State.Running != nil {
					t.StartedAt = cs.State.Running.StartedAt
				}
				cs.State = corev1.ContainerState{Terminated: t}
			}
			cs.Ready, cs.Started = false, nil
		default:
			reason, msg := created, ""
			if w, ok := ob.waiting[c.Name]; ok {
				reason, msg = w[0], w[1]
			}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
		}
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b corev1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ephemeralTerminationMessages fills in the message of every exited ephemeral container instance that has none
// from the runtime, as terminationMessages does for the others (remembered by instance, read once).
func (w *worker) ephemeralTerminationMessages(ctx context.Context, pod *corev1.Pod, ob observed) {
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		for _, s := range ob.containers[c.Name] {
			if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.Message != "" {
				continue
			}
			msg, ok := w.messages[s.Id]
			if !ok {
				msg = w.p.vols.terminationMessage(ctx, pod, c, s)
				w.messages[s.Id] = msg
			}
			s.Message = msg
		}
	}
}
