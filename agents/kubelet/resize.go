package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// In-place pod resize (KEP 1287) on the node, as upstream's kubelet does it:
//
//   - admission: a pod's containers' resources are allocated (allocations) when the worker first sees it; a
//     later spec asking for others (a pods/resize) is allocated only when it fits the node — its requests within
//     the node's allocatable less what the node's other pods were allocated. Until then the pod runs with what
//     it was allocated and carries PodResizePending (Deferred: it may fit later and is retried at every sync;
//     Infeasible: this node can never do it).
//   - actuation: a running container whose resources differ from its allocation is updated in place through
//     the runtime (UpdateContainerResources) or, where its resizePolicy says RestartContainer for a resource
//     that changed, restarted with the new ones; PodResizeInProgress is written before and stays while one
//     could not be applied (reason Error: a memory limit below the container's usage, a runtime error).
//   - status: every container with an instance reports allocatedResources (its allocated requests) and
//     resources (what it runs with: the allocation, or for a running container what was last applied to it).

// resizeState is a worker's in-place resize bookkeeping, owned by its goroutine.
type resizeState struct {
	// pending is the PodResizePending condition (nil: none): the spec asks for resources not allocated.
	pending *corev1.PodCondition
	// pendingEvent is the reason and generation last reported by an event, so a resize is reported once.
	pendingEvent string
	// generation is that of the resize last allocated: PodResizeInProgress's observedGeneration.
	generation int64
	// actuated are the resources applied to each running container instance, as far as this worker knows.
	actuated map[string]actuatedResources
	// unapplied are the containers whose allocation could not be applied at the last pass, with why.
	unapplied map[string]string
	// inProgress: PodResizeInProgress has been written and not yet cleared.
	inProgress bool
}

// actuatedResources are the resources a container instance runs with.
type actuatedResources struct {
	id  string
	res corev1.ResourceRequirements
}

// Upstream's reasons of a resize that cannot be allocated yet, for its events (the condition says Deferred).
const (
	reasonOutOfCPU    = "OutOfcpu"
	reasonOutOfMemory = "OutOfmemory"
)

// admitResize returns the pod as the node runs it: with the resources allocated to its containers. A pod seen
// for the first time is allocated what it asks; a spec asking for other resources is allocated if it fits the
// node (the returned pod then has them), else PodResizePending says why.
func (w *worker) admitResize(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	desired := podResources(pod)
	alloc, ok := w.p.alloc.get(pod.UID)
	if !ok {
		if err := w.p.alloc.set(pod.UID, desired); err != nil {
			w.p.log.Warn("recording the pod's allocated resources failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		return pod
	}
	if sameResources(desired, alloc) {
		w.resize.pending, w.resize.pendingEvent = nil, ""
		return pod
	}
	allocated := withResources(pod, alloc)
	infeasible, reason, msg := resizeInfeasible(pod)
	if !infeasible {
		var fits bool
		fits, reason, msg = w.p.resizeFits(ctx, pod)
		if fits {
			return w.acceptResize(pod, allocated, desired)
		}
	}
	w.setPending(pod, infeasible, reason, msg)
	return allocated
}

// acceptResize allocates the resources the pod now asks for.
func (w *worker) acceptResize(pod, allocated *corev1.Pod, desired map[string]corev1.ResourceRequirements) *corev1.Pod {
	if err := w.p.alloc.set(pod.UID, desired); err != nil {
		// Not recorded, not allocated: the next sync tries again.
		w.p.log.Warn("recording the pod's allocated resources failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return allocated
	}
	w.resize.pending, w.resize.pendingEvent = nil, ""
	w.resize.generation = pod.Generation
	clear(w.resize.unapplied)
	w.resize.inProgress = false // a new resize: its InProgress is written afresh, with its generation
	w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "ResizeStarted", "%s", resizeMessage("Pod resize started", pod, ""))
	return pod
}

// setPending records why the pod's resize waits, reporting it by an event once per reason and generation.
func (w *worker) setPending(pod *corev1.Pod, infeasible bool, reason, msg string) {
	condReason := corev1.PodReasonDeferred
	if infeasible {
		condReason = corev1.PodReasonInfeasible
	}
	now := apiTime(w.p.cfg.Clock.Now())
	c := &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: condReason, Message: msg,
		ObservedGeneration: pod.Generation, LastProbeTime: now, LastTransitionTime: now}
	if old := w.resize.pending; old != nil && old.Reason == c.Reason {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			c.LastProbeTime = old.LastProbeTime
		}
	}
	w.resize.pending = c
	if key := fmt.Sprintf("%s/%d", reason, pod.Generation); w.resize.pendingEvent != key {
		w.resize.pendingEvent = key
		event := "ResizeDeferred"
		if infeasible {
			event = "ResizeInfeasible"
		}
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, event, "%s", resizeMessage("Pod resize "+reason, pod, msg))
	}
}

// resizeInfeasible reports a resize this node can never carry out: one of a pod with pod-level resources, which
// the node does not apply to the pod's cgroup (the API refuses such resizes as well).
func resizeInfeasible(pod *corev1.Pod) (bool, string, string) {
	if r := pod.Spec.Resources; r != nil && len(r.Requests)+len(r.Limits) > 0 {
		return true, corev1.PodReasonInfeasible, "In-place resize of pods with pod-level resources is not supported on this node"
	}
	return false, "", ""
}

// resizeFits reports whether pod, with the resources its spec asks for, fits the node beside the other pods'
// allocations; when not, upstream's reason and message ("Node didn't have enough resource: cpu, requested:
// 5000, used: 2000, capacity: 4000", cpu in millicores, memory in bytes).
func (p *Pods) resizeFits(ctx context.Context, pod *corev1.Pod) (bool, string, string) {
	allocatable, err := p.objs.allocatable(ctx)
	if err != nil {
		return false, "InvalidNodeInfo", "Kubelet cannot get node info."
	}
	return fitsNode(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), p.allocatedRequests(pod), allocatable)
}

// fitsNode checks requests against allocatable less used, cpu first, as upstream's predicate admission does.
func fitsNode(requests, used, allocatable corev1.ResourceList) (bool, string, string) {
	for _, r := range []struct {
		name   corev1.ResourceName
		reason string
		value  func(q resource.Quantity) int64
	}{
		{corev1.ResourceCPU, reasonOutOfCPU, func(q resource.Quantity) int64 { return q.MilliValue() }},
		{corev1.ResourceMemory, reasonOutOfMemory, func(q resource.Quantity) int64 { return q.Value() }},
	} {
		req, ok := requests[r.name]
		if !ok || req.IsZero() {
			continue
		}
		want, have, capacity := r.value(req), r.value(used[r.name]), r.value(allocatable[r.name])
		if want > capacity-have {
			return false, r.reason, fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				r.name, want, have, capacity)
		}
	}
	return true, "", ""
}

// allocatedRequests sums the requests the node allocated to its pods other than pod that are not finished.
func (p *Pods) allocatedRequests(pod *corev1.Pod) corev1.ResourceList {
	p.mu.Lock()
	others := make([]*worker, 0, len(p.workers))
	for uid, w := range p.workers {
		if uid != pod.UID {
			others = append(others, w)
		}
	}
	p.mu.Unlock()
	used := corev1.ResourceList{}
	for _, w := range others {
		w.mu.Lock()
		other := w.pod
		w.mu.Unlock()
		if other == nil || terminal(other.Status.Phase) {
			continue
		}
		alloc, ok := p.alloc.get(other.UID)
		if !ok {
			continue // not admitted yet
		}
		for name, q := range resourcehelper.PodRequests(withResources(other, alloc), resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	return used
}

// actuateResize applies the pod's allocated resources to its running containers that do not run with them:
// in place through the runtime, or by a restart of the container where its resizePolicy asks for one.
// PodResizeInProgress is written first.
func (w *worker) actuateResize(ctx context.Context, pod *corev1.Pod, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) {
	if w.resize.actuated == nil {
		w.resize.actuated, w.resize.unapplied = map[string]actuatedResources{}, map[string]string{}
	}
	type change struct {
		c        *corev1.Container
		cur      *runtimeapi.ContainerStatus
		cpu, mem bool
	}
	var todo []change
	for _, c := range allContainers(pod) {
		cur := ob.containers[c.Name].latest()
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			delete(w.resize.unapplied, c.Name)
			continue
		}
		if cpu, mem := w.resizeNeeded(c, cur); cpu || mem {
			todo = append(todo, change{c, cur, cpu, mem})
		} else {
			delete(w.resize.unapplied, c.Name)
		}
	}
	if len(todo) == 0 {
		w.resizeDone(pod)
		return
	}
	w.markInProgress(ctx, pod)
	for _, t := range todo {
		if needsRestart(t.c, t.cpu, t.mem) {
			w.kill(ctx, pod, t.c, t.cur.Id, gracePeriod(pod), fmt.Sprintf("Container %s resize requires restart", t.c.Name))
			w.start(ctx, pod, t.c, sandboxID, sbConfig, ob.containers[t.c.Name], ob)
			delete(w.resize.actuated, t.c.Name) // the new instance is created with the allocation
			delete(w.resize.unapplied, t.c.Name)
			continue
		}
		if err := w.updateResources(ctx, t.c, t.cur, t.mem); err != nil {
			// Retried at every sync; reported when it first fails, or fails otherwise.
			if w.resize.unapplied[t.c.Name] != err.Error() {
				w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "ResizeError", "%s", resizeMessage("Pod resize error", pod, err.Error()))
			}
			w.resize.unapplied[t.c.Name] = err.Error()
			continue
		}
		w.resize.actuated[t.c.Name] = actuatedResources{id: t.cur.Id, res: *t.c.Resources.DeepCopy()}
		delete(w.resize.unapplied, t.c.Name)
	}
	if len(w.resize.unapplied) == 0 {
		w.resizeDone(pod)
	}
}

// resizeNeeded reports whether the container's running instance needs its cpu or memory changed to match the
// allocation. An instance this worker has not applied anything to runs with what it was created with: the
// allocation at the time, or — after an agent restart during a resize — what the runtime reports.
func (w *worker) resizeNeeded(c *corev1.Container, cur *runtimeapi.ContainerStatus) (cpu, mem bool) {
	if a, ok := w.resize.actuated[c.Name]; ok && a.id == cur.Id {
		return changedResources(a.res, c.Resources)
	}
	if have := cur.GetResources().GetLinux(); have != nil {
		if cpu, mem = changedLinux(have, linuxResources(c.Resources)); cpu || mem {
			return cpu, mem
		}
	}
	w.resize.actuated[c.Name] = actuatedResources{id: cur.Id, res: *c.Resources.DeepCopy()}
	return false, false
}

// needsRestart reports whether the container's resizePolicy asks for a restart to change the resources that
// changed (NotRequired when it names none, as upstream).
func needsRestart(c *corev1.Container, cpu, mem bool) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy == corev1.RestartContainer &&
			((p.ResourceName == corev1.ResourceCPU && cpu) || (p.ResourceName == corev1.ResourceMemory && mem)) {
			return true
		}
	}
	return false
}

// updateResources applies the container's allocated resources to its running instance through the runtime. A
// memory limit lowered below what the container uses is not applied (the kernel would have to kill it), as
// upstream's kubelet refuses it, when the runtime can say how much it uses.
func (w *worker) updateResources(ctx context.Context, c *corev1.Container, cur *runtimeapi.ContainerStatus, mem bool) error {
	want := linuxResources(c.Resources)
	if mem && want.MemoryLimitInBytes > 0 {
		if err := w.checkMemoryUsage(ctx, c, cur, want.MemoryLimitInBytes); err != nil {
			return err
		}
	}
	if err := w.p.cfg.Runtime.UpdateContainerResources(ctx, cur.Id, &runtimeapi.ContainerResources{Linux: want}); err != nil {
		return fmt.Errorf("updating the resources of container %q failed: %w", c.Name, describe(err))
	}
	return nil
}

// checkMemoryUsage refuses a memory limit below the container's current usage.
func (w *worker) checkMemoryUsage(ctx context.Context, c *corev1.Container, cur *runtimeapi.ContainerStatus, limit int64) error {
	sp, ok := w.p.cfg.Runtime.(runtime.StatsProvider)
	if !ok {
		return nil
	}
	stats, err := sp.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: cur.Id})
	if err != nil || len(stats) == 0 || stats[0].GetMemory().GetUsageBytes() == nil {
		return fmt.Errorf("cannot decrease memory limits: missing container %q memory usage", c.Name)
	}
	if usage := stats[0].GetMemory().GetUsageBytes().GetValue(); usage >= uint64(limit) {
		return fmt.Errorf("cannot decrease memory limits: attempting to set container %q memory limit (%d) below current usage (%d)",
			c.Name, limit, usage)
	}
	return nil
}

// markInProgress writes PodResizeInProgress into the pod's status (what it last wrote, nothing else changed)
// before the resize is applied, so clients see it while it is.
func (w *worker) markInProgress(ctx context.Context, pod *corev1.Pod) {
	if w.resize.inProgress {
		return
	}
	st := *w.newest(pod).Status.DeepCopy()
	w.setInProgress(pod, &st, "", "")
	w.writeStatus(ctx, pod, st)
	w.resize.inProgress = true
}

// resizeDone notes that every running container runs with its allocation, reporting a resize that completed.
func (w *worker) resizeDone(pod *corev1.Pod) {
	if w.resize.inProgress {
		w.resize.inProgress = false
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "ResizeCompleted", "%s", resizeMessage("Pod resize completed", pod, ""))
	}
}

// setInProgress sets PodResizeInProgress in st, keeping its transition time while its reason stays.
func (w *worker) setInProgress(pod *corev1.Pod, st *corev1.PodStatus, reason, msg string) {
	gen := w.resize.generation
	i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodResizeInProgress })
	if gen == 0 { // a resize allocated before the agent restarted
		gen = pod.Generation
		if i >= 0 {
			gen = st.Conditions[i].ObservedGeneration
		}
	}
	now := apiTime(w.p.cfg.Clock.Now())
	c := corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: gen, LastProbeTime: now, LastTransitionTime: now}
	if i < 0 {
		st.Conditions = append(st.Conditions, c)
		return
	}
	if old := st.Conditions[i]; old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Message == msg {
			c.LastProbeTime = old.LastProbeTime
		}
	}
	st.Conditions[i] = c
}

// resizeStatus completes a pod status computed from what the runtime holds: each container with an instance
// reports its allocated requests and the resources it runs with, and the resize conditions say what is left to
// do.
func (w *worker) resizeStatus(pod *corev1.Pod, st *corev1.PodStatus, ob observed) {
	alloc, ok := w.p.alloc.get(pod.UID)
	if !ok {
		alloc = podResources(pod)
	}
	fill := func(statuses []corev1.ContainerStatus) {
		for i := range statuses {
			cs := &statuses[i]
			cur := ob.containers[cs.Name].latest()
			allocated, known := alloc[cs.Name]
			if cur == nil || !known {
				continue
			}
			if len(allocated.Requests) > 0 {
				cs.AllocatedResources = allocated.Requests.DeepCopy()
			}
			res := *allocated.DeepCopy()
			if a, ok := w.resize.actuated[cs.Name]; ok && a.id == cur.Id && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				res = withActuated(allocated, a.res)
			}
			cs.Resources = &res
		}
	}
	fill(st.InitContainerStatuses)
	fill(st.ContainerStatuses)
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress && !w.resize.inProgress
	})
	if w.resize.pending != nil {
		st.Conditions = append(st.Conditions, *w.resize.pending)
	}
	if w.resize.inProgress {
		var reason, msg string
		if errs := w.unappliedErrors(); errs != "" {
			reason, msg = corev1.PodReasonError, errs
		}
		w.setInProgress(pod, st, reason, msg)
	}
}

// unappliedErrors is why containers' allocations could not be applied, one message per container.
func (w *worker) unappliedErrors() string {
	names := make([]string, 0, len(w.resize.unapplied))
	for name := range w.resize.unapplied {
		names = append(names, name)
	}
	slices.Sort(names)
	msgs := make([]string, len(names))
	for i, name := range names {
		msgs[i] = w.resize.unapplied[name]
	}
	return strings.Join(msgs, "; ")
}

// resizeMessage is upstream's resize event message: what, then the pod's container resources as JSON.
func resizeMessage(what string, pod *corev1.Pod, errMsg string) string {
	type container struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers,omitempty"`
		Generation     int64       `json:"generation"`
		Error          string      `json:"error,omitempty"`
	}{Generation: pod.Generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		summary.InitContainers = append(summary.InitContainers, container{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, container{c.Name, c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return what
	}
	return what + ": " + string(b)
}
