package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
)

// nodeEnv runs the node lifecycle controller alone on a fake clock, with an admin client per cluster playing
// the node agents.
type nodeEnv struct {
	t   *testing.T
	d   Deps
	clk *clocktesting.FakeClock
	c   *nodeLifecycle
	cs  map[string]kubernetes.Interface
}

// nodeRef names a node of a cluster.
type nodeRef struct{ cluster, name string }

func newNodeEnv(t *testing.T) *nodeEnv {
	d := newDeps(t)
	clk := clocktesting.NewFakeClock(time.Now())
	d.Clock = clk
	d.NodeLifecycle = NodeLifecycleConfig{MonitorGracePeriod: 40 * time.Second, EvictionRate: 0.1}
	d.Events = NewEvents(d)
	t.Cleanup(d.Events.Close)
	c := newNodeLifecycle(d)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &nodeEnv{t: t, d: d, clk: clk, c: c, cs: map[string]kubernetes.Interface{"c1": admin(t, d, "c1"), "c2": admin(t, d, "c2")}}
}

// heard waits until the controller has looked at the node's current heartbeat and lease renewal: heartbeats
// count from when the controller notices them, so the clock must not move before it has.
func (e *nodeEnv) heard(n nodeRef) {
	e.t.Helper()
	ctx := e.t.Context()
	lease, err := e.cs[n.cluster].CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	hb := nodeReady(e.node(n)).LastHeartbeatTime
	k := Key{Cluster: n.cluster, Name: n.name}
	eventually(e.t, fmt.Sprintf("the controller noticing %v's heartbeat", n), func() bool {
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		h := e.c.health[k]
		return h != nil && h.heartbeat.Equal(&hb) && h.renewed.Equal(lease.Spec.RenewTime.Time)
	})
}

// addNode registers a node as an agent does: the Node, its status (Ready, no memory pressure) and its Lease.
func (e *nodeEnv) addNode(n nodeRef) {
	e.t.Helper()
	cs, ctx := e.cs[n.cluster], e.t.Context()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	now := metav1.NewTime(e.clk.Now())
	e.postStatus(n, func(node *corev1.Node) {
		node.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
		}
	})
	renew := metav1.NewMicroTime(e.clk.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &n.name, LeaseDurationSeconds: ptrTo(int32(40)), RenewTime: &renew}}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.heard(n)
}

// renew renews the nodes' leases at the clock's now and waits until the controller has noticed.
func (e *nodeEnv) renew(nodes ...nodeRef) {
	e.t.Helper()
	ctx := e.t.Context()
	for _, n := range nodes {
		leases := e.cs[n.cluster].CoordinationV1().Leases(corev1.NamespaceNodeLease)
		lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		renew := metav1.NewMicroTime(e.clk.Now())
		lease.Spec.RenewTime = &renew
		if _, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.heard(n)
	}
}

// advance renews the leases of the nodes still alive, then moves the clock on by d.
func (e *nodeEnv) advance(d time.Duration, alive ...nodeRef) {
	e.t.Helper()
	e.renew(alive...)
	e.clk.Step(d)
}

// post posts the node's Ready condition with a fresh heartbeat and renews its lease, as a live agent does.
func (e *nodeEnv) post(n nodeRef, ready corev1.ConditionStatus) {
	e.t.Helper()
	now := metav1.NewTime(e.clk.Now())
	e.postStatus(n, func(node *corev1.Node) {
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			c.LastHeartbeatTime = now
			switch {
			case c.Type == corev1.NodeReady && c.Status != ready:
				c.Status, c.Reason, c.LastTransitionTime = ready, "KubeletPosted", now
			case c.Type == corev1.NodeMemoryPressure:
				c.Status, c.Reason = corev1.ConditionFalse, "KubeletHasSufficientMemory"
			}
		}
	})
	e.renew(n)
}

// postStatus writes the node's status as changed by set, on the latest version (the controller writes the
// same node).
func (e *nodeEnv) postStatus(n nodeRef, set func(*corev1.Node)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := e.node(n)
		set(node)
		_, err := e.cs[n.cluster].CoreV1().Nodes().UpdateStatus(e.t.Context(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *nodeEnv) node(n nodeRef) *corev1.Node {
	e.t.Helper()
	node, err := e.cs[n.cluster].CoreV1().Nodes().Get(e.t.Context(), n.name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return node
}

// addPod creates a pod bound to a node, running and ready.
func (e *nodeEnv) addPod(n nodeRef, name string, tols ...corev1.Toleration) {
	e.t.Helper()
	pods := e.cs[n.cluster].CoreV1().Pods("default")
	pod, err := pods.Create(e.t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: n.name, Tolerations: tols, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(e.clk.Now())}}
	if _, err := pods.UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *nodeEnv) pod(cluster, name string) *corev1.Pod {
	e.t.Helper()
	pod, err := e.cs[cluster].CoreV1().Pods("default").Get(e.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return pod
}

// evicted reports whether the controller deleted the pod (bound pods are deleted gracefully: they stay, with a
// deletionTimestamp, until their node confirms).
func (e *nodeEnv) evicted(cluster, name string) bool {
	p := e.pod(cluster, name)
	return p == nil || p.DeletionTimestamp != nil
}

func ptrTo[T any](v T) *T { return &v }

func tolerate(key string, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func tainted(n *corev1.Node, key string, effects ...corev1.TaintEffect) bool {
	for _, eff := range effects {
		if !hasTaint(n.Spec.Taints, key, eff) {
			return false
		}
	}
	return true
}

func untainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if managedTaint(t) {
			return false
		}
	}
	return true
}

func nodeReady(n *corev1.Node) corev1.NodeCondition {
	if c := nodeCondition(n.Status.Conditions, corev1.NodeReady); c != nil {
		return *c
	}
	return corev1.NodeCondition{}
}

func TestNodeLifecycleUnreachableNode(t *testing.T) {
	e := newNodeEnv(t)
	healthy, lost, other := nodeRef{"c1", "healthy"}, nodeRef{"c1", "lost"}, nodeRef{"c2", "lost"}
	for _, n := range []nodeRef{healthy, lost, other} {
		e.addNode(n)
	}
	e.addPod(lost, "plain")
	e.addPod(lost, "sixty", tolerate(corev1.TaintNodeUnreachable, ptrTo(int64(60))))
	e.addPod(lost, "forever", tolerate(corev1.TaintNodeUnreachable, nil))
	e.addPod(other, "plain")

	// c1/lost stops renewing its lease; c1/healthy and c2's node of the same name go on.
	e.advance(30*time.Second, healthy, other)
	e.advance(30*time.Second, healthy, other)
	eventually(t, "c1/lost Unknown with both unreachable taints", func() bool {
		n := e.node(lost)
		ready := nodeReady(n)
		return ready.Status == corev1.ConditionUnknown && ready.Reason == "NodeStatusUnknown" &&
			ready.Message == "Kubelet stopped posting node status." &&
			tainted(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute)
	})
	if c := nodeCondition(e.node(lost).Status.Conditions, corev1.NodeMemoryPressure); c == nil || c.Status != corev1.ConditionUnknown {
		t.Errorf("MemoryPressure of a silent node: %+v, want Unknown", c)
	}
	// (The evicted pod may be gone by then: the API finishes the deletion of a terminating pod on its next
	// status write, which upstream does only for a zero grace period.)
	eventually(t, "the pods of c1/lost not ready", func() bool {
		for _, name := range []string{"plain", "sixty", "forever"} {
			if p := e.pod("c1", name); (p == nil && name != "plain") || (p != nil && podReady(p)) {
				return false
			}
		}
		return true
	})
	eventually(t, "the pod without a toleration evicted", func() bool { return e.evicted("c1", "plain") })
	if p := e.pod("c1", "plain"); p != nil && !hasPodCondition(p, corev1.DisruptionTarget, "DeletionByTaintManager") {
		t.Errorf("evicted pod conditions %+v, want DisruptionTarget by DeletionByTaintManager", p.Status.Conditions)
	}
	for _, name := range []string{"sixty", "forever"} {
		if e.evicted("c1", name) {
			t.Fatalf("pod %s evicted at once despite its toleration", name)
		}
	}
	// The events kubectl describe shows: the node's status change, the pods marked not ready, the eviction.
	eventually(t, "NodeNotReady and TaintManagerEviction events", func() bool {
		has := func(kind, name, reason, component, message string) bool {
			for _, ev := range eventsOf(t, e.cs["c1"], kind, name) {
				if ev.Reason == reason && ev.Source.Component == component && ev.Message == message {
					return true
				}
			}
			return false
		}
		return has("Node", "lost", "NodeNotReady", "node-controller", "Node lost status is now: NodeNotReady") &&
			has("Pod", "forever", "NodeNotReady", "node-controller", "Node is not ready") &&
			has("Pod", "plain", "TaintManagerEviction", "taint-eviction-controller", "Marking for deletion Pod default/plain")
	})
	if evs := eventsOf(t, e.cs["c1"], "Node", "healthy"); len(evs) != 0 {
		t.Errorf("events on a healthy node: %+v", evs)
	}
	// Other nodes, and the node of the same name in c2, are untouched.
	for _, n := range []nodeRef{healthy, other} {
		if node := e.node(n); nodeReady(node).Status != corev1.ConditionTrue || !untainted(node) {
			t.Fatalf("%v: Ready %s, taints %v; want Ready and untainted", n, nodeReady(node).Status, node.Spec.Taints)
		}
	}
	if p := e.pod("c2", "plain"); p == nil || p.DeletionTimestamp != nil || !podReady(p) {
		t.Fatalf("the pod of c2/lost was touched: %+v", p)
	}

	// tolerationSeconds counts from the taint's timeAdded (when the clock stood at +60 s).
	e.advance(30*time.Second, healthy, other)
	if e.evicted("c1", "sixty") {
		t.Fatal("a pod tolerating 60 s evicted after 30 s")
	}
	e.advance(31*time.Second, healthy, other)
	eventually(t, "the pod tolerating 60 s evicted", func() bool { return e.evicted("c1", "sixty") })
	if e.evicted("c1", "forever") {
		t.Fatal("a pod tolerating the taint without a limit evicted")
	}

	// The agent comes back: lease renewed, Ready posted. The taints go.
	e.post(lost, corev1.ConditionTrue)
	eventually(t, "c1/lost Ready and untainted", func() bool {
		n := e.node(lost)
		return nodeReady(n).Status == corev1.ConditionTrue && untainted(n)
	})
	if e.evicted("c1", "forever") {
		t.Fatal("a pod tolerating the taint without a limit evicted")
	}
}

func TestNodeLifecycleNotReadyNode(t *testing.T) {
	e := newNodeEnv(t)
	healthy, sick := nodeRef{"c1", "healthy"}, nodeRef{"c1", "sick"}
	e.addNode(healthy)
	e.addNode(sick)
	e.addPod(sick, "web")
	e.post(sick, corev1.ConditionFalse)
	eventually(t, "not-ready taints on a node posting Ready=False", func() bool {
		n := e.node(sick)
		return tainted(n, corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) &&
			!hasTaint(n.Spec.Taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	})
	eventually(t, "its pod not ready and evicted", func() bool {
		p := e.pod("c1", "web")
		return p == nil || (!podReady(p) && p.DeletionTimestamp != nil)
	})
	if n := e.node(sick); nodeReady(n).Status != corev1.ConditionFalse {
		t.Fatalf("Ready %s: the agent's False replaced while it posts", nodeReady(n).Status)
	}

	// It falls silent as well: unreachable replaces not-ready at once (no second rate-limited taint).
	e.advance(30*time.Second, healthy)
	e.advance(30*time.Second, healthy)
	eventually(t, "unreachable taints replace not-ready", func() bool {
		n := e.node(sick)
		return nodeReady(n).Status == corev1.ConditionUnknown &&
			tainted(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) &&
			!hasTaint(n.Spec.Taints, corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule) &&
			!hasTaint(n.Spec.Taints, corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	})

	e.post(sick, corev1.ConditionTrue)
	eventually(t, "the taints removed once Ready", func() bool { return untainted(e.node(sick)) })
}

// TestNodeLifecycleEvictionRate: NoExecute taints, which start evictions, reach a cluster's nodes at
// EvictionRate (0.1 a second: one node every 10 s), each cluster on its own bucket.
func TestNodeLifecycleEvictionRate(t *testing.T) {
	e := newNodeEnv(t)
	alive := []nodeRef{{"c1", "healthy"}, {"c2", "healthy"}}
	lost := []nodeRef{{"c1", "a"}, {"c1", "b"}, {"c2", "a"}}
	for _, n := range append(alive, lost...) {
		e.addNode(n)
	}
	for _, n := range lost {
		e.addPod(n, "on-"+n.name)
	}
	e.advance(30*time.Second, alive...)
	e.advance(30*time.Second, alive...)

	// In c1 one of a and b gets the NoExecute taint; the other only the NoSchedule one: its reconcile ran and
	// was held by the rate limit (the clock stands still, so it stays held).
	var first, second string
	eventually(t, "one NoExecute taint in c1, and one in c2", func() bool {
		a, b := e.node(lost[0]), e.node(lost[1])
		if !tainted(a, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) || !tainted(b, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) {
			return false
		}
		switch aExec, bExec := tainted(a, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), tainted(b, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute); {
		case aExec && bExec:
			t.Fatal("two nodes of c1 tainted NoExecute at once at 0.1 nodes/s")
		case aExec:
			first, second = "a", "b"
		case bExec:
			first, second = "b", "a"
		default:
			return false
		}
		return tainted(e.node(lost[2]), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	})
	eventually(t, "the pods of the tainted nodes evicted", func() bool {
		return e.evicted("c1", "on-"+first) && e.evicted("c2", "on-a")
	})
	if e.evicted("c1", "on-"+second) || tainted(e.node(nodeRef{"c1", second}), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
		t.Fatalf("node %s tainted or its pod evicted before the rate limit allowed", second)
	}

	e.advance(10*time.Second, alive...)
	eventually(t, "the second node of c1 tainted and its pod evicted 10 s later", func() bool {
		return tainted(e.node(nodeRef{"c1", second}), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) && e.evicted("c1", "on-"+second)
	})
}

// TestNodeLifecycleFullDisruption: when no node of a cluster is ready, the control plane has more likely lost
// touch with them than they all failed: no NoExecute taints, no evictions (as upstream's full disruption).
func TestNodeLifecycleFullDisruption(t *testing.T) {
	e := newNodeEnv(t)
	only := nodeRef{"c1", "only"}
	e.addNode(only)
	e.addPod(only, "db")
	e.advance(30 * time.Second)
	e.advance(30 * time.Second)
	eventually(t, "the lone node Unknown, tainted NoSchedule only", func() bool {
		n := e.node(only)
		return nodeReady(n).Status == corev1.ConditionUnknown && tainted(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)
	})
	if n := e.node(only); hasTaint(n.Spec.Taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
		t.Fatalf("NoExecute taint in full disruption: %v", n.Spec.Taints)
	}
	eventually(t, "its pod not ready", func() bool { p := e.pod("c1", "db"); return p != nil && !podReady(p) })
	if e.evicted("c1", "db") {
		t.Fatal("a pod evicted in full disruption")
	}
	// A pod bound during the spell (seen first without a Ready condition, then reported ready) is marked too.
	e.addPod(only, "late")
	eventually(t, "the pod bound during the spell not ready", func() bool { p := e.pod("c1", "late"); return p != nil && !podReady(p) })

	// A ready node joins: the cluster is out of full disruption and the lost node gets its NoExecute taint.
	e.addNode(nodeRef{"c1", "new"})
	eventually(t, "the NoExecute taint once a node is ready", func() bool {
		return tainted(e.node(only), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) && e.evicted("c1", "db")
	})
}

func hasPodCondition(p *corev1.Pod, t corev1.PodConditionType, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

func TestNodeLifecycleEvictionTime(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	custom := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}
	// Each taint was added at t0 plus its position in seconds × 100.
	since := func(taints []corev1.Taint) func(corev1.Taint) time.Time {
		return func(t corev1.Taint) time.Time {
			for i := range taints {
				if taints[i].Key == t.Key {
					return t0.Add(time.Duration(i) * 100 * time.Second)
				}
			}
			panic("unknown taint")
		}
	}
	s := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		tols   []corev1.Toleration
		want   time.Time
		never  bool
	}{
		{"no toleration: at once", []corev1.Taint{unreachable}, nil, time.Time{}, false},
		{"another taint's toleration: at once", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, nil)}, time.Time{}, false},
		{"tolerated for 60 s", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, s(60))}, t0.Add(time.Minute), false},
		{"tolerated forever", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)}, time.Time{}, true},
		{"the shortest limit wins over forever", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil), tolerate("", s(30))}, t0.Add(30 * time.Second), false},
		{"negative seconds: at once", []corev1.Taint{unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, s(-5))}, t0, false},
		{"one untolerated taint of two: at once", []corev1.Taint{unreachable, custom}, []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)}, time.Time{}, false},
		{"value must match for Equal", []corev1.Taint{custom}, []corev1.Toleration{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoExecute}}, time.Time{}, false},
		{"Equal with the value, forever", []corev1.Taint{custom}, []corev1.Toleration{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}}, time.Time{}, true},
		{"each taint from its own time", []corev1.Taint{notReady, unreachable}, []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, s(300)), tolerate(corev1.TaintNodeUnreachable, s(60))}, t0.Add(160 * time.Second), false},
		{"a wildcard toleration tolerates all", []corev1.Taint{notReady, custom}, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, time.Time{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := evictionTime(tc.taints, tc.tols, since(tc.taints))
			if tc.never {
				if ok {
					t.Fatalf("evict at %v, want never", at)
				}
				return
			}
			if !ok || !at.Equal(tc.want) {
				t.Fatalf("evict at %v (%v), want %v", at, ok, tc.want)
			}
		})
	}
}

func TestNodeLifecycleNextTaints(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	at := metav1.NewTime(now)
	user := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	userExec := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}
	unreachNS := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &earlier}
	unreachNE := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &earlier}
	for _, tc := range []struct {
		name       string
		have       []corev1.Taint
		noSchedule []string
		noExec     string
		want       []corev1.Taint
	}{
		{"ready: only the user's stay", []corev1.Taint{user, unreachNS, userExec, unreachNE}, nil, "", []corev1.Taint{user, userExec}},
		{"kept taints keep their time", []corev1.Taint{unreachNS, unreachNE}, []string{corev1.TaintNodeUnreachable}, corev1.TaintNodeUnreachable, []corev1.Taint{unreachNS, unreachNE}},
		{"new ones at now", []corev1.Taint{user}, []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnschedulable}, corev1.TaintNodeNotReady,
			[]corev1.Taint{user, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at},
				{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at},
				{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}}},
		{"swap unreachable for not-ready", []corev1.Taint{unreachNS, unreachNE}, []string{corev1.TaintNodeNotReady}, corev1.TaintNodeNotReady,
			[]corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at},
				{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nextTaints(tc.have, tc.noSchedule, tc.noExec, now)); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeLifecycleMarkSilent(t *testing.T) {
	created := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	now := created.Add(time.Hour)
	st := corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: created, LastTransitionTime: created},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastTransitionTime: created},
	}}
	if !markSilent(&st, created, now) {
		t.Fatal("markSilent reported no change")
	}
	want := map[corev1.NodeConditionType]string{corev1.NodeReady: "NodeStatusUnknown", corev1.NodeMemoryPressure: "NodeStatusNeverUpdated",
		corev1.NodeDiskPressure: "NodeStatusNeverUpdated", corev1.NodePIDPressure: "NodeStatusNeverUpdated"}
	got := map[corev1.NodeConditionType]string{}
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			if c.Status != corev1.ConditionFalse {
				t.Errorf("NetworkUnavailable changed to %s", c.Status)
			}
			continue
		}
		if c.Status != corev1.ConditionUnknown || !c.LastTransitionTime.Time.Equal(now) || !c.LastHeartbeatTime.Equal(&created) {
			t.Errorf("%s: %+v, want Unknown since now, heartbeat kept", c.Type, c)
		}
		got[c.Type] = c.Reason
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if markSilent(&st, created, now.Add(time.Minute)) {
		t.Error("a second markSilent changed the status")
	}
}

func TestNodeLifecycleTokenBucket(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var b tokenBucket
	for i, step := range []struct {
		at    time.Duration
		ok    bool
		retry time.Duration // from t0; 0: none
	}{
		{0, true, 0}, {0, false, 10 * time.Second}, {4 * time.Second, false, 10 * time.Second},
		{10 * time.Second, true, 0}, {time.Hour, true, 0}, {time.Hour + time.Second, false, time.Hour + 10*time.Second},
	} {
		ok, retryAt := b.take(t0.Add(step.at), 0.1)
		want := time.Time{}
		if step.retry > 0 {
			want = t0.Add(step.retry)
		}
		if ok != step.ok || !retryAt.Equal(want) {
			t.Errorf("take %d at +%v = %v, %v; want %v, %v", i, step.at, ok, retryAt, step.ok, want)
		}
	}
	if ok, retryAt := b.take(t0.Add(2*time.Hour), 0); ok || !retryAt.IsZero() {
		t.Errorf("a zero rate gave %v, %v; want never", ok, retryAt)
	}
}
