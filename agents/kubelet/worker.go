package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// worker converges one pod. Its goroutine owns everything but pod and removed.
type worker struct {
	p    *Pods
	uid  types.UID
	wake chan struct{}

	mu      sync.Mutex // guards pod and removed
	pod     *corev1.Pod
	removed bool // the pod is gone from the API

	backoffs  map[string]*crashBackoff
	pulls     map[string]*imagePull // by image, while it is not there
	written   map[string]string     // volume file-set hashes
	messages  map[string]string     // termination messages by container instance (ID)
	volumesAt time.Time
	last      *corev1.PodStatus // the status last written
	lastRV    string            // the resourceVersion of that write
	probes    *probes
	// synced is what sync read of the runtime just before converging, handed to converge's first observe
	// (which would only read the same again); nil at any other time.
	synced *observedRead
	// leaveStart gives up the pod's place in the start gate while converge holds it (nil otherwise).
	leaveStart func()
	resize     resizeState // in-place resize (resize.go)
}

func newWorker(p *Pods, uid types.UID) *worker {
	w := &worker{p: p, uid: uid, wake: make(chan struct{}, 1), backoffs: map[string]*crashBackoff{}, pulls: map[string]*imagePull{}, written: map[string]string{},
		messages: map[string]string{}}
	w.probes = newProbes(w)
	return w
}

func (w *worker) set(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.poke()
}

func (w *worker) markGone() {
	w.mu.Lock()
	w.removed = true
	w.mu.Unlock()
	w.poke()
}

// goneOrDeleted says whether the pod has been removed from the API or marked for deletion since the sync began.
func (w *worker) goneOrDeleted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.removed || w.pod.DeletionTimestamp != nil
}

// poke asks for a sync soon (never blocks; one pending request is enough).
func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) loop(ctx context.Context) {
	defer w.p.done(w.uid)
	defer w.probes.stopAll()
	// The relist runs on real time (upstream's PLEG): it notices what happens in the runtime, while the clock
	// (fake in tests) times back-offs, probes and grace periods.
	t := time.NewTicker(w.p.cfg.Resync)
	defer t.Stop()
	for {
		if w.sync(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// sync does one round for the pod and reports whether the worker is finished.
func (w *worker) sync(ctx context.Context) bool {
	w.mu.Lock()
	pod, removed := w.pod, w.removed
	w.mu.Unlock()
	if removed {
		w.teardown(ctx, pod, 0)
		return true
	}
	pod = w.newest(pod)
	if pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod)
	}
	if terminal(pod.Status.Phase) || (w.last != nil && terminal(w.last.Phase)) {
		// Finished for good (the API may not show our own write yet): nothing runs or restarts again.
		w.stopAll(ctx, pod, 0)
		return false
	}
	if w.deadlineExceeded(pod) {
		// activeDeadlineSeconds ran out: stop everything and fail the pod, as upstream's kubelet does.
		w.stopAll(ctx, pod, gracePeriod(pod))
		ob, _, err := w.read(ctx, pod)
		if err != nil {
			w.p.runtimeUnreachable(err)
			return false
		}
		st := w.status(pod, ob)
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		w.writeStatus(ctx, pod, st)
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
		return false
	}
	pod = w.admitResize(ctx, pod) // the pod with the resources the node allocated it
	first, ok, err := w.read(ctx, pod)
	if err != nil {
		// The runtime did not answer (containerd died or is stuck). What the worker would see is no sandbox and no
		// containers: the status computed from that — containers waiting without IDs, the pod Pending — would be
		// false, and converging would replace a sandbox that may well be running. As upstream's kubelet, skip the
		// sync ("skipping pod synchronization - container runtime is down"): the pod and its status stay as last
		// reported, and the next sync tries again.
		w.p.runtimeUnreachable(err)
		return false
	}
	w.p.runtimeAnswered()
	w.synced = &observedRead{first, ok}
	ob := w.converge(ctx, pod)
	w.synced = nil
	if ob.startedAny {
		// Report the containers just started now rather than at the next sync: read the runtime again, keeping
		// what converge decided (waiting reasons, init progress).
		if again, ok := w.observe(ctx, pod); ok {
			again.waiting, again.initDone, again.initFailed = ob.waiting, ob.initDone, ob.initFailed
			for name := range again.waiting {
				if cur := again.containers[name].latest(); cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					delete(again.waiting, name)
				}
			}
			ob = again
		}
	}
	st := w.status(pod, ob)
	w.writeStatus(ctx, pod, st)
	if terminal(st.Phase) {
		w.stopAll(ctx, pod, 0) // sidecars and anything left
	}
	return false
}

// deadlineExceeded reports whether the pod has been active on the node longer than its activeDeadlineSeconds.
func (w *worker) deadlineExceeded(pod *corev1.Pod) bool {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false
	}
	start := pod.Status.StartTime
	if w.last != nil && w.last.StartTime != nil {
		start = w.last.StartTime
	}
	if start == nil {
		return false
	}
	return !w.p.cfg.Clock.Now().Before(start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second))
}

func terminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

func (w *worker) status(pod *corev1.Pod, ob observed) corev1.PodStatus {
	st := podStatus(pod, ob, w.p.cfg.RuntimeName, w.p.cfg.NodeIP(), w.p.cfg.Clock.Now())
	if w.last != nil && w.last.StartTime != nil {
		st.StartTime = w.last.StartTime // the informer may not show our first write yet
	}
	w.resizeStatus(pod, &st, ob)
	return st
}

// terminate stops a deleted pod's containers within its grace period, writes their final status, then removes
// the API object (grace 0, this pod's UID only), which ends the worker through the watch. While the runtime does
// not answer it does nothing but wait for the next sync.
func (w *worker) terminate(ctx context.Context, pod *corev1.Pod) bool {
	grace := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	w.stopAll(ctx, pod, grace)
	ob, ok, err := w.read(ctx, pod)
	if err != nil {
		// The runtime did not answer, so whether the containers have stopped is unknown: the API object stays
		// (Terminating) until it answers again, as upstream's, since a replacement of the same name (a
		// StatefulSet's) must not start beside them.
		w.p.runtimeUnreachable(err)
		return false
	}
	w.p.runtimeAnswered()
	// The final status, written before the final delete as upstream's kubelet does: a pod that a finalizer keeps
	// in the API after this shows it stopped. Without a sandbox to read (already removed), it is the last status
	// written, its containers then unknown.
	st := w.newest(pod).Status
	if ok {
		st = w.status(pod, ob)
	}
	w.writeStatus(ctx, pod, finalStatus(st, w.p.cfg.Clock.Now()))
	zero := int64(0)
	err = w.p.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	switch {
	// Forbidden: the node authorizer no longer relates the pod to this node, because it is gone already.
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsForbidden(err):
		w.teardown(ctx, pod, 0)
		return err != nil
	default:
		w.p.log.Warn("deleting a terminated pod failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return false
	}
}

// finalStatus is a stopped pod's status: every container that still shows running or waiting is terminated,
// with upstream's ContainerStatusUnknown (exit code 137) since its end was not observed; nothing is ready; the
// phase is terminal — Succeeded when every container exited 0, else Failed — as upstream's kubelet reports a
// deleted pod whatever its restart policy.
func finalStatus(st corev1.PodStatus, now time.Time) corev1.PodStatus {
	st = *st.DeepCopy()
	allZero := true
	end := func(cs []corev1.ContainerStatus) {
		for i := range cs {
			c := &cs[i]
			if c.State.Terminated == nil {
				t := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
					Message: "The container could not be located when the pod was terminated", FinishedAt: metav1.NewTime(now)}
				if c.State.Running != nil {
					t.StartedAt = c.State.Running.StartedAt
				}
				c.State = corev1.ContainerState{Terminated: t}
			}
			c.Ready = false
			f := false
			c.Started = &f
		}
	}
	end(st.InitContainerStatuses)
	end(st.ContainerStatuses)
	end(st.EphemeralContainerStatuses)
	for _, c := range st.ContainerStatuses {
		allZero = allZero && c.State.Terminated.ExitCode == 0
	}
	if !terminal(st.Phase) {
		st.Phase = corev1.PodFailed
		if allZero && len(st.ContainerStatuses) > 0 {
			st.Phase = corev1.PodSucceeded
		}
	}
	for i, c := range st.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionFalse {
			st.Conditions[i].Status, st.Conditions[i].Reason = corev1.ConditionFalse, "PodCompleted"
			st.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		}
	}
	return st
}

// teardown removes the pod's sandboxes (and with them containers, logs and cgroups), then its directory with its
// volumes (unmounting their tmpfs) once no sandbox is left to use them. What it could not remove the orphan
// collection tries again.
func (w *worker) teardown(ctx context.Context, pod *corev1.Pod, grace int64) {
	w.probes.stopAll()
	w.p.vols.tokens.forget(w.uid)
	sbs, err := w.p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: string(w.uid)}})
	if err != nil {
		return
	}
	removed := true
	for _, sb := range sbs {
		w.p.stopContainers(ctx, sb.Id, grace)
		if err := w.p.cfg.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			removed = false
			if ctx.Err() == nil {
				w.p.log.Warn("removing a sandbox failed", "sandbox", sb.Id, "err", err)
			}
		}
	}
	if !removed {
		return
	}
	if err := w.p.vols.removePodDir(w.uid); err != nil && ctx.Err() == nil {
		w.p.log.Warn("removing the pod's directory failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// stopAll stops every running container of the pod: preStop hooks first, then SIGTERM, SIGKILL after grace.
func (w *worker) stopAll(ctx context.Context, pod *corev1.Pod, grace int64) {
	sb := w.readySandbox(ctx)
	if sb == nil {
		return
	}
	cs, err := podContainers(ctx, w.p.cfg.Runtime, sb.Id)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, c := range slices.Concat(allContainers(pod), ephemeralContainerSpecs(pod)) {
		cur := cs[c.Name].latest()
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		wg.Go(func() { w.kill(ctx, pod, c, cur.Id, grace, fmt.Sprintf("Stopping container %s", c.Name)) })
	}
	wg.Wait()
	if grace == 0 || pod.DeletionTimestamp != nil {
		_ = w.p.cfg.Runtime.StopPodSandbox(ctx, sb.Id)
	}
}

// kill runs the container's preStop hook (within the grace period) and stops it.
func (w *worker) kill(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, grace int64, msg string) {
	w.p.cfg.Recorder.Event(pod, corev1.EventTypeNormal, "Killing", msg)
	start := w.p.cfg.Clock.Now()
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
		if err := w.runHandler(hctx, pod, c, id, c.Lifecycle.PreStop); err != nil {
			w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
		cancel()
		grace = max(grace-int64(w.p.cfg.Clock.Since(start)/time.Second), 2) // upstream leaves at least 2 s
	}
	if err := w.p.cfg.Runtime.StopContainer(ctx, id, grace); err != nil && ctx.Err() == nil {
		w.p.log.Warn("stopping a container failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
	}
}

// allContainers is the pod's init and regular containers.
func allContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// readySandbox is the pod's READY sandbox, or nil (none, or the runtime did not answer).
func (w *worker) readySandbox(ctx context.Context) *runtimeapi.PodSandbox {
	sb, _ := w.listReadySandbox(ctx)
	return sb
}

// listReadySandbox is the pod's READY sandbox: nil when it has none, with the runtime's error when it could not
// be listed.
func (w *worker) listReadySandbox(ctx context.Context) (*runtimeapi.PodSandbox, error) {
	sbs, err := w.p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: string(w.uid)},
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil || len(sbs) == 0 {
		return nil, err
	}
	slices.SortFunc(sbs, func(a, b *runtimeapi.PodSandbox) int {
		return int(b.Metadata.GetAttempt()) - int(a.Metadata.GetAttempt())
	})
	return sbs[0], nil
}

// observedRead is one read of the runtime: what it showed, and whether the pod has a ready sandbox.
type observedRead struct {
	ob observed
	ok bool
}

// observe reads the pod's sandbox and containers without changing anything; false when the pod has no ready
// sandbox or the runtime did not answer. Its first call in a sync's converge returns what sync just read.
func (w *worker) observe(ctx context.Context, pod *corev1.Pod) (observed, bool) {
	if r := w.synced; r != nil {
		w.synced = nil
		return r.ob, r.ok
	}
	ob, ok, _ := w.read(ctx, pod)
	return ob, ok
}

// read reads the pod's sandbox and containers: ok is false when the pod has no ready sandbox; err is the
// runtime's when its sandboxes or containers could not be listed, and then what was read says nothing.
func (w *worker) read(ctx context.Context, pod *corev1.Pod) (ob observed, ok bool, err error) {
	ob = observed{waiting: map[string][2]string{}, ready: w.probes.readiness(), started: w.probes.startup(), initDone: true}
	sb, err := w.listReadySandbox(ctx)
	if sb == nil {
		return ob, false, err
	}
	cs, err := podContainers(ctx, w.p.cfg.Runtime, sb.Id)
	if err != nil {
		return ob, false, err
	}
	ob.containers, ob.sandboxReady = cs, true
	w.terminationMessages(ctx, pod, ob)
	w.ephemeralTerminationMessages(ctx, pod, ob)
	if st, err := w.p.cfg.Runtime.PodSandboxStatus(ctx, sb.Id, false); err == nil && st.Status.GetNetwork() != nil {
		ob.podIP = st.Status.Network.Ip
	}
	return ob, true, nil
}

// runtimeUnreachable notes a sync skipped because the runtime did not answer; the first since it last answered
// says so in the log, once for all the node's pods rather than at every pod's every sync.
func (p *Pods) runtimeUnreachable(err error) {
	if p.runtimeDown.CompareAndSwap(false, true) {
		p.log.Info("skipping pod synchronization - container runtime is down", "err", err)
	}
}

// runtimeAnswered notes a sync that could read the runtime, ending an outage runtimeUnreachable logged.
func (p *Pods) runtimeAnswered() {
	if p.runtimeDown.Load() && p.runtimeDown.CompareAndSwap(true, false) {
		p.log.Info("container runtime is answering again, pod synchronization resumes")
	}
}

// writeStatus writes the pod's status when it differs from the newest copy the worker knows (newest). As
// upstream's kubelet it PATCHes (a strategic merge patch from that copy to st, with the pod's UID as a
// precondition), so a write never conflicts with another writer's and costs no read; the patch leaves alone the
// conditions others own (PodScheduled, DisruptionTarget, readiness gates).
func (w *worker) writeStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) {
	old, next := ownStatus(w.newest(pod).Status), ownStatus(st)
	if apiequality.Semantic.DeepEqual(old, next) {
		return
	}
	patch, err := statusPatch(pod.UID, old, next)
	if err != nil {
		w.p.log.Warn("preparing the pod status patch failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	out, err := w.p.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		// NotFound: the pod is gone; a conflict or an invalid UID: a new pod of the same name, not this worker's.
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) && ctx.Err() == nil {
			w.p.log.Warn("writing the pod status failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		return
	}
	w.last, w.lastRV = &out.Status, out.ResourceVersion
}

// newest is pod with the newest status the worker knows: its own last write when the informer does not show
// it yet (resourceVersions compare), else the informer's. A status computed from an older copy would undo the
// worker's own write — conditions missing from it are new again, with a new transition time — and two copies
// alternating made a pod's status flip between them with every write.
func (w *worker) newest(pod *corev1.Pod) *corev1.Pod {
	if w.last == nil {
		return pod
	}
	if c, err := resourceversion.CompareResourceVersion(w.lastRV, pod.ResourceVersion); err == nil && c <= 0 {
		return pod
	}
	cp := *pod // the informer's object stays as it is
	cp.Status = *w.last
	return &cp
}

// ownStatus is st without the conditions the kubelet does not own.
func ownStatus(st corev1.PodStatus) corev1.PodStatus {
	st.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c corev1.PodCondition) bool {
		return !slices.Contains(ownConditions, c.Type)
	})
	return st
}

// statusPatch is the strategic merge patch taking a pod's status from old to next, with uid as a
// precondition (upstream's statusutil.PatchPodStatus: a patch carrying metadata.uid fails on a pod of the same
// name and another UID).
func statusPatch(uid types.UID, old, next corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	nextJSON, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: next})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldJSON, nextJSON, corev1.Pod{})
}

// ownConditions are the pod conditions the kubelet sets; the others (PodScheduled, DisruptionTarget, readiness
// gates) belong to someone else: the status patch leaves them alone.
var ownConditions = []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
	corev1.PodResizePending, corev1.PodResizeInProgress}
