package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// requirements builds resource requirements from "cpu=20m,memory=35Mi" style request and limit lists.
func requirements(requests, limits string) corev1.ResourceRequirements {
	parse := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		out := corev1.ResourceList{}
		for kv := range strings.SplitSeq(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return corev1.ResourceRequirements{Requests: parse(requests), Limits: parse(limits)}
}

func sleeper(name string, r corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Command: []string{"sleep", "1d"}, Resources: r}
}

// resizePatch patches the pod's container name to r through pods/resize, as kubectl patch --subresource=resize.
func (e *podEnv) resize(pod, container string, r corev1.ResourceRequirements) *corev1.Pod {
	e.t.Helper()
	p := e.pod(pod)
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == container {
			p.Spec.Containers[i].Resources = r
		}
	}
	out, err := e.admin.CoreV1().Pods("default").UpdateResize(e.t.Context(), pod, p, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func podCond(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// resizedTo reports whether the container's status says it runs with r and no resize is left to do.
func resizedTo(p *corev1.Pod, name string, r corev1.ResourceRequirements) bool {
	cs := containerStatus(p, name)
	return cs != nil && cs.Resources != nil && cmp.Equal(*cs.Resources, r) && cmp.Equal(cs.AllocatedResources, r.Requests) &&
		podCond(p, corev1.PodResizePending) == nil && podCond(p, corev1.PodResizeInProgress) == nil &&
		p.Status.ObservedGeneration == p.Generation
}

// TestPodStatusReportsResources: right after the start, every running container reports the requests the node
// allocated it and the resources it runs with (an empty set for a container without any), as upstream's kubelet;
// the runtime gets kubelet's cgroup figures (a CFS quota of at least 1 ms).
func TestPodStatusReportsResources(t *testing.T) {
	e := newPodEnv(t)
	burst := requirements("cpu=2m", "cpu=5m,memory=64Mi")
	e.create(simple("res", corev1.RestartPolicyAlways, sleeper("burst", burst), sleeper("none", corev1.ResourceRequirements{})))
	p := e.until("running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "res")
	burst.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi") // the API's default: the limit
	if cs := containerStatus(p, "burst"); cs.Resources == nil || !cmp.Equal(*cs.Resources, burst) || !cmp.Equal(cs.AllocatedResources, burst.Requests) {
		t.Errorf("burst: resources %v allocated %v, want %v", cs.Resources, cs.AllocatedResources, burst)
	}
	if cs := containerStatus(p, "none"); cs.Resources == nil || !cmp.Equal(*cs.Resources, corev1.ResourceRequirements{}) || cs.AllocatedResources != nil {
		t.Errorf("none: resources %v allocated %v, want empty and none", cs.Resources, cs.AllocatedResources)
	}
	lin := e.rt.config("burst").GetLinux().GetResources()
	if lin.CpuShares != 2 || lin.CpuQuota != 1000 || lin.CpuPeriod != 100000 || lin.MemoryLimitInBytes != 64<<20 {
		t.Errorf("CRI resources %v, want shares 2, quota 1000 (the 1 ms minimum), period 100000, 64Mi", lin)
	}
}

// TestPodResizeInPlace: an accepted resize is applied to the running container through the runtime — the same
// instance, not restarted — with PodResizeInProgress written while it is, and the status then reports the new
// resources with the resize conditions gone.
func TestPodResizeInPlace(t *testing.T) {
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) { c.Recorder = apiRecorder(t, e.node) })
	e.create(simple("web", corev1.RestartPolicyAlways, sleeper("app", requirements("cpu=20m,memory=35Mi", "cpu=30m,memory=45Mi"))))
	e.until("running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "web")
	id := e.running("app")
	seen := e.watchConditions("web")

	want := requirements("cpu=25m,memory=40Mi", "cpu=35m,memory=50Mi")
	if p := e.resize("web", "app", want); p.Generation != 2 {
		t.Fatalf("generation %d after the resize, want 2", p.Generation)
	}
	p := e.until("resized", func(p *corev1.Pod) bool { return resizedTo(p, "app", want) }, "web")
	if got := e.running("app"); got != id || containerStatus(p, "app").RestartCount != 0 {
		t.Errorf("container %s (restarts %d), want %s still running", got, containerStatus(p, "app").RestartCount, id)
	}
	st, err := e.rt.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	if lin := st.Status.GetResources().GetLinux(); lin.CpuShares != 25 || lin.CpuQuota != 3500 || lin.MemoryLimitInBytes != 50<<20 {
		t.Errorf("runtime resources %v, want shares 25, quota 3500, 50Mi", lin)
	}
	if !slices.Contains(e.rt.Calls(), "UpdateContainerResources") {
		t.Error("the runtime was not asked to update the container")
	}
	apitest.Eventually(t, "PodResizeInProgress seen with the resize's generation", func() bool {
		return slices.Contains(seen(), "PodResizeInProgress=True gen 2")
	})
	e.eventually("web", `Normal ResizeCompleted Pod resize completed: {"containers":[{"name":"app","resources":{"limits":{"cpu":"35m","memory":"50Mi"},"requests":{"cpu":"25m","memory":"40Mi"}}}],"generation":2}`, 1)
}

// TestPodResizeSeveralContainers is the conformance test "burstable pods - extended, 6 containers - various
// operations performed (including adding limits and requests)" at the node: a strategic merge patch of
// pods/resize made as the test makes it (CreateTwoWayMergePatch from the original pod to the resized one) adds,
// raises and lowers requests and limits of five containers at once; each container's status then says exactly
// what the test compares (allocatedResources equal to the requests, resources to the requirements, nil where
// none).
func TestPodResizeSeveralContainers(t *testing.T) {
	e := newPodEnv(t)
	orig := map[string]corev1.ResourceRequirements{
		"c1": requirements("cpu=20m", ""), "c2": requirements("memory=35Mi", ""), "c3": requirements("cpu=20m,memory=35Mi", ""),
		"c4": requirements("cpu=20m", ""), "c5": requirements("memory=35Mi", ""),
	}
	want := map[string]corev1.ResourceRequirements{
		"c1": requirements("cpu=25m", "cpu=35m"), "c2": requirements("memory=30Mi", "memory=50Mi"),
		"c3": requirements("cpu=20m,memory=30Mi", ""), "c4": requirements("cpu=15m,memory=35Mi", ""),
		"c5": requirements("cpu=20m,memory=40Mi", ""),
	}
	names := []string{"c1", "c2", "c3", "c4", "c5"}
	podWith := func(res map[string]corev1.ResourceRequirements) *corev1.Pod {
		var cs []corev1.Container
		for _, n := range names {
			cs = append(cs, sleeper(n, res[n]))
		}
		return simple("five", corev1.RestartPolicyOnFailure, cs...)
	}
	e.create(podWith(orig))
	e.until("running", func(p *corev1.Pod) bool {
		for _, n := range names {
			if !resizedTo(p, n, orig[n]) {
				return false
			}
		}
		return p.Status.Phase == corev1.PodRunning
	}, "five")
	before, _ := json.Marshal(podWith(orig))
	after, _ := json.Marshal(podWith(want))
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Pods("default").Patch(t.Context(), "five", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatal(err)
	}
	e.until("every container resized", func(p *corev1.Pod) bool {
		for _, n := range names {
			if !resizedTo(p, n, want[n]) || containerStatus(p, n).RestartCount != 0 {
				return false
			}
		}
		return p.Generation == 2
	}, "five")
}

// TestPodResizeEquivalents is the conformance test "resize with equivalents" at the node: 2m/10m to 1m/5m and
// back are the same cgroup settings (2 shares, the 1 ms quota), yet the status reports each resize as asked.
func TestPodResizeEquivalents(t *testing.T) {
	e := newPodEnv(t)
	orig, small := requirements("cpu=2m", "cpu=10m"), requirements("cpu=1m", "cpu=5m")
	e.create(simple("eq", corev1.RestartPolicyOnFailure, sleeper("c1", orig)))
	e.until("running", func(p *corev1.Pod) bool { return resizedTo(p, "c1", orig) && p.Status.Phase == corev1.PodRunning }, "eq")
	for i, r := range []corev1.ResourceRequirements{small, orig} {
		e.resize("eq", "c1", r)
		e.until(fmt.Sprintf("resize %d", i), func(p *corev1.Pod) bool { return resizedTo(p, "c1", r) }, "eq")
		st, err := e.rt.ContainerStatus(t.Context(), e.running("c1"), false)
		if err != nil {
			t.Fatal(err)
		}
		if lin := st.Status.GetResources().GetLinux(); lin.CpuShares != 2 || lin.CpuQuota != 1000 {
			t.Errorf("resize %d: runtime resources %v, want shares 2 and quota 1000", i, lin)
		}
	}
}

// watchConditions records the resize conditions of the pod called name, as "Type=Status gen N", from a watch
// started now.
func (e *podEnv) watchConditions(name string) func() []string {
	w, err := e.admin.CoreV1().Pods("default").Watch(e.t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizeInProgress || c.Type == corev1.PodResizePending {
					mu.Lock()
					seen = append(seen, string(c.Type)+"="+string(c.Status)+" gen "+strconv.FormatInt(c.ObservedGeneration, 10))
					mu.Unlock()
				}
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// TestPodResizeRestartPolicy: a container whose resizePolicy asks for a restart for memory is restarted with the
// new limit (its restart count goes up), whatever the pod's restartPolicy.
func TestPodResizeRestartPolicy(t *testing.T) {
	e := newPodEnv(t)
	c := sleeper("app", requirements("cpu=20m,memory=35Mi", "cpu=20m,memory=35Mi"))
	c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	e.create(simple("db", corev1.RestartPolicyNever, c))
	e.until("running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "db")
	id := e.running("app")

	want := requirements("cpu=20m,memory=40Mi", "cpu=20m,memory=40Mi")
	e.resize("db", "app", want)
	p := e.until("resized", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "app")
		return resizedTo(p, "app", want) && cs.RestartCount == 1 && cs.State.Running != nil
	}, "db")
	if got := e.running("app"); got == id || got == "" {
		t.Errorf("running instance %q, want a new one (was %s)", got, id)
	}
	if lin := e.rt.config("app").GetLinux().GetResources(); lin.MemoryLimitInBytes != 40<<20 {
		t.Errorf("the new instance was created with %v, want the 40Mi limit", lin)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
}

// TestPodResizeDeferred: a resize the node cannot fit beside its other pods waits with PodResizePending
// (Deferred, upstream's message) while the container keeps its allocated resources; once the other pod is done
// it is allocated and applied. The allocation survives an agent restart: the new agent does not take the
// pending resize for admitted.
func TestPodResizeDeferred(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("big", corev1.RestartPolicyNever, sleeper("hog", requirements("cpu=3", ""))))
	e.create(simple("small", corev1.RestartPolicyAlways, sleeper("app", requirements("cpu=500m", ""))))
	for _, name := range []string{"big", "small"} {
		e.until(name+" running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, name)
	}
	want := requirements("cpu=2", "")
	e.resize("small", "app", want)
	deferred := func(p *corev1.Pod) bool {
		c := podCond(p, corev1.PodResizePending)
		return c != nil && c.Reason == corev1.PodReasonDeferred && c.ObservedGeneration == 2 &&
			c.Message == "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
	}
	p := e.until("deferred", deferred, "small")
	if cs := containerStatus(p, "app"); !cmp.Equal(cs.AllocatedResources, requirements("cpu=500m", "").Requests) {
		t.Errorf("allocated %v while deferred, want the old 500m", cs.AllocatedResources)
	}
	if lin := e.rt.config("app").GetLinux().GetResources(); lin.CpuShares != 512 {
		t.Errorf("the container runs with shares %d, want 512", lin.CpuShares)
	}

	// An agent restart: still deferred, still the old allocation. The new agent's syncs are seen in the runtime's
	// calls; after a few of them, it has neither applied nor reported the resize.
	e.stop()
	n := len(e.rt.Calls())
	e.start()
	apitest.Eventually(t, "a few syncs of the new agent", func() bool {
		lists := 0
		for _, c := range e.rt.Calls()[n:] {
			if c == "ListContainers" {
				lists++
			}
		}
		return lists >= 10
	})
	if slices.Contains(e.rt.Calls()[n:], "UpdateContainerResources") {
		t.Error("the new agent applied the pending resize")
	}
	if p := e.pod("small"); !deferred(p) || !cmp.Equal(containerStatus(p, "app").AllocatedResources, requirements("cpu=500m", "").Requests) {
		t.Errorf("after the restart: %+v", p.Status)
	}

	// The big pod finishes: the resize fits.
	var big string
	list, _ := e.rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	for _, c := range list {
		if c.Labels[labelPodName] == "big" {
			big = c.Id
		}
	}
	if err := e.rt.Exit(big, 0, "", ""); err != nil {
		t.Fatal(err)
	}
	e.until("big done", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded }, "big")
	e.until("resized", func(p *corev1.Pod) bool { return resizedTo(p, "app", want) }, "small")
}

// usageRuntime is the fake runtime reporting a fixed memory usage for every container.
type usageRuntime struct {
	*recording
	usage uint64
}

func (r *usageRuntime) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return []*runtimeapi.ContainerStats{{Attributes: &runtimeapi.ContainerAttributes{Id: f.GetId()},
		Memory: &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: r.usage}}}}, nil
}

var _ runtime.StatsProvider = (*usageRuntime)(nil)

// TestPodResizeMemoryBelowUsage: a memory limit lowered below what the container uses is not applied — the
// resize stays in progress with reason Error and upstream's message — and a resize back applies.
func TestPodResizeMemoryBelowUsage(t *testing.T) {
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) { c.Runtime = &usageRuntime{recording: e.rt, usage: 30 << 20} })
	orig := requirements("memory=35Mi", "memory=35Mi")
	e.create(simple("mem", corev1.RestartPolicyAlways, sleeper("app", orig)))
	e.until("running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "mem")

	e.resize("mem", "app", requirements("memory=10Mi", "memory=10Mi"))
	p := e.until("in progress with an error", func(p *corev1.Pod) bool {
		c := podCond(p, corev1.PodResizeInProgress)
		return c != nil && c.Reason == corev1.PodReasonError && c.ObservedGeneration == 2
	}, "mem")
	if msg := podCond(p, corev1.PodResizeInProgress).Message; !strings.Contains(msg, `attempting to set container "app" memory limit (10485760) below current usage (31457280)`) {
		t.Errorf("message %q", msg)
	}
	if cs := containerStatus(p, "app"); !cmp.Equal(cs.Resources.Limits, orig.Limits) || !cmp.Equal(cs.AllocatedResources, requirements("memory=10Mi", "").Requests) {
		t.Errorf("while refused: resources %v allocated %v, want the old limit and the new allocation", cs.Resources, cs.AllocatedResources)
	}
	e.resize("mem", "app", orig)
	e.until("back", func(p *corev1.Pod) bool { return resizedTo(p, "app", orig) }, "mem")
}

// TestResizeFeasibility: the admission decision itself — upstream's messages for a resize beyond what the node
// has left, and Infeasible for what this node can never do.
func TestResizeFeasibility(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	for _, tc := range []struct {
		name                 string
		requests, used       corev1.ResourceList
		fits                 bool
		wantReason, wantText string
	}{
		{"fits", requirements("cpu=1,memory=1Gi", "").Requests, requirements("cpu=3,memory=3Gi", "").Requests, true, "", ""},
		{"cpu", requirements("cpu=5", "").Requests, requirements("cpu=2", "").Requests, false, "OutOfcpu",
			"Node didn't have enough resource: cpu, requested: 5000, used: 2000, capacity: 4000"},
		{"memory", requirements("cpu=1,memory=4500Mi", "").Requests, requirements("memory=2Gi", "").Requests, false, "OutOfmemory",
			"Node didn't have enough resource: memory, requested: 4718592000, used: 2147483648, capacity: 4294967296"},
	} {
		fits, reason, msg := fitsNode(tc.requests, tc.used, alloc)
		if fits != tc.fits || reason != tc.wantReason || msg != tc.wantText {
			t.Errorf("%s: %v %q %q", tc.name, fits, reason, msg)
		}
	}
	plr := &corev1.Pod{Spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: requirements("cpu=1", "").Requests}}}
	if infeasible, reason, _ := resizeInfeasible(plr); !infeasible || reason != corev1.PodReasonInfeasible {
		t.Errorf("pod-level resources: %v %q, want Infeasible", infeasible, reason)
	}
	if infeasible, _, _ := resizeInfeasible(&corev1.Pod{}); infeasible {
		t.Error("a plain pod is infeasible")
	}
}

// TestInfeasibleResizeIsReported: a worker that finds a resize infeasible reports PodResizePending with reason
// Infeasible and the pod keeps its allocation (the API refuses such resizes, so this drives the worker directly).
func TestInfeasibleResizeIsReported(t *testing.T) {
	p, err := NewPods(nil, PodsConfig{NodeName: "n1", Runtime: fake.New(), DataDir: t.TempDir(), NodeIP: func() string { return "10.0.0.5" }})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plr", Namespace: "default", UID: types.UID("u1"), Generation: 1},
		Spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: requirements("cpu=1", "").Requests},
			Containers: []corev1.Container{sleeper("app", requirements("cpu=100m", ""))}}}
	w := newWorker(p, pod.UID)
	if got := w.admitResize(t.Context(), pod); got != pod {
		t.Fatal("a new pod is not admitted as it is")
	}
	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Spec.Containers[0].Resources = requirements("cpu=200m", "")
	got := w.admitResize(t.Context(), resized)
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("the pod runs with %s, want its allocated 100m", q.String())
	}
	var st corev1.PodStatus
	w.resizeStatus(got, &st, observed{})
	c := podCond(&corev1.Pod{Status: st}, corev1.PodResizePending)
	if c == nil || c.Reason != corev1.PodReasonInfeasible || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending %+v, want Infeasible for generation 2", c)
	}
}
