package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	t   *testing.T
	s   *Scheduler
	ev  *controllers.Events
	c1  kubernetes.Interface
	c2  kubernetes.Interface
	ctx context.Context
}

// start runs a scheduler (with cfg, nil for defaults) on a real API until the test ends.
func start(t *testing.T, cfg *Configuration) *env {
	api, reg := apitest.New(t)
	log := slog.New(slog.DiscardHandler)
	ev := controllers.NewEvents(controllers.Deps{API: api, Registry: reg, Logger: log})
	t.Cleanup(ev.Close)
	s, err := New(Deps{API: api, Registry: reg, Logger: log, Config: cfg, Recorder: ev.For})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{t: t, s: s, ev: ev, c1: apitest.Admin(t, api, "c1"), c2: apitest.Admin(t, api, "c2"), ctx: t.Context()}
}

func (e *env) node(cs kubernetes.Interface, name, cpu, mem string, mutate ...func(*corev1.Node)) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, m := range mutate {
		m(n)
	}
	created, err := cs.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	created.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	created.Status.Capacity = created.Status.Allocatable
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pod(cs kubernetes.Interface, name, cpu string, mutate ...func(*corev1.Pod)) {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	for _, m := range mutate {
		m(p)
	}
	if _, err := cs.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(cs kubernetes.Interface, name string) *corev1.Pod {
	e.t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) bound(cs kubernetes.Interface, name string) func() bool {
	return func() bool { return e.get(cs, name).Spec.NodeName != "" }
}

// unschedulable waits for the pod's PodScheduled=False condition and returns its message.
func (e *env) unschedulable(cs kubernetes.Interface, name string) string {
	e.t.Helper()
	var msg string
	apitest.Eventually(e.t, name+" reported unschedulable", func() bool {
		c := podCondition(e.get(cs, name), corev1.PodScheduled)
		if c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			msg = c.Message
			return true
		}
		return false
	})
	return msg
}

func (e *env) events(cs kubernetes.Interface, pod, reason string) []corev1.Event {
	list, err := cs.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": pod, "reason": reason}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func TestPlacesPodsWithinAllocatable(t *testing.T) {
	e := start(t, nil)
	for i := range 3 {
		e.node(e.c1, fmt.Sprint("n", i), "2", "4Gi")
	}
	for i := range 6 {
		e.pod(e.c1, fmt.Sprint("p", i), "900m")
	}
	perNode := map[string]int{}
	apitest.Eventually(t, "6 pods bound", func() bool {
		clear(perNode)
		for i := range 6 {
			p := e.get(e.c1, fmt.Sprint("p", i))
			if p.Spec.NodeName == "" {
				return false
			}
			perNode[p.Spec.NodeName]++
		}
		return true
	})
	for n, count := range perNode {
		if count > 2 {
			t.Fatalf("node %s got %d pods of 900m on 2 CPUs", n, count)
		}
	}
	p := e.get(e.c1, "p0")
	if c := podCondition(p, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("PodScheduled condition %+v, want True", c)
	}
	apitest.Eventually(t, "a Scheduled event", func() bool {
		evs := e.events(e.c1, "p0", "Scheduled")
		return len(evs) == 1 && evs[0].Message == "Successfully assigned default/p0 to "+p.Spec.NodeName &&
			evs[0].Source.Component == "default-scheduler"
	})
	// No room left for a seventh pod of 900m: it stays pending with upstream's summary.
	e.pod(e.c1, "p6", "900m")
	const full = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	if msg := e.unschedulable(e.c1, "p6"); msg != full {
		t.Fatalf("unschedulable message %q", msg)
	}
	apitest.Eventually(t, "a FailedScheduling event", func() bool {
		evs := e.events(e.c1, "p6", "FailedScheduling")
		return len(evs) == 1 && evs[0].Type == corev1.EventTypeWarning && evs[0].Message == full
	})
	// A node joining is the event that can help: the parked pod is placed on it.
	e.node(e.c1, "n3", "2", "4Gi")
	apitest.Eventually(t, "p6 bound to the new node", func() bool { return e.get(e.c1, "p6").Spec.NodeName == "n3" })
	// A deleted pod frees room for the next.
	e.pod(e.c1, "p7", "1500m")
	e.unschedulable(e.c1, "p7")
	if err := e.c1.CoreV1().Pods("default").Delete(e.ctx, "p6", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "p7 bound once p6 is gone", e.bound(e.c1, "p7"))
}

func TestFailureSummaryAndTenancy(t *testing.T) {
	e := start(t, nil)
	// Cluster c2 has nodes, c1 has none: c1's pods never land on c2's nodes.
	e.node(e.c2, "other", "64", "256Gi")
	e.pod(e.c1, "lonely", "100m")
	if msg := e.unschedulable(e.c1, "lonely"); msg != "no nodes available to schedule pods" {
		t.Fatalf("message %q", msg)
	}
	e.node(e.c1, "small", "1", "1Gi")
	e.node(e.c1, "tainted", "8", "8Gi", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	})
	e.node(e.c1, "cordoned", "8", "8Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	apitest.Eventually(t, "lonely bound in c1", func() bool { return e.get(e.c1, "lonely").Spec.NodeName == "small" })
	e.pod(e.c1, "big", "4")
	want := "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable."
	if msg := e.unschedulable(e.c1, "big"); !strings.HasPrefix(msg, want) {
		t.Fatalf("message %q, want it to start with %q", msg, want)
	}
	// Tolerating the taint is not an event for the parked pod; a new pod that tolerates it fits.
	e.pod(e.c1, "tolerant", "4", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	})
	apitest.Eventually(t, "the tolerating pod on the tainted node", func() bool { return e.get(e.c1, "tolerant").Spec.NodeName == "tainted" })
	// nodeSelector and required node affinity.
	e.pod(e.c1, "picky", "100m", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "cordoned"} })
	if msg := e.unschedulable(e.c1, "picky"); !strings.Contains(msg, "node(s) didn't match Pod's node affinity/selector") {
		t.Fatalf("message %q", msg)
	}
	// Uncordoning the node lets it in.
	if _, err := e.c1.CoreV1().Nodes().Patch(e.ctx, "cordoned", "application/merge-patch+json", []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "picky bound after uncordon", func() bool { return e.get(e.c1, "picky").Spec.NodeName == "cordoned" })
	if pods, _ := e.c2.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("cluster c2 has pods: %d", len(pods.Items))
	}
}

func TestHostPortsAndMostAllocated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sched.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, cfg)
	e.node(e.c1, "a", "4", "8Gi")
	e.node(e.c1, "b", "4", "8Gi")
	e.pod(e.c1, "first", "1")
	apitest.Eventually(t, "first bound", e.bound(e.c1, "first"))
	first := e.get(e.c1, "first").Spec.NodeName
	// Bin packing: the second pod joins the first.
	e.pod(e.c1, "second", "1")
	apitest.Eventually(t, "second bound", e.bound(e.c1, "second"))
	if got := e.get(e.c1, "second").Spec.NodeName; got != first {
		t.Fatalf("MostAllocated put the second pod on %s, away from the first on %s", got, first)
	}
	// Host ports: two pods wanting port 8080 go to different nodes; a third has nowhere to go.
	withPort := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	}
	e.pod(e.c1, "web1", "100m", withPort)
	e.pod(e.c1, "web2", "100m", withPort)
	apitest.Eventually(t, "web pods bound", func() bool { return e.bound(e.c1, "web1")() && e.bound(e.c1, "web2")() })
	if e.get(e.c1, "web1").Spec.NodeName == e.get(e.c1, "web2").Spec.NodeName {
		t.Fatal("two pods with host port 8080 on one node")
	}
	e.pod(e.c1, "web3", "100m", withPort)
	if msg := e.unschedulable(e.c1, "web3"); !strings.HasPrefix(msg, "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports.") {
		t.Fatalf("message %q", msg)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		"percentageOfNodesToScore: 120\n": "percentageOfNodesToScore: Invalid value: 120",
		"profiles:\n- schedulerName: a\n  plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin\n":             `profiles[0].plugins.filter.enabled[0].name: Unsupported value: "NoSuchPlugin"`,
		"profiles:\n- schedulerName: a\n- schedulerName: a\n":                                                              `profiles[1].schedulerName: Duplicate value: "a"`,
		"profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Fancy\n": `scoringStrategy.type: Unsupported value: "Fancy"`,
		"profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      bogus: 1\n":                              `profiles[0].pluginConfig[0].args`,
		"podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n":                                                           "podMaxBackoffSeconds: Invalid value: 2",
		"notAField: 1\n": `unknown field "notAField"`,
	}
	for body, want := range cases {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error %v, want it to contain %q", body, err, want)
		}
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, c := range []struct {
		all  int
		pct  int32
		want int
	}{{10, 0, 10}, {99, 0, 99}, {100, 0, 50 * 100 / 100 * 2}, {1000, 0, 420}, {5000, 0, 500}, {20000, 0, 1000}, {5000, 100, 5000}, {5000, 1, 100}} {
		if got := numFeasibleNodesToFind(c.all, c.pct); got != c.want {
			t.Errorf("numFeasibleNodesToFind(%d, %d) = %d, want %d", c.all, c.pct, got, c.want)
		}
	}
}

// TestPreemptionThroughTheAPI: a high-priority pod that fits nowhere evicts the least important pod it needs
// gone (marked, deleted, a Preempted event), is nominated to the node, and is bound there once the victim is
// gone; the other low-priority pod stays.
func TestPreemptionThroughTheAPI(t *testing.T) {
	e := start(t, nil)
	e.node(e.c1, "n0", "2", "4Gi")
	noGrace := func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64) }
	e.pod(e.c1, "lo0", "900m", noGrace)
	apitest.Eventually(t, "lo0 bound", e.bound(e.c1, "lo0"))
	e.pod(e.c1, "lo1", "900m", noGrace)
	apitest.Eventually(t, "lo1 bound", e.bound(e.c1, "lo1"))
	high := int32(1000) // the API here has no admission steps: the priority Priority admission would resolve
	e.pod(e.c1, "hi", "1", func(p *corev1.Pod) { p.Spec.Priority = &high })
	apitest.Eventually(t, "hi bound to n0", func() bool { return e.get(e.c1, "hi").Spec.NodeName == "n0" })
	left, err := e.c1.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	// Both low pods are equally important and neither started: the later one (lo1, placed second) goes.
	if got := strings.Join(names, ","); got != "hi,lo0" {
		t.Fatalf("pods left %s, want hi,lo0 (one victim)", got)
	}
	apitest.Eventually(t, "a Preempted event for lo1", func() bool {
		evs := e.events(e.c1, "lo1", "Preempted")
		return len(evs) == 1 && evs[0].Message == "Preempted by pod on node n0"
	})
	if evs := e.events(e.c1, "hi", "FailedScheduling"); len(evs) != 1 || !strings.Contains(evs[0].Message, "preemption: nominated node n0.") {
		t.Fatalf("hi's FailedScheduling events %v, want one naming the nominated node", evs)
	}
}
