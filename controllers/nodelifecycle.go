package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The node lifecycle controller, as kube-controller-manager's (pkg/controller/nodelifecycle with the taint
// eviction controller of pkg/controller/tainteviction), for every cluster at once:
//
//   - Health. A node is heard from when its Lease in kube-node-lease renews (spec.renewTime) or its Ready
//     condition's lastHeartbeatTime changes, at that moment on the controllers' clock (so an agent's clock skew
//     does not matter). Unheard for longer than the grace period, its Ready, MemoryPressure, DiskPressure and
//     PIDPressure conditions become Unknown ("NodeStatusUnknown"), and the Ready condition of each of its pods
//     becomes False once per not-ready spell (a live agent may set it back, as upstream allows).
//   - Taints. NoSchedule taints follow the conditions (not-ready, unreachable, memory/disk/PID pressure,
//     network-unavailable; unschedulable from spec.unschedulable). A node whose Ready is False gets
//     node.kubernetes.io/not-ready:NoExecute, Unknown gets node.kubernetes.io/unreachable:NoExecute (one
//     replaces the other at once); Ready again, both go. Adding a NoExecute taint is what starts evictions, so
//     it is rate-limited per cluster (a token bucket of NodeLifecycleConfig.EvictionRate nodes a second, burst
//     one) and held, as upstream's per-zone disruption modes do, while no node of the cluster is ready (the
//     control plane has more likely lost the nodes than they all died) or while most are not (more than two and
//     at least 55%: 0.01 nodes a second in clusters of over 50 nodes, none in smaller ones).
//   - Eviction. A pod bound to a node with NoExecute taints it does not tolerate is deleted (after a
//     DisruptionTarget condition); one that tolerates them for tolerationSeconds is deleted that long after
//     the taint's timeAdded (for a taint without one: after this process first saw it); one that tolerates them
//     without a limit stays.
//
// Not done (see the report of the change that added it): zones within a cluster (the cluster is one zone),
// node label reconciliation (beta OS/arch labels), RegisteredNode / RemovingNode events.

var (
	nodesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// Upstream's defaults for the disruption modes (kube-controller-manager's --unhealthy-zone-threshold,
// --large-cluster-size-threshold and --secondary-node-eviction-rate), applied to a cluster as a whole.
const (
	unhealthyThreshold    = 0.55
	largeClusterSize      = 50
	secondaryEvictionRate = 0.01
	// excludeDisruptionLabel keeps a node out of the count of ready and not-ready nodes.
	excludeDisruptionLabel = "node.kubernetes.io/exclude-disruption"
)

// NodeLifecycleConfig configures the node lifecycle controller. Zero fields take the defaults noted.
type NodeLifecycleConfig struct {
	// MonitorGracePeriod is how long a node may go unheard before its conditions become Unknown
	// (kube-controller-manager's --node-monitor-grace-period; default 40s).
	MonitorGracePeriod time.Duration
	// StartupGracePeriod replaces it for a node that has never posted a Ready condition
	// (--node-startup-grace-period; default 1m).
	StartupGracePeriod time.Duration
	// EvictionRate is how many nodes a second, per cluster, may be given a not-ready or unreachable NoExecute
	// taint, which starts the eviction of their pods (--node-eviction-rate; default 0.1).
	EvictionRate float64
}

func (c NodeLifecycleConfig) withDefaults() NodeLifecycleConfig {
	if c.MonitorGracePeriod == 0 {
		c.MonitorGracePeriod = 40 * time.Second
	}
	if c.StartupGracePeriod == 0 {
		c.StartupGracePeriod = time.Minute
	}
	if c.EvictionRate == 0 {
		c.EvictionRate = 0.1
	}
	return c
}

// Validate reports a configuration that cannot work (negative durations or rate).
func (c NodeLifecycleConfig) Validate() error {
	if c.MonitorGracePeriod < 0 || c.StartupGracePeriod < 0 {
		return errors.New("controllers: node grace periods must not be negative")
	}
	if c.EvictionRate < 0 {
		return errors.New("controllers: the node eviction rate must not be negative")
	}
	return nil
}

// RunNodeLifecycle runs the controller until ctx ends. Two queues: nodes (Key with an empty Namespace) for
// health, conditions and taints, and pods for NoExecute evictions.
func RunNodeLifecycle(ctx context.Context, d Deps) { newNodeLifecycle(d).run(ctx) }

func newNodeLifecycle(d Deps) *nodeLifecycle {
	return &nodeLifecycle{d: d, cfg: d.NodeLifecycle.withDefaults(), log: d.Logger.With("controller", "nodelifecycle"),
		cl: newClients(d.API, serviceAccountUser("node-controller")), nodeQ: newQueue("nodelifecycle"),
		podQ: newQueue("tainteviction"), health: map[Key]*nodeHealth{}, buckets: map[string]*tokenBucket{},
		seen: map[seenTaint]time.Time{}, onNode: podsOnNodes{by: map[Key]map[Key]bool{}},
		nodes:  func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, nodesGVR) },
		leases: func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, leasesGVR) },
		pods:   func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, podsGVR) }}
}

func (c *nodeLifecycle) run(ctx context.Context) {
	if err := c.cfg.Validate(); err != nil {
		c.log.Error("node lifecycle controller not started", "err", err)
		return
	}
	d := c.d
	var wg sync.WaitGroup
	wg.Go(func() { follow(ctx, c.nodes, func(ev watchcache.Event) { c.nodeEvent(ctx, ev) }, c.log) })
	wg.Go(func() { follow(ctx, c.leases, c.leaseEvent, c.log) })
	wg.Go(func() { follow(ctx, c.pods, c.podEvent, c.log) })
	wg.Go(func() { work(ctx, c.podQ, 4, d.clock(), c.syncPod, c.log) })
	work(ctx, c.nodeQ, 4, d.clock(), c.syncNode, c.log)
	wg.Wait()
}

type nodeLifecycle struct {
	d                   Deps
	cfg                 NodeLifecycleConfig
	log                 *slog.Logger
	cl                  *clients
	nodes, leases, pods func(context.Context) (*watchcache.Collection, error)
	nodeQ, podQ         workqueue.TypedRateLimitingInterface[Key]
	onNode              podsOnNodes

	mu      sync.Mutex // guards health, buckets and seen (never held during I/O)
	health  map[Key]*nodeHealth
	buckets map[string]*tokenBucket // by cluster
	seen    map[seenTaint]time.Time // when a NoExecute taint without timeAdded was first seen
}

// nodeHealth is what the controller remembers of a node between reconciles.
type nodeHealth struct {
	heard     time.Time   // on the controllers' clock, when the node was last heard from
	heartbeat metav1.Time // its Ready condition's lastHeartbeatTime at the time
	renewed   time.Time   // its lease's renewTime at the time
	// marked holds the pods set not ready in the node's current not-ready spell (nil while the node is ready).
	marked map[types.UID]bool
	// wasReady: the node has been seen Ready since this process started watching it.
	wasReady bool
}

type seenTaint struct {
	node     Key
	key, val string
}

// nodeEvent queues the node; a change of its Ready status queues the cluster's not-ready nodes (the cluster's
// disruption mode may have changed), a change of its NoExecute taints queues its pods.
func (c *nodeLifecycle) nodeEvent(ctx context.Context, ev watchcache.Event) {
	node := ev.Object.Object.(*corev1.Node)
	k := Key{Cluster: ev.Object.Cluster, Name: node.Name}
	c.nodeQ.Add(k)
	var prev *corev1.Node
	if ev.Prev != nil {
		prev = ev.Prev.Object.(*corev1.Node)
	}
	deleted := ev.Type == store.Deleted
	if deleted || (prev == nil && readyStatus(node) == corev1.ConditionTrue) ||
		(prev != nil && readyStatus(prev) != readyStatus(node)) {
		c.queueNotReady(ctx, k.Cluster)
	}
	var taints []corev1.Taint
	if !deleted {
		taints = noExecuteTaints(node.Spec.Taints)
	}
	if prev == nil || deleted || !apiequality.Semantic.DeepEqual(noExecuteTaints(prev.Spec.Taints), taints) {
		for _, pk := range c.onNode.keys(k) {
			c.podQ.Add(pk)
		}
		c.pruneSeen(k, taints)
	}
}

func (c *nodeLifecycle) leaseEvent(ev watchcache.Event) {
	if ev.Object.Namespace == corev1.NamespaceNodeLease {
		c.nodeQ.Add(Key{Cluster: ev.Object.Cluster, Name: ev.Object.Name})
	}
}

// podEvent keeps the pods-by-node index and queues a pod newly bound or with new tolerations (and its node,
// which marks it not ready if the node is not).
func (c *nodeLifecycle) podEvent(ev watchcache.Event) {
	pod := ev.Object.Object.(*corev1.Pod)
	k := Key{Cluster: ev.Object.Cluster, Namespace: pod.Namespace, Name: pod.Name}
	var prev *corev1.Pod
	if ev.Prev != nil {
		prev = ev.Prev.Object.(*corev1.Pod)
	}
	to := pod.Spec.NodeName
	if ev.Type == store.Deleted {
		to = ""
	}
	from := ""
	if prev != nil {
		from = prev.Spec.NodeName
	}
	c.onNode.move(k, from, to)
	switch {
	case to == "":
	case prev == nil || from != to:
		c.podQ.Add(k)
		c.nodeQ.Add(Key{Cluster: k.Cluster, Name: to})
	case !apiequality.Semantic.DeepEqual(prev.Spec.Tolerations, pod.Spec.Tolerations):
		c.podQ.Add(k)
	}
	// A pod that became ready on a node in a not-ready spell is marked again (upstream's pod worker does the
	// same): the spell may have begun on a collection that did not have its status yet, or its kubelet spoke.
	if to != "" && podReady(pod) && (prev == nil || !podReady(prev)) && c.unmark(Key{Cluster: k.Cluster, Name: to}, pod.UID) {
		c.nodeQ.Add(Key{Cluster: k.Cluster, Name: to})
	}
}

// queueNotReady queues the nodes of a cluster whose Ready condition is not True.
func (c *nodeLifecycle) queueNotReady(ctx context.Context, cluster string) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return // the collection is being rebuilt: follow replays every node
	}
	entries, _ := nodes.ListIn(cluster, "")
	for _, e := range entries {
		if readyStatus(e.Object.(*corev1.Node)) != corev1.ConditionTrue {
			c.nodeQ.Add(Key{Cluster: cluster, Name: e.Name})
		}
	}
}

// syncNode brings one node's conditions, taints and pods' readiness in line with how recently it was heard
// from; it re-checks when the node would fall silent or the rate limit lets a NoExecute taint through.
func (c *nodeLifecycle) syncNode(ctx context.Context, k Key) error {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	e, ok, _ := nodes.GetIn(k.Cluster, "", k.Name)
	if !ok {
		c.forget(k)
		return nil
	}
	node := e.Object.(*corev1.Node)
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return err
	}
	now := c.d.clock().Now()
	leases, err := c.leases(ctx)
	if err != nil {
		return err
	}
	heard := c.heardAt(k, node, leaseOf(leases, k), now, true)
	var recheckAt time.Time
	if silentAt := heard.Add(c.grace(node)); now.Before(silentAt) {
		recheckAt = silentAt
	} else if next := node.DeepCopy(); markSilent(&next.Status, node.CreationTimestamp, now) {
		if node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return ignoreGone(err)
		}
		c.noteOwnStatus(k, node)
	}
	retryAt, err := c.syncTaints(ctx, cs, k, node, now)
	if err != nil {
		return ignoreGone(err)
	}
	if err := c.markPodsNotReady(ctx, cs, k, node, now); err != nil {
		return err
	}
	return c.recheck(c.nodeQ, k, earliest(recheckAt, retryAt))
}

// recheck is what a reconcile of k returns to look again at t on the controllers' clock (zero: no need). The
// clock is read here, after the reconcile's writes, so that time that passed during them counts; a time already
// reached queues the key again at once.
func (c *nodeLifecycle) recheck(q workqueue.TypedRateLimitingInterface[Key], k Key, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if d := t.Sub(c.d.clock().Now()); d > 0 {
		return requeueAfter(d)
	}
	q.Add(k)
	return nil
}

// earliest is the earlier of two times, zero being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (c *nodeLifecycle) grace(node *corev1.Node) time.Duration {
	if nodeCondition(node.Status.Conditions, corev1.NodeReady) == nil {
		return c.cfg.StartupGracePeriod
	}
	return c.cfg.MonitorGracePeriod
}

// leaseOf is the node's Lease in kube-node-lease, nil without one.
func leaseOf(leases *watchcache.Collection, k Key) *coordinationv1.Lease {
	if e, ok, _ := leases.GetIn(k.Cluster, corev1.NamespaceNodeLease, k.Name); ok {
		return e.Object.(*coordinationv1.Lease)
	}
	return nil
}

// heardAt is when, on the controllers' clock, the node was last heard from: now if this is the first look at
// it (so a controller that starts or takes over gives every node a grace period) or its heartbeat or lease
// changed since the last look, else the remembered time. The agent's own timestamps are only compared, never
// trusted as times, as upstream. With save the observation is remembered (reconciles save; counting the
// cluster's ready nodes does not).
func (c *nodeLifecycle) heardAt(k Key, node *corev1.Node, lease *coordinationv1.Lease, now time.Time, save bool) time.Time {
	var hb metav1.Time
	if ready := nodeCondition(node.Status.Conditions, corev1.NodeReady); ready != nil {
		hb = ready.LastHeartbeatTime
	}
	var renewed time.Time
	if lease != nil && lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, known := c.health[k]
	var heard time.Time
	switch {
	case !known, !hb.Equal(&h.heartbeat), renewed.After(h.renewed):
		heard = now
	default:
		heard = h.heard
	}
	if save {
		if !known {
			h = &nodeHealth{}
			c.health[k] = h
		}
		h.heard, h.heartbeat, h.renewed = heard, hb, renewed
	}
	return heard
}

// noteOwnStatus remembers the heartbeat the controller itself wrote (NodeStatusNeverUpdated conditions carry
// the creation time), so that its own write does not count as hearing from the node.
func (c *nodeLifecycle) noteOwnStatus(k Key, node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.health[k]; ok {
		if ready := nodeCondition(node.Status.Conditions, corev1.NodeReady); ready != nil {
			h.heartbeat = ready.LastHeartbeatTime
		}
	}
}

func (c *nodeLifecycle) forget(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.health, k)
}

// markSilent sets the conditions of a node that stopped posting status to Unknown, as upstream: Ready,
// MemoryPressure, DiskPressure and PIDPressure (NetworkUnavailable belongs to the network, not the kubelet);
// one never posted is added as NodeStatusNeverUpdated. It reports whether anything changed.
func markSilent(st *corev1.NodeStatus, created metav1.Time, now time.Time) bool {
	changed := false
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		cond := nodeCondition(st.Conditions, t)
		switch {
		case cond == nil:
			st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: created, LastTransitionTime: metav1.NewTime(now)})
		case cond.Status != corev1.ConditionUnknown:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
			cond.LastTransitionTime = metav1.NewTime(now)
		default:
			continue
		}
		changed = true
	}
	return changed
}

func nodeCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// readyStatus is the status of a node's Ready condition ("" without one).
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if c := nodeCondition(node.Status.Conditions, corev1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// conditionTaints maps node conditions to the NoSchedule taints upstream's TaintNodesByCondition gives them.
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady:              {corev1.ConditionFalse: corev1.TaintNodeNotReady, corev1.ConditionUnknown: corev1.TaintNodeUnreachable},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
}

// managedTaint reports whether the controller owns a taint: a condition's or unschedulable's NoSchedule
// taint, or the not-ready / unreachable NoExecute taint.
func managedTaint(t corev1.Taint) bool {
	switch t.Effect {
	case corev1.TaintEffectNoSchedule:
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeMemoryPressure,
			corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeNetworkUnavailable,
			corev1.TaintNodeUnschedulable:
			return true
		}
	case corev1.TaintEffectNoExecute:
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	}
	return false
}

// noScheduleKeys are the keys of the NoSchedule taints a node's conditions and spec.unschedulable call for.
func noScheduleKeys(node *corev1.Node) []string {
	var keys []string
	for _, cond := range node.Status.Conditions {
		if key, ok := conditionTaints[cond.Type][cond.Status]; ok {
			keys = append(keys, key)
		}
	}
	if node.Spec.Unschedulable {
		keys = append(keys, corev1.TaintNodeUnschedulable)
	}
	return keys
}

// noExecuteKey is the NoExecute taint a node's Ready condition calls for ("" for none) and its opposite.
func noExecuteKey(node *corev1.Node) (key, opposite string) {
	switch readyStatus(node) {
	case corev1.ConditionFalse:
		return corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable
	case corev1.ConditionUnknown:
		return corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady
	}
	return "", ""
}

// nextTaints is have with the controller's taints brought to want: the NoSchedule taints with the keys
// noSchedule and the NoExecute one with the key noExec ("" for none). Other taints are untouched, kept ones
// keep their timeAdded, new ones are added at now.
func nextTaints(have []corev1.Taint, noSchedule []string, noExec string, now time.Time) []corev1.Taint {
	wanted := func(t corev1.Taint) bool {
		if t.Effect == corev1.TaintEffectNoExecute {
			return t.Key == noExec
		}
		return slices.Contains(noSchedule, t.Key)
	}
	var out []corev1.Taint
	for _, t := range have {
		if !managedTaint(t) || wanted(t) {
			out = append(out, t)
		}
	}
	at := metav1.NewTime(now)
	add := func(key string, effect corev1.TaintEffect) {
		if !slices.ContainsFunc(out, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect }) {
			out = append(out, corev1.Taint{Key: key, Effect: effect, TimeAdded: &at})
		}
	}
	for _, key := range noSchedule {
		add(key, corev1.TaintEffectNoSchedule)
	}
	if noExec != "" {
		add(noExec, corev1.TaintEffectNoExecute)
	}
	return out
}

func hasTaint(ts []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(ts, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// syncTaints writes the node's taints. A NoExecute taint where the node has neither is added only if the
// cluster's disruption mode and rate limit allow (retryAt: when to try again); one replacing its opposite goes
// at once, as upstream; in full disruption both are removed.
func (c *nodeLifecycle) syncTaints(ctx context.Context, cs kubernetes.Interface, k Key, node *corev1.Node, now time.Time) (retryAt time.Time, err error) {
	noExec, opposite := noExecuteKey(node)
	var bucket *tokenBucket
	var took time.Time
	if noExec != "" {
		rate, full, err := c.evictionRate(ctx, k, node, now)
		if err != nil {
			return time.Time{}, err
		}
		switch {
		case full:
			noExec = ""
		case hasTaint(node.Spec.Taints, noExec, corev1.TaintEffectNoExecute), hasTaint(node.Spec.Taints, opposite, corev1.TaintEffectNoExecute):
		default:
			var ok bool
			bucket, took, ok, retryAt = c.take(k.Cluster, now, rate)
			if !ok {
				noExec = ""
			}
		}
	}
	next := nextTaints(node.Spec.Taints, noScheduleKeys(node), noExec, now)
	if apiequality.Semantic.DeepEqual(next, node.Spec.Taints) {
		return retryAt, nil
	}
	up := node.DeepCopy()
	up.Spec.Taints = next
	if _, err := cs.CoreV1().Nodes().Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		c.giveBack(bucket, took)
		return time.Time{}, err
	}
	return retryAt, nil
}

// evictionRate is the rate at which the cluster's nodes may get NoExecute taints, from how many of its nodes
// are ready (Ready=True and heard from within the grace period; self is the fresh state of the node being
// reconciled), and whether the cluster is in full disruption (none ready).
func (c *nodeLifecycle) evictionRate(ctx context.Context, self Key, fresh *corev1.Node, now time.Time) (rate float64, full bool, err error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return 0, false, err
	}
	leases, err := c.leases(ctx)
	if err != nil {
		return 0, false, err
	}
	entries, _ := nodes.ListIn(self.Cluster, "")
	ready, notReady := 0, 0
	for _, e := range entries {
		node := e.Object.(*corev1.Node)
		if e.Name == self.Name {
			node = fresh
		}
		if _, excluded := node.Labels[excludeDisruptionLabel]; excluded {
			continue
		}
		k := Key{Cluster: self.Cluster, Name: e.Name}
		heard := c.heardAt(k, node, leaseOf(leases, k), now, false)
		if readyStatus(node) == corev1.ConditionTrue && now.Before(heard.Add(c.grace(node))) {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return 0, true, nil
	case notReady > 2 && float64(notReady)/float64(ready+notReady) >= unhealthyThreshold:
		if ready+notReady > largeClusterSize {
			return secondaryEvictionRate, false, nil
		}
		return 0, false, nil
	}
	return c.cfg.EvictionRate, false, nil
}

// tokenBucket lets one NoExecute taint through every 1/rate seconds with a burst of one (upstream's
// EvictionRateLimiterBurst): next is the earliest time of the next one.
type tokenBucket struct{ next time.Time }

// take takes a token at now; without one, retryAt is when there is one (zero with a zero rate: never).
func (b *tokenBucket) take(now time.Time, rate float64) (ok bool, retryAt time.Time) {
	if rate <= 0 {
		return false, time.Time{}
	}
	if now.Before(b.next) {
		return false, b.next
	}
	b.next = now.Add(time.Duration(float64(time.Second) / rate))
	return true, time.Time{}
}

// take takes a token of the cluster's bucket; with one, bucket and took say what giveBack restores.
func (c *nodeLifecycle) take(cluster string, now time.Time, rate float64) (bucket *tokenBucket, took time.Time, ok bool, retryAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, found := c.buckets[cluster]
	if !found {
		b = &tokenBucket{}
		c.buckets[cluster] = b
	}
	before := b.next
	if ok, retryAt = b.take(now, rate); !ok {
		return nil, time.Time{}, false, retryAt
	}
	return b, before, true, time.Time{}
}

// giveBack returns a token whose taint could not be written, unless another has been taken since.
func (c *nodeLifecycle) giveBack(b *tokenBucket, before time.Time) {
	if b == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.next.After(before) {
		b.next = before
	}
}

// markPodsNotReady sets the Ready condition of the node's pods False, once per not-ready spell of the node.
func (c *nodeLifecycle) markPodsNotReady(ctx context.Context, cs kubernetes.Interface, k Key, node *corev1.Node, now time.Time) error {
	switch readyStatus(node) {
	case corev1.ConditionTrue:
		c.setMarked(k, "", false)
		return nil
	case "": // a node that has not posted its status yet (it becomes Unknown after the startup grace period)
		return nil
	}
	// The node's Ready status has left True (upstream records the change only then, not for a node that was
	// never seen ready).
	if c.beginSpell(k) {
		c.d.recorder(k.Cluster, "node-controller").Eventf(node, corev1.EventTypeNormal, "NodeNotReady",
			"Node %s status is now: NodeNotReady", node.Name)
	}
	pods, err := c.podsOn(ctx, k)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if c.marked(k, pod.UID) {
			continue
		}
		if next, changed := podNotReady(pod, now); changed {
			_, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("mark pod %s/%s not ready: %w", pod.Namespace, pod.Name, err)
			}
			if err == nil {
				c.d.recorder(k.Cluster, "node-controller").Event(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
			}
		}
		c.setMarked(k, pod.UID, true)
	}
	return nil
}

// beginSpell starts the node's not-ready spell unless one is under way, and reports whether it did after the
// node had been seen ready.
func (c *nodeLifecycle) beginSpell(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.health[k]; ok && h.marked == nil {
		h.marked = map[types.UID]bool{}
		return h.wasReady
	}
	return false
}

// marked reports whether the pod was set not ready in the node's current not-ready spell.
func (c *nodeLifecycle) marked(k Key, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.health[k]
	return !ok || h.marked[uid] // a forgotten node is gone: nothing to mark
}

// unmark forgets that the pod was set not ready in the node's current not-ready spell, and reports whether the
// node is in one.
func (c *nodeLifecycle) unmark(k Key, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.health[k]
	if !ok || h.marked == nil {
		return false
	}
	delete(h.marked, uid)
	return true
}

// setMarked records a marked pod, or with on false ends the not-ready spell (the node is ready).
func (c *nodeLifecycle) setMarked(k Key, uid types.UID, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.health[k]
	switch {
	case !ok:
	case !on:
		h.marked, h.wasReady = nil, true
	case h.marked != nil:
		h.marked[uid] = true
	}
}

// podNotReady is the pod with its Ready condition False (as of now), if it has one that is not.
func podNotReady(pod *corev1.Pod, now time.Time) (*corev1.Pod, bool) {
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	if i < 0 || pod.Status.Conditions[i].Status == corev1.ConditionFalse {
		return nil, false
	}
	next := pod.DeepCopy()
	next.Status.Conditions[i].Status = corev1.ConditionFalse
	next.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
	return next, true
}

// podsOn returns the pods bound to a node, from the index checked against the pods collection.
func (c *nodeLifecycle) podsOn(ctx context.Context, node Key) ([]*corev1.Pod, error) {
	pods, err := c.pods(ctx)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, k := range c.onNode.keys(node) {
		e, ok, _ := pods.GetIn(k.Cluster, k.Namespace, k.Name)
		if !ok || e.Object.(*corev1.Pod).Spec.NodeName != node.Name {
			c.onNode.move(k, node.Name, "") // stale: a deletion missed while the collection was rebuilt
			continue
		}
		out = append(out, e.Object.(*corev1.Pod))
	}
	return out, nil
}

// podsOnNodes indexes pods by (cluster, node name). It is a hint kept from pod events: readers check each
// entry against the pods collection.
type podsOnNodes struct {
	mu sync.Mutex // guards by
	by map[Key]map[Key]bool
}

// move records that a pod left node from (in its cluster) for node to ("" for none).
func (x *podsOnNodes) move(pod Key, from, to string) {
	if from == to {
		if to != "" {
			x.add(pod, to)
		}
		return
	}
	x.mu.Lock()
	if from != "" {
		n := Key{Cluster: pod.Cluster, Name: from}
		delete(x.by[n], pod)
		if len(x.by[n]) == 0 {
			delete(x.by, n)
		}
	}
	x.mu.Unlock()
	if to != "" {
		x.add(pod, to)
	}
}

func (x *podsOnNodes) add(pod Key, node string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := Key{Cluster: pod.Cluster, Name: node}
	if x.by[n] == nil {
		x.by[n] = map[Key]bool{}
	}
	x.by[n][pod] = true
}

func (x *podsOnNodes) keys(node Key) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Key, 0, len(x.by[node]))
	for k := range x.by[node] {
		out = append(out, k)
	}
	return out
}

// syncPod evicts a pod from a node with NoExecute taints when its tolerations run out, or re-checks then.
func (c *nodeLifecycle) syncPod(ctx context.Context, k Key) error {
	pods, err := c.pods(ctx)
	if err != nil {
		return err
	}
	e, ok, _ := pods.GetIn(k.Cluster, k.Namespace, k.Name)
	if !ok {
		return nil
	}
	pod := e.Object.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return nil
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	ne, ok, _ := nodes.GetIn(k.Cluster, "", pod.Spec.NodeName)
	if !ok {
		return nil
	}
	taints := noExecuteTaints(ne.Object.(*corev1.Node).Spec.Taints)
	if len(taints) == 0 {
		return nil
	}
	now := c.d.clock().Now()
	nk := Key{Cluster: k.Cluster, Name: pod.Spec.NodeName}
	at, ok := evictionTime(taints, pod.Spec.Tolerations, func(t corev1.Taint) time.Time { return c.taintSince(nk, t, now) })
	if !ok {
		return nil
	}
	if now.Before(at) {
		return c.recheck(c.podQ, k, at)
	}
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return err
	}
	return evict(ctx, cs, c.d.recorder(k.Cluster, "taint-eviction-controller"), pod, now)
}

// evict deletes a pod for a NoExecute taint, first marking it with a DisruptionTarget condition, as upstream.
// Both writes are conditional on the version decided on: the pods collection may lag, and a second DELETE of a
// pod already terminating would not be a no-op.
func evict(ctx context.Context, cs kubernetes.Interface, rec record.EventRecorder, pod *corev1.Pod, now time.Time) error {
	rec.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	rv := pod.ResourceVersion
	next := pod.DeepCopy()
	if setPodCondition(&next.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"}, now) {
		out, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return ignoreGone(err)
		}
		rv = out.ResourceVersion
	}
	err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &rv}})
	return ignoreGone(err) // a conflict is retried with the pod's new version
}

// setPodCondition sets a pod condition, moving its lastTransitionTime to now when its status changes, and
// reports whether anything changed.
func setPodCondition(st *corev1.PodStatus, cond corev1.PodCondition, now time.Time) bool {
	cond.LastTransitionTime = metav1.NewTime(now)
	i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type })
	if i < 0 {
		st.Conditions = append(st.Conditions, cond)
		return true
	}
	old := st.Conditions[i]
	if old.Status == cond.Status {
		if old.Reason == cond.Reason && old.Message == cond.Message {
			return false
		}
		cond.LastTransitionTime = old.LastTransitionTime
	}
	st.Conditions[i] = cond
	return true
}

func noExecuteTaints(ts []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// evictionTime is when a pod must leave a node with NoExecute taints: at once (the zero time) if it does not
// tolerate one of them; else, over the taints, the earliest since(taint) plus the shortest tolerationSeconds
// of the tolerations matching it (zero or negative: at once); never (ok false) if every taint is tolerated by
// tolerations without tolerationSeconds. Upstream counts every taint from when it noticed them; here each
// taint counts from its timeAdded.
func evictionTime(taints []corev1.Taint, tols []corev1.Toleration, since func(corev1.Taint) time.Time) (at time.Time, ok bool) {
	for _, t := range taints {
		tolerated, limited := false, time.Duration(-1)
		for i := range tols {
			if !tols[i].ToleratesTaint(klog.Background(), &t, false) {
				continue
			}
			tolerated = true
			if s := tols[i].TolerationSeconds; s != nil && (limited < 0 || time.Duration(max(*s, 0))*time.Second < limited) {
				limited = time.Duration(max(*s, 0)) * time.Second
			}
		}
		switch {
		case !tolerated:
			return time.Time{}, true
		case limited < 0:
			continue
		}
		if when := since(t).Add(limited); !ok || when.Before(at) {
			at, ok = when, true
		}
	}
	return at, ok
}

// taintSince is when a NoExecute taint was put on the node: its timeAdded, or for a taint without one (set by
// a client that leaves it out) when this process first saw it.
func (c *nodeLifecycle) taintSince(node Key, t corev1.Taint, now time.Time) time.Time {
	if t.TimeAdded != nil {
		return t.TimeAdded.Time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := seenTaint{node: node, key: t.Key, val: t.Value}
	if at, ok := c.seen[s]; ok {
		return at
	}
	c.seen[s] = now
	return now
}

// pruneSeen forgets first sightings of the node's taints that it no longer has.
func (c *nodeLifecycle) pruneSeen(node Key, taints []corev1.Taint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.seen {
		if s.node == node && !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == s.key && t.Value == s.val }) {
			delete(c.seen, s)
		}
	}
}

// ignoreGone treats an object deleted meanwhile as done.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
