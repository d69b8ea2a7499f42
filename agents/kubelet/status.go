package kubelet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// observed is what one sync saw of a pod in the runtime, from which its status is computed.
type observed struct {
	sandboxReady bool
	podIP        string
	containers   map[string]instances
	// waiting holds why a container is not running when the runtime cannot say (CrashLoopBackOff,
	// CreateContainerConfigError, ...): reason and message by container name.
	waiting map[string][2]string
	// ready and started are the readiness and startup probe results by container name (absent: no probe).
	ready, started map[string]bool
	// initDone: every init container has completed; initFailed: one failed and will not be retried.
	initDone, initFailed bool
	// startedAny: this sync started a container (what the runtime holds changed since it was read).
	startedAny bool
}

// podStatus computes a pod's status from what the runtime holds, as kubelet's generateAPIPodStatus does.
func podStatus(pod *corev1.Pod, ob observed, runtimeName, hostIP string, now time.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.HostIP = hostIP
	st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	if ob.podIP != "" {
		st.PodIP, st.PodIPs = ob.podIP, []corev1.PodIP{{IP: ob.podIP}}
	} else if pod.Spec.HostNetwork {
		st.PodIP, st.PodIPs = hostIP, []corev1.PodIP{{IP: hostIP}}
	}
	if st.StartTime == nil {
		t := apiTime(now)
		st.StartTime = &t
	}
	// A container not created yet waits with ContainerCreating, or PodInitializing in a pod with init containers
	// (upstream's default waiting state, init and app containers alike).
	created := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		created = "PodInitializing"
	}
	st.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, pod.Status.InitContainerStatuses, ob, runtimeName, created, true)
	st.ContainerStatuses = containerStatuses(pod.Spec.Containers, pod.Status.ContainerStatuses, ob, runtimeName, created, false)
	st.EphemeralContainerStatuses = ephemeralStatuses(pod, ob, runtimeName, created) // ephemeral.go
	st.Phase = podPhase(pod, st, ob)
	// The generation of the spec this status was computed from, for clients waiting for a change to take effect.
	st.ObservedGeneration = pod.Generation
	setConditions(pod, &st, ob, now)
	return st
}

func containerStatuses(specs []corev1.Container, prev []corev1.ContainerStatus, ob observed, runtimeName, created string, init bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for i := range specs {
		c := &specs[i]
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		in := ob.containers[c.Name]
		if cur := in.latest(); cur != nil {
			cs.ContainerID = containerID(runtimeName, cur.Id)
			if cur.ImageRef != "" {
				cs.ImageID = cur.ImageRef // the runtime's reference of the image it runs (containerd: a digest)
			}
			cs.RestartCount = int32(cur.Metadata.GetAttempt())
			cs.State = containerState(cur, runtimeName)
			if p := in.previous(); p != nil && p.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				cs.LastTerminationState = containerState(p, runtimeName)
			}
			if cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && !init {
				if w, ok := ob.waiting[c.Name]; ok { // exited and waiting to restart
					cs.LastTerminationState = cs.State
					cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w[0], Message: w[1]}}
				}
			}
		} else {
			reason, msg := created, ""
			if w, ok := ob.waiting[c.Name]; ok {
				reason, msg = w[0], w[1]
			}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
			// The restart count survives a sandbox that was replaced: keep what the API had.
			for _, p := range prev {
				if p.Name == c.Name {
					cs.RestartCount = p.RestartCount
				}
			}
		}
		running := cs.State.Running != nil
		// A probe without a result yet (its prober starts on the next sync) counts as not passed, as upstream.
		started := running
		if s, ok := ob.started[c.Name]; ok {
			started = running && s
		} else if c.StartupProbe != nil {
			started = false
		}
		cs.Started = &started
		ready := running && started
		if r, ok := ob.ready[c.Name]; ok {
			ready = ready && r
		} else if c.ReadinessProbe != nil {
			ready = false
		}
		if init && !isSidecar(c) {
			ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		cs.Ready = ready
		out = append(out, cs)
	}
	return out
}

func containerState(s *runtimeapi.ContainerStatus, runtimeName string) corev1.ContainerState {
	switch s.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: apiTime(time.Unix(0, s.StartedAt))}}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := s.Reason
		if reason == "" {
			reason = "Completed"
			if s.ExitCode != 0 {
				reason = "Error"
			}
		}
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: s.ExitCode, Reason: reason,
			Message: s.Message, StartedAt: apiTime(time.Unix(0, s.StartedAt)),
			FinishedAt: apiTime(time.Unix(0, s.FinishedAt)), ContainerID: containerID(runtimeName, s.Id)}}
	}
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podPhase is upstream's getPhase: Pending until initialized and every container has started once; then
// Running while any runs or will be restarted; Succeeded or Failed once all stopped for good.
func podPhase(pod *corev1.Pod, st corev1.PodStatus, ob observed) corev1.PodPhase {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return pod.Status.Phase // terminal phases never change
	}
	if ob.initFailed {
		return corev1.PodFailed
	}
	if !ob.initDone {
		return corev1.PodPending
	}
	var waiting, running, stopped, succeeded int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
			if cs.LastTerminationState.Terminated.ExitCode == 0 {
				succeeded++
			}
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure:
			return corev1.PodRunning
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// setConditions sets PodReadyToStartContainers, Initialized, ContainersReady and Ready (PodScheduled is the
// scheduler's), moving lastTransitionTime only on a change of status.
func setConditions(pod *corev1.Pod, st *corev1.PodStatus, ob observed, now time.Time) {
	set := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: apiTime(now),
			ObservedGeneration: pod.Generation}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		i := slices.IndexFunc(st.Conditions, func(x corev1.PodCondition) bool { return x.Type == t })
		if i < 0 {
			st.Conditions = append(st.Conditions, c)
			return
		}
		if st.Conditions[i].Status == c.Status {
			c.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		c.LastProbeTime = st.Conditions[i].LastProbeTime
		st.Conditions[i] = c
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	set(corev1.PodReadyToStartContainers, ob.sandboxReady && !terminal, "", "")
	var notInit []string
	for _, cs := range st.InitContainerStatuses {
		if !cs.Ready && !(cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0) {
			notInit = append(notInit, cs.Name)
		}
	}
	set(corev1.PodInitialized, ob.initDone || len(notInit) == 0, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " ")))
	var notReady []string
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	reason, msg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if st.Phase == corev1.PodSucceeded {
		reason, msg = "PodCompleted", ""
	}
	allReady := len(notReady) == 0 && !terminal
	set(corev1.ContainersReady, allReady, reason, msg)
	if allReady {
		if missing := unmetGates(pod, st); len(missing) > 0 {
			set(corev1.PodReady, false, "ReadinessGatesNotReady",
				fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", missing[0]))
			return
		}
	}
	set(corev1.PodReady, allReady, reason, msg)
}

// unmetGates are the pod's readiness gates whose condition is not True.
func unmetGates(pod *corev1.Pod, st *corev1.PodStatus) []string {
	var out []string
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 || st.Conditions[i].Status != corev1.ConditionTrue {
			out = append(out, string(g.ConditionType))
		}
	}
	return out
}

// apiTime is t as the API keeps it (whole seconds, UTC), so a computed status compares equal to the stored one.
func apiTime(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
