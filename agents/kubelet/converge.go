package kubelet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
)

// converge moves the runtime one step toward the pod's spec — the sandbox, then the init containers in order,
// then the containers — and returns what it saw. Every failure is recorded on the pod (a waiting reason and an
// event) and retried at the next sync; it never stops the worker or other pods.
func (w *worker) converge(ctx context.Context, pod *corev1.Pod) observed {
	ob, ok := w.observe(ctx, pod)
	if !ok {
		// A new sandbox: the pod's start, in its turn (startGate), until its containers have been started.
		leave, err := w.p.starts.enter(ctx)
		if err != nil {
			return ob
		}
		w.leaveStart = leave
		defer func() {
			leave()
			w.leaveStart = nil
		}()
		if w.goneOrDeleted() { // while it waited its turn: the next sync tears down, nothing to start
			return ob
		}
		if err := w.createSandbox(ctx, pod); err != nil {
			w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return ob
		}
		if ob, ok = w.observe(ctx, pod); !ok {
			return ob
		}
	}
	sb := w.readySandbox(ctx)
	if sb == nil {
		return ob
	}
	now := w.p.cfg.Clock.Now()
	if now.Sub(w.volumesAt) >= volumeRefresh || w.volumesAt.IsZero() {
		if err := w.p.vols.setUp(ctx, pod, ob.podIP, w.p.cfg.NodeIP(), w.written); err != nil {
			w.failAll(pod, &ob, "CreateContainerConfigError", err)
			w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
			return ob
		}
		w.volumesAt = now
	}
	sbConfig, _ := w.p.sandboxConfig(pod, sb.Metadata.GetAttempt())
	w.probes.sync(pod, ob)
	ob.ready, ob.started = w.probes.readiness(), w.probes.startup() // with the probers just started
	// Ephemeral containers first, as upstream's: a debugging container starts even while init containers fail.
	w.ephemeralContainers(ctx, pod, sb.Id, sbConfig, &ob)
	w.actuateResize(ctx, pod, sb.Id, sbConfig, &ob)
	if !w.initContainers(ctx, pod, sb.Id, sbConfig, &ob) {
		return ob
	}
	for i := range pod.Spec.Containers {
		w.container(ctx, pod, &pod.Spec.Containers[i], sb.Id, sbConfig, &ob)
	}
	return ob
}

// createSandbox removes the pod's dead sandboxes and runs a new one (the next attempt).
func (w *worker) createSandbox(ctx context.Context, pod *corev1.Pod) error {
	old, err := w.p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: string(pod.UID)}})
	if err != nil {
		return err
	}
	var attempt uint32
	for _, sb := range old {
		attempt = max(attempt, sb.Metadata.GetAttempt()+1)
		_ = w.p.cfg.Runtime.RemovePodSandbox(ctx, sb.Id)
	}
	cfg, fallback := w.p.sandboxConfig(pod, attempt)
	if fallback {
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "MissingClusterDNS",
			"the node has no cluster DNS: pod %q gets the node's resolver instead of its %q policy's", pod.Name, dnsPolicy(pod))
	}
	_, err = w.p.cfg.Runtime.RunPodSandbox(ctx, cfg, "")
	return err
}

// failAll marks every container that is not running as waiting for reason.
func (w *worker) failAll(pod *corev1.Pod, ob *observed, reason string, err error) {
	for _, c := range allContainers(pod) {
		if cur := ob.containers[c.Name].latest(); cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			ob.waiting[c.Name] = [2]string{reason, err.Error()}
		}
	}
}

// initContainers runs the init containers in order and reports whether all have completed (sidecars: started).
func (w *worker) initContainers(ctx context.Context, pod *corev1.Pod, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) bool {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		in := ob.containers[c.Name]
		cur := in.latest()
		switch {
		case cur == nil:
			w.start(ctx, pod, c, sandboxID, sbConfig, in, ob)
		case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			if isSidecar(c) {
				continue
			}
		case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			if cur.ExitCode == 0 && !isSidecar(c) {
				continue
			}
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && !isSidecar(c) {
				ob.initFailed = true
			} else {
				w.restart(ctx, pod, c, sandboxID, sbConfig, in, ob)
			}
		default: // CREATED but not started (an interrupted start): remove and start again
			_ = w.p.cfg.Runtime.RemoveContainer(ctx, cur.Id)
		}
		ob.initDone = false
		return false
	}
	ob.initDone = true
	return true
}

// container converges one regular container: start it, restart it per restartPolicy with back-off, or kill it
// when its liveness probe failed.
func (w *worker) container(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) {
	in := ob.containers[c.Name]
	cur := in.latest()
	switch {
	case cur == nil:
		w.start(ctx, pod, c, sandboxID, sbConfig, in, ob)
	case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		if w.probes.livenessFailed(c.Name, cur.Id) {
			w.kill(ctx, pod, c, cur.Id, gracePeriod(pod), fmt.Sprintf("Container %s failed liveness probe, will be restarted", c.Name))
		}
	case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED:
		if shouldRestart(pod.Spec.RestartPolicy, cur.ExitCode) {
			w.restart(ctx, pod, c, sandboxID, sbConfig, in, ob)
		}
	default:
		_ = w.p.cfg.Runtime.RemoveContainer(ctx, cur.Id)
	}
}

func shouldRestart(policy corev1.RestartPolicy, exitCode int32) bool {
	return policy == corev1.RestartPolicyAlways || policy == "" || (policy == corev1.RestartPolicyOnFailure && exitCode != 0)
}

func gracePeriod(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// restart starts a new instance of an exited container once its back-off allows, or reports CrashLoopBackOff.
func (w *worker) restart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, in instances, ob *observed) {
	cur := in.latest()
	b := w.backoffs[c.Name]
	if b == nil {
		b = &crashBackoff{}
		w.backoffs[c.Name] = b
	}
	until := b.observe(cur.Id, time.Unix(0, cur.StartedAt), time.Unix(0, cur.FinishedAt))
	if now := w.p.cfg.Clock.Now(); now.Before(until) {
		wait := until.Sub(time.Unix(0, cur.FinishedAt)).Round(time.Second)
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, c.Name, pod.Name, pod.Namespace, pod.UID)
		if b.report() {
			w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
		}
		ob.waiting[c.Name] = [2]string{"CrashLoopBackOff", msg}
		return
	}
	w.start(ctx, pod, c, sandboxID, sbConfig, in, ob)
}

// start creates and starts the next instance of a container (keeping the previous one for `logs --previous`).
func (w *worker) start(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, in instances, ob *observed) {
	var attempt uint32
	if cur := in.latest(); cur != nil {
		attempt = cur.Metadata.GetAttempt() + 1
	}
	for _, old := range in[min(1, len(in)):] {
		_ = w.p.cfg.Runtime.RemoveContainer(ctx, old.Id)
	}
	fail := func(reason string, err error) {
		ob.waiting[c.Name] = [2]string{reason, err.Error()}
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
	}
	env, err := containerEnv(ctx, w.p.objs, pod, c, ob.podIP, w.p.cfg.NodeIP())
	if err != nil {
		fail("CreateContainerConfigError", err)
		return
	}
	mounts, err := w.p.vols.mounts(ctx, pod, c, env, ob.podIP, w.p.cfg.NodeIP())
	if err != nil {
		fail("CreateContainerConfigError", err)
		return
	}
	if m, err := w.p.vols.hostsMount(pod, c, ob.podIP, cmp.Or(w.p.cfg.DNS.Domain, dns.DefaultDomain)); err != nil {
		fail("CreateContainerConfigError", err)
		return
	} else if m != nil {
		mounts = append(mounts, m)
	}
	if m, err := w.p.vols.terminationMount(pod, c, attempt); err != nil {
		fail("CreateContainerConfigError", err)
		return
	} else if m != nil {
		mounts = append(mounts, m)
	}
	// The image once the configuration is complete: kubelet's startContainer pulls first, but with a sync every
	// second a container waiting for a ConfigMap would pull (policy Always) every second.
	imageRef, ok := w.ensureImage(ctx, pod, c, sbConfig, ob)
	if !ok {
		return
	}
	cfg := containerConfig(pod, c, attempt, env, mounts)
	if err := w.userFromImage(ctx, c, cfg.Linux.SecurityContext); err != nil {
		fail("CreateContainerConfigError", err)
		return
	}
	if err := targetNamespace(pod, c.Name, cfg, ob); err != nil { // ephemeral containers only (ephemeral.go)
		fail("CreateContainerConfigError", err)
		return
	}
	id, err := w.p.cfg.Runtime.CreateContainer(ctx, sandboxID, cfg, sbConfig)
	if err != nil {
		fail("CreateContainerError", describe(err))
		return
	}
	w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if err := w.p.cfg.Runtime.StartContainer(ctx, id); err != nil {
		fail("RunContainerError", describe(err))
		return
	}
	w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	if w.p.images != nil {
		w.p.images.gc.used(imageRef)
	}
	ob.startedAny = true
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if err := w.runHandler(ctx, pod, c, id, c.Lifecycle.PostStart); err != nil {
			w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			w.kill(ctx, pod, c, id, gracePeriod(pod), fmt.Sprintf("FailedPostStartHook: stopping container %s", c.Name))
		}
	}
}

// describe is a runtime error's message without its gRPC status decoration (what kubectl describe shows).
func describe(err error) error { return errors.New(status.Convert(err).Message()) }
