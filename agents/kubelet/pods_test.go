package kubelet

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// recording is the fake runtime keeping the configs containers were created with.
type recording struct {
	*fake.Runtime
	mu        sync.Mutex
	configs   map[string]*runtimeapi.ContainerConfig  // by container name, the latest
	sbConfigs map[string]*runtimeapi.PodSandboxConfig // by container name, the latest's sandbox
}

func newRecording(rt *fake.Runtime) *recording {
	return &recording{Runtime: rt, configs: map[string]*runtimeapi.ContainerConfig{}, sbConfigs: map[string]*runtimeapi.PodSandboxConfig{}}
}

func (r *recording) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.configs[c.Metadata.Name] = c
	r.sbConfigs[c.Metadata.Name] = sbc
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sb, c, sbc)
}

func (r *recording) config(name string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configs[name]
}

func (r *recording) sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sbConfigs[name]
}

// podEnv runs a node's pod manager on the fake runtime against a real API, as node n1 of cluster c1.
type podEnv struct {
	t     *testing.T
	api   *kubeapi.API
	admin kubernetes.Interface
	node  kubernetes.Interface
	rt    *recording
	clk   *clocktesting.FakeClock
	dir   string
	stop  func()
	pods  *Pods // the running pod manager
	// configure, when set, adjusts the pod manager's configuration at every start.
	configure func(*PodsConfig)
}

func newPodEnv(t *testing.T) *podEnv { return newPodEnvWith(t, nil) }

// newPodEnvWith is newPodEnv with configure applied to the API's configuration (may be nil).
func newPodEnvWith(t *testing.T, configure func(*kubeapi.Config)) *podEnv {
	return startPodEnv(t, configure, nil)
}

// newPodEnvConfigured is newPodEnv whose pod manager runs with configure applied to its configuration.
func newPodEnvConfigured(t *testing.T, configure func(e *podEnv, c *PodsConfig)) *podEnv {
	return startPodEnv(t, nil, configure)
}

// startPodEnv registers node n1 against a real API configured by api (may be nil) and starts its pod manager
// configured by pods (may be nil).
func startPodEnv(t *testing.T, api func(*kubeapi.Config), pods func(e *podEnv, c *PodsConfig)) *podEnv {
	a, _ := apitest.NewWith(t, api)
	e := &podEnv{t: t, api: a, admin: apitest.Admin(t, a, "c1"), node: nodeClient(t, a, "n1"),
		clk: clocktesting.NewFakeClock(time.Now()), dir: t.TempDir()}
	// Before the data dir's removal, after the pod manager's stop: the tmpfs of memory-backed emptyDirs the test
	// left would make the removal fail.
	t.Cleanup(func() { _ = unmountBelow(e.dir) })
	if pods != nil {
		e.configure = func(c *PodsConfig) { pods(e, c) }
	}
	e.rt = newRecording(fake.New(fake.WithClock(e.clk.Now)))
	n, err := NewNode(e.node, NodeConfig{Name: "n1", Host: newFakeHost().read})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.start()
	return e
}

// start runs a pod manager (again, after stop: an agent restart on the same runtime).
func (e *podEnv) start() {
	cfg := PodsConfig{NodeName: "n1", Runtime: e.rt, Images: e.rt, DataDir: e.dir, Clock: e.clk,
		NodeIP: func() string { return "10.0.0.5" }, Resync: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if e.configure != nil {
		e.configure(&cfg)
	}
	p, err := NewPods(e.node, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.pods = p
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	e.stop = func() { cancel(); <-done }
	e.t.Cleanup(e.stop)
}

func (e *podEnv) create(pod *corev1.Pod) {
	e.t.Helper()
	pod.Namespace = "default"
	pod.Spec.NodeName = "n1"
	if _, err := e.admin.CoreV1().Pods("default").Create(e.t.Context(), pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *podEnv) pod(name string) *corev1.Pod {
	p, err := e.admin.CoreV1().Pods("default").Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func (e *podEnv) until(what string, cond func(p *corev1.Pod) bool, name string) *corev1.Pod {
	e.t.Helper()
	var last *corev1.Pod
	deadline := time.Now().Add(20 * time.Second)
	for {
		if last = e.pod(name); last != nil && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			var st any
			if last != nil {
				st = last.Status
			}
			e.t.Fatalf("%s did not happen within 20s; pod status %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond) // polling the API, not waiting for time to pass
	}
}

// running is the runtime ID of the container's running instance ("" if none).
func (e *podEnv) running(name string) string {
	list, _ := e.rt.ListContainers(e.t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelContainerName: name},
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if len(list) != 1 {
		return ""
	}
	return list[0].Id
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func simple(name string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"}}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{RestartPolicy: policy, Containers: containers}}
}

func TestPodRunsInitThenContainers(t *testing.T) {
	e := newPodEnv(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"greeting": "hello", "level": "debug"}}
	if _, err := e.admin.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := simple("web", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "nginx", Command: []string{"serve", "--greet=$(GREETING)", "$$(KEPT)"},
		Env: []corev1.EnvVar{
			{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			{Name: "MSG", Value: "$(GREETING) from $(POD)"}},
		EnvFrom:      []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/app"}, {Name: "scratch", MountPath: "/tmp/x"}}})
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", Command: []string{"true"}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.create(pod)

	// The init container runs first; the app container waits for it.
	apitest.Eventually(t, "the init container running", func() bool { return e.running("setup") != "" })
	p := e.pod("web")
	if p.Status.Phase != corev1.PodPending || e.running("app") != "" {
		t.Fatalf("app started before init finished: phase %s", p.Status.Phase)
	}
	// Meanwhile the app container waits with PodInitializing, as upstream's (not ContainerCreating).
	e.until("app PodInitializing", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "PodInitializing"
	}, "web")
	if err := e.rt.Exit(e.running("setup"), 0, "", ""); err != nil {
		t.Fatal(err)
	}
	p = e.until("Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	}, "web")
	if p.Status.HostIP != "10.0.0.5" || p.Status.StartTime == nil || len(p.Status.ContainerStatuses) != 1 ||
		p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].Ready ||
		p.Status.InitContainerStatuses[0].State.Terminated == nil || p.Status.InitContainerStatuses[0].State.Terminated.Reason != "Completed" {
		t.Fatalf("status %+v", p.Status)
	}
	if podCondition(p, corev1.PodInitialized) != corev1.ConditionTrue || podCondition(p, corev1.PodScheduled) != "" && podCondition(p, corev1.PodScheduled) != corev1.ConditionTrue {
		t.Fatalf("conditions %+v", p.Status.Conditions)
	}
	cfg := e.rt.config("app")
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	want := map[string]string{"GREETING": "hello", "POD": "web", "NODE_IP": "10.0.0.5", "MSG": "hello from web", "CFG_greeting": "hello", "CFG_level": "debug"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if !slices.Equal(cfg.Command, []string{"serve", "--greet=hello", "$(KEPT)"}) {
		t.Errorf("command %q", cfg.Command)
	}
	mounts := map[string]string{}
	for _, m := range cfg.Mounts {
		mounts[m.ContainerPath] = m.HostPath
	}
	if b, err := os.ReadFile(filepath.Join(mounts["/etc/app"], "greeting")); err != nil || string(b) != "hello" {
		t.Errorf("configMap volume file: %q %v", b, err)
	}
	if st, err := os.Stat(mounts["/tmp/x"]); err != nil || !st.IsDir() {
		t.Errorf("emptyDir: %v", err)
	}
}

func TestPodRestartsWithBackoff(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("crash", corev1.RestartPolicyAlways))
	apitest.Eventually(t, "running", func() bool { return e.running("app") != "" })
	// The first exit restarts at once.
	if err := e.rt.Exit(e.running("app"), 1, "Error", ""); err != nil {
		t.Fatal(err)
	}
	p := e.until("restarted once", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil
	}, "crash")
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Fatalf("lastState %+v", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	// The second waits 10 s: CrashLoopBackOff until the clock passes it.
	if err := e.rt.Exit(e.running("app"), 2, "", ""); err != nil {
		t.Fatal(err)
	}
	e.until("CrashLoopBackOff", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.RestartCount == 1 &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 2 &&
			podCondition(p, corev1.PodReady) == corev1.ConditionFalse
	}, "crash")
	e.clk.Step(11 * time.Second)
	e.until("restarted after the back-off", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 2 && cs.State.Running != nil
	}, "crash")
}

func TestPodCompletesAndFails(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("job", corev1.RestartPolicyNever))
	e.create(simple("bad", corev1.RestartPolicyNever, corev1.Container{Name: "app2", Image: "busybox", Command: []string{"false"}}))
	apitest.Eventually(t, "both running", func() bool { return e.running("app") != "" && e.running("app2") != "" })
	if err := e.rt.Exit(e.running("app"), 0, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Exit(e.running("app2"), 3, "", ""); err != nil {
		t.Fatal(err)
	}
	p := e.until("Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded }, "job")
	if podCondition(p, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("a completed pod is Ready")
	}
	e.until("Failed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed && p.Status.ContainerStatuses[0].State.Terminated.ExitCode == 3
	}, "bad")
}

func TestPodConfigErrorsAndDeletion(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("broken", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"x"},
		Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}}))
	e.create(simple("ok", corev1.RestartPolicyAlways))
	e.until("CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
			cs[0].State.Waiting.Message == `secret "nope" not found`
	}, "broken")
	// The other pod is unaffected; deleting it stops its container and the kubelet removes the object.
	e.until("ok running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "ok")
	id := e.running("app")
	if err := e.admin.CoreV1().Pods("default").Delete(t.Context(), "ok", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "the pod object removed", func() bool {
		_, err := e.admin.CoreV1().Pods("default").Get(t.Context(), "ok", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	apitest.Eventually(t, "its sandbox removed", func() bool {
		sbs, _ := e.rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodName: "ok"}})
		return len(sbs) == 0
	})
	if _, err := e.rt.ContainerStatus(t.Context(), id, false); err == nil {
		t.Error("the deleted pod's container is still in the runtime")
	}
}

func TestPodReadinessProbeAndAdoption(t *testing.T) {
	e := newPodEnv(t)
	var mu sync.Mutex
	healthy := false
	e.rt.SetExecHook(func(_ string, cmd []string) ([]byte, []byte, int) {
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return []byte("ok"), nil, 0
		}
		return nil, []byte("not yet"), 1
	})
	pod := simple("probed", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"serve"},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1}})
	e.create(pod)
	p := e.until("running, not ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}, "probed")
	if podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
		t.Fatal("ready before the readiness probe passed")
	}
	mu.Lock()
	healthy = true
	mu.Unlock()
	apitest.Eventually(t, "ready once the probe passes", func() bool {
		e.clk.Step(time.Second)
		p := e.pod("probed")
		return p != nil && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	// An agent restart adopts the running container: no new instance, no restart counted.
	id := e.running("app")
	e.stop()
	e.start()
	e.clk.Step(time.Second)
	apitest.Eventually(t, "the new agent synced the pod", func() bool {
		p := e.pod("probed")
		return p != nil && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if now := e.running("app"); now != id {
		t.Fatalf("the container was replaced on restart: %s, was %s", now, id)
	}
	if p := e.pod("probed"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("restartCount %d after an agent restart", p.Status.ContainerStatuses[0].RestartCount)
	}
}

// TestPodStatusPatch: the kubelet PATCHes the pod status from the newest copy it knows, so it never overwrites
// the conditions others own, puts back its own fields when someone else changed them, and a patch for another
// pod of the same name (another UID) changes nothing.
func TestPodStatusPatch(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("p", corev1.RestartPolicyAlways))
	p := e.until("Ready", func(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == corev1.ConditionTrue }, "p")

	// Someone else adds a condition of their own and changes one of the kubelet's fields.
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.Now()})
	p.Status.HostIP, p.Status.HostIPs = "10.9.9.9", []corev1.HostIP{{IP: "10.9.9.9"}}
	if _, err := e.admin.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.until("the kubelet's own field put back", func(p *corev1.Pod) bool { return p.Status.HostIP == "10.0.0.5" }, "p")

	// The container exits: the restart is reported and the other condition stays.
	if err := e.rt.Exit(e.running("app"), 1, "Error", ""); err != nil {
		t.Fatal(err)
	}
	p = e.until("restarted", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil
	}, "p")
	if podCondition(p, corev1.DisruptionTarget) != corev1.ConditionTrue || len(p.Status.Conditions) != 5 {
		t.Fatalf("conditions after the kubelet's writes: %+v", p.Status.Conditions)
	}

	// A patch made for another pod of this name (another UID) is refused and changes nothing.
	next := ownStatus(p.Status)
	next.Phase = corev1.PodFailed
	patch, err := statusPatch("another-uid", ownStatus(p.Status), next)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.node.CoreV1().Pods("default").Patch(t.Context(), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("a status patch with another UID: %v, want a conflict or invalid", err)
	}
	if after := e.pod("p"); after.Status.Phase != corev1.PodRunning {
		t.Fatalf("the refused patch changed the pod: %+v", after.Status)
	}
}

// TestStatusFromAStaleInformer: a worker whose informer still shows the pod before the worker's own write (a
// busy agent) computes the status from that write, not from the older copy: it writes nothing again, and the
// conditions keep their transition times. (From the older copy every condition was new again, with a new
// transition time, and the status flipped between the two with every write.)
func TestStatusFromAStaleInformer(t *testing.T) {
	e := newPodEnv(t)
	clk := clocktesting.NewFakeClock(time.Now())
	p, err := NewPods(nodeClient(t, e.api, "n2"), PodsConfig{NodeName: "n2", Runtime: fake.New(fake.WithClock(clk.Now)),
		DataDir: t.TempDir(), Clock: clk, NodeIP: func() string { return "10.0.0.6" }})
	if err != nil {
		t.Fatal(err)
	}
	pod := simple("s", corev1.RestartPolicyAlways)
	pod.Spec.NodeName = "n2"
	stale, err := e.admin.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(p, stale.UID)
	w.set(stale)
	w.sync(t.Context())
	first := e.pod("s")
	if first.Status.Phase != corev1.PodRunning || podCondition(first, corev1.PodReady) != corev1.ConditionTrue {
		t.Fatalf("after the first sync: %+v", first.Status)
	}
	clk.Step(5 * time.Second)
	for range 3 {
		w.set(stale) // the informer has not caught up
		w.sync(t.Context())
	}
	if again := e.pod("s"); again.ResourceVersion != first.ResourceVersion {
		t.Fatalf("syncs from a stale copy wrote the status again:\nbefore %+v\nafter  %+v", first.Status.Conditions, again.Status.Conditions)
	}
	// Once the informer shows the write, the worker goes by it.
	w.set(first)
	w.sync(t.Context())
	if again := e.pod("s"); again.ResourceVersion != first.ResourceVersion {
		t.Fatalf("a sync from the current copy wrote the status again: %+v", again.Status)
	}
}

// TestStatusObservedGeneration: the kubelet reports the generation of the spec its status comes from, in
// status.observedGeneration and in the conditions it owns, and follows a change of the spec.
func TestStatusObservedGeneration(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("gen", corev1.RestartPolicyAlways))
	observed := func(gen int64) func(p *corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if p.Generation != gen || p.Status.ObservedGeneration != gen || p.Status.Phase != corev1.PodRunning {
				return false
			}
			for _, c := range p.Status.Conditions {
				if slices.Contains(ownConditions, c.Type) && c.ObservedGeneration != gen {
					return false
				}
			}
			return true
		}
	}
	e.until("observedGeneration 1", observed(1), "gen")
	if _, err := e.admin.CoreV1().Pods("default").Patch(t.Context(), "gen", types.MergePatchType,
		[]byte(`{"spec":{"activeDeadlineSeconds":3600}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.until("observedGeneration 2", observed(2), "gen")
}

// TestDownwardResources: resourceFieldRef gives a container's requests and limits divided by the divisor and
// rounded up; a limit the container does not set is the node's allocatable amount, as kubelet's (in env and in a
// downwardAPI volume alike).
func TestDownwardResources(t *testing.T) {
	e := newPodEnv(t)
	ref := func(res, divisor string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: res, Divisor: resource.MustParse(divisor)}}
	}
	c := corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		Env: []corev1.EnvVar{
			{Name: "CPU_REQUEST", ValueFrom: ref("requests.cpu", "1m")},
			{Name: "CPU_LIMIT", ValueFrom: ref("limits.cpu", "1")},
			{Name: "MEMORY_LIMIT", ValueFrom: ref("limits.memory", "1Mi")},
			{Name: "EPHEMERAL_LIMIT", ValueFrom: ref("limits.ephemeral-storage", "1Gi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "info", MountPath: "/info"}}}
	pod := simple("res", corev1.RestartPolicyAlways, c)
	pod.Spec.Volumes = []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app",
			Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}}}}}}
	e.create(pod)
	apitest.Eventually(t, "res running", func() bool { return e.running("app") != "" })
	cfg := e.rt.config("app")
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	// The fake host: 4 CPUs, 8 GiB, 100 GiB of disk.
	for k, v := range map[string]string{"CPU_REQUEST": "250", "CPU_LIMIT": "4", "MEMORY_LIMIT": "64", "EPHEMERAL_LIMIT": "100"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for _, m := range cfg.Mounts {
		if m.ContainerPath == "/info" {
			if b, err := os.ReadFile(filepath.Join(m.HostPath, "cpu_limit")); err != nil || string(b) != "4000" {
				t.Errorf("downwardAPI volume cpu_limit: %q %v, want 4000", b, err)
			}
		}
	}
}

// TestActiveDeadline: a pod active on the node longer than its activeDeadlineSeconds (which may be set or
// shortened while it runs) is stopped and fails with reason DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("deadline", corev1.RestartPolicyAlways))
	e.until("running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "deadline")
	id := e.running("app")
	if _, err := e.admin.CoreV1().Pods("default").Patch(t.Context(), "deadline", types.MergePatchType,
		[]byte(`{"spec":{"activeDeadlineSeconds":5}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(6 * time.Second)
	p := e.until("failed by its deadline", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed }, "deadline")
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	st, err := e.rt.ContainerStatus(t.Context(), id, false)
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("the container was not stopped: %v %v", st, err)
	}
}
