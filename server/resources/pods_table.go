package resources

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// podColumns are kubectl's pod columns; IP, node, nominated node and readiness gates show with -o wide.
var podColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
	{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
	{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been " +
		"restarted and when the last container in this pod has restarted."},
	ageColumn,
	{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
	{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
	{Name: "Nominated Node", Type: "string", Priority: 1,
		Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
	{Name: "Readiness Gates", Type: "string", Priority: 1,
		Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
}

// podCells renders a pod the way kubectl does: "1/2" ready containers, the computed status, restarts with the
// time since the last one ("3 (5m ago)"), then the wide columns.
func podCells(obj runtime.Object, now time.Time) []any {
	pod := obj.(*corev1.Pod)
	s := summarizePod(pod)
	restarts := fmt.Sprint(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, duration.HumanDuration(now.Sub(s.lastRestart.Time)))
	}
	return []any{pod.Name, fmt.Sprintf("%d/%d", s.ready, s.total), s.reason, restarts, age(pod.CreationTimestamp, now),
		orNone(podIP(&pod.Status)), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), readinessGates(pod)}
}

// orNone is s, or "<none>" when empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// readinessGates is "true/total" over the pod's readiness gates, "<none>" without any.
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	n := 0
	for _, g := range pod.Spec.ReadinessGates {
		if podCondition(pod, g.ConditionType) == corev1.ConditionTrue {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(pod.Spec.ReadinessGates))
}

// podCondition is the status of the pod's condition t, "" when absent.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// podSummary is what kubectl shows of a pod's containers.
type podSummary struct {
	ready, total int
	restarts     int
	lastRestart  metav1.Time
	reason       string
}

// summarizePod computes the READY, STATUS and RESTARTS cells: the phase or status reason, overridden by the first
// unfinished init container ("Init:0/1", "Init:CrashLoopBackOff"), then by the containers' waiting or terminated
// reasons, and by deletion ("Terminating", "Unknown" on a lost node). Sidecars (init containers with restartPolicy
// Always) count as containers.
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.total++
		}
	}
	sidecarRestarts, sidecarLast, initializing := s.summarizeInit(pod, sidecars)
	if !initializing || podCondition(pod, corev1.PodInitialized) == corev1.ConditionTrue {
		s.restarts, s.lastRestart = sidecarRestarts, sidecarLast
		s.summarizeContainers(pod)
	}
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost":
		s.reason = "Unknown"
	case pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
		s.reason = "Terminating"
	}
	return s
}

// summarizeInit walks the init container statuses up to the first unfinished one, counting restarts and ready
// sidecars. It returns the sidecars' own restarts and last restart, and whether the pod is still initializing.
func (s *podSummary) summarizeInit(pod *corev1.Pod, sidecars map[string]bool) (int, metav1.Time, bool) {
	sidecarRestarts, sidecarLast := 0, metav1.Time{}
	n := len(pod.Spec.InitContainers)
	for i, st := range pod.Status.InitContainerStatuses {
		s.restarts += int(st.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, st)
		if sidecars[st.Name] {
			sidecarRestarts += int(st.RestartCount)
			sidecarLast = laterTermination(sidecarLast, st)
		}
		t, w := st.State.Terminated, st.State.Waiting
		switch {
		case t != nil && t.ExitCode == 0:
			continue
		case sidecars[st.Name] && st.Started != nil && *st.Started:
			if st.Ready {
				s.ready++
			}
			continue
		case t != nil:
			s.reason = "Init:" + terminationReason(t)
		case w != nil && w.Reason != "" && w.Reason != "PodInitializing":
			s.reason = "Init:" + w.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, n)
		}
		return sidecarRestarts, sidecarLast, true
	}
	return sidecarRestarts, sidecarLast, false
}

// summarizeContainers folds the container statuses (last first) into restarts, ready count and reason; a
// "Completed" pod with a container still running shows Running (or NotReady).
func (s *podSummary) summarizeContainers(pod *corev1.Pod) {
	running := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		st := pod.Status.ContainerStatuses[i]
		s.restarts += int(st.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, st)
		switch w, t := st.State.Waiting, st.State.Terminated; {
		case w != nil && w.Reason != "":
			s.reason = w.Reason
		case t != nil:
			s.reason = terminationReason(t)
		case st.Ready && st.State.Running != nil:
			running = true
			s.ready++
		}
	}
	if s.reason == "Completed" && running {
		s.reason = "NotReady"
		if podCondition(pod, corev1.PodReady) == corev1.ConditionTrue {
			s.reason = "Running"
		}
	}
}

// terminationReason is a terminated container's reason, else "Signal:N" or "ExitCode:N".
func terminationReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}

// laterTermination is the later of last and the end of st's previous run.
func laterTermination(last metav1.Time, st corev1.ContainerStatus) metav1.Time {
	if t := st.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
		return t.FinishedAt
	}
	return last
}
