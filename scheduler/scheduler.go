// Package scheduler is Wheelhouse's pod scheduler: one process places the pending pods of every cluster (keys
// carry the cluster; a pod is only ever weighed against its own cluster's nodes) through the scheduling
// framework (scheduler/framework) and its plugins (scheduler/plugins), configured like kube-scheduler with a
// KubeSchedulerConfiguration. It reads nodes and pods from the watch cache's cross-cluster collections, keeps a
// per-cluster cache of nodes with their pods (assuming a pod placed the moment it is chosen, binding it through
// pods/binding in the background), queues pods in scheduler/queue, and reports FailedScheduling events and the
// PodScheduled condition the way kubectl users know. It runs in `wheelhouse server` under the controller
// lease. See docs/design/scheduler.md.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
	"github.com/wheelhouse-dev/wheelhouse/scheduler/queue"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Deps is what the scheduler needs.
type Deps struct {
	API      *kubeapi.API
	Registry *resources.Registry
	Logger   *slog.Logger
	// Config is a completed configuration (LoadConfig); nil: the defaults.
	Config *Configuration
	// Clock drives the queue's backoff; nil: the real clock.
	Clock clock.WithTicker
	// Recorder gives the event recorder of a cluster (controllers.Events.For); nil: events are not recorded.
	Recorder func(cluster, component string) record.EventRecorder
}

// schedulerUser is the scheduler's identity, bound to the built-in system:kube-scheduler role.
var schedulerUser = kubeapi.User{Name: "system:kube-scheduler", Groups: []string{"system:authenticated"}}

// Scheduler places pending pods.
type Scheduler struct {
	d        Deps
	cfg      *Configuration
	profiles map[string]*framework.Framework
	queue    *queue.Queue
	log      *slog.Logger

	mu       sync.Mutex
	clusters map[string]*clusterCache
	clients  map[string]kubernetes.Interface

	// calls are the API calls in flight off the scheduling loop (bindings, status updates, evictions); sem
	// bounds the bindings and status updates among them.
	calls sync.WaitGroup
	sem   chan struct{}
	// Scheduled counts pods bound (for benchmarks and tests).
	Scheduled atomic.Int64
}

// New builds a scheduler from its configuration.
func New(d Deps) (*Scheduler, error) {
	cfg := d.Config
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(""); err != nil {
			return nil, err
		}
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	s := &Scheduler{d: d, cfg: cfg, profiles: map[string]*framework.Framework{}, log: d.Logger.With("component", "scheduler"),
		clusters: map[string]*clusterCache{}, clients: map[string]kubernetes.Interface{}, sem: make(chan struct{}, maxBindingsInFlight)}
	for i := range cfg.Profiles {
		fw, err := newFramework(&cfg.Profiles[i], cfg, s)
		if err != nil {
			return nil, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		s.profiles[fw.ProfileName] = fw
	}
	s.queue = queue.New(queue.Config{InitialBackoff: secs(*cfg.PodInitialBackoffSeconds), MaxBackoff: secs(*cfg.PodMaxBackoffSeconds), Clock: d.Clock})
	return s, nil
}

// Run schedules until ctx ends: it follows nodes, pods and namespaces of every cluster, waits for their
// initial state, then places pods one by one.
func (s *Scheduler) Run(ctx context.Context) {
	var wg, synced sync.WaitGroup
	follow := func(res string, h controllers.FollowHandlers) {
		synced.Add(1)
		once := sync.OnceFunc(synced.Done)
		inner := h.Synced
		h.Synced = func() {
			if inner != nil {
				inner()
			}
			once()
		}
		wg.Go(func() {
			controllers.Follow(ctx, func(ctx context.Context) (*watchcache.Collection, error) { return s.collection(ctx, res) }, h, s.log)
			once() // ctx ended before the first sync
		})
	}
	follow("nodes", controllers.FollowHandlers{Event: s.onNode, Reset: s.each((*clusterCache).resetNodes), Synced: s.each((*clusterCache).dropStaleNodes)})
	follow("pods", controllers.FollowHandlers{Event: s.onPod, Reset: s.each((*clusterCache).resetPods), Synced: s.each((*clusterCache).dropStalePods)})
	follow("namespaces", controllers.FollowHandlers{Event: s.onNamespace})
	wg.Go(func() { s.queue.Run(ctx) })
	synced.Wait()
	for ctx.Err() == nil && s.scheduleOne(ctx) {
	}
	s.queue.Close()
	s.calls.Wait()
	wg.Wait()
}

var gvrs = map[string]schema.GroupVersionResource{
	"nodes": {Version: "v1", Resource: "nodes"}, "pods": {Version: "v1", Resource: "pods"},
	"namespaces": {Version: "v1", Resource: "namespaces"}, "services": {Version: "v1", Resource: "services"},
	"replicationcontrollers": {Version: "v1", Resource: "replicationcontrollers"},
	"replicasets":            {Group: "apps", Version: "v1", Resource: "replicasets"},
	"statefulsets":           {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"poddisruptionbudgets":   {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
}

func (s *Scheduler) collection(ctx context.Context, name string) (*watchcache.Collection, error) {
	res, ok := s.d.Registry.Lookup(gvrs[name])
	if !ok {
		return nil, fmt.Errorf("scheduler: %s is not served", name)
	}
	return s.d.API.Collection(ctx, "", res)
}

func (s *Scheduler) cluster(id string) *clusterCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[id]
	if !ok {
		c = newClusterCache(id)
		s.clusters[id] = c
	}
	return c
}

// each applies fn to every cluster cache under its lock.
func (s *Scheduler) each(fn func(*clusterCache)) func() {
	return func() {
		s.mu.Lock()
		all := make([]*clusterCache, 0, len(s.clusters))
		for _, c := range s.clusters {
			all = append(all, c)
		}
		s.mu.Unlock()
		for _, c := range all {
			c.mu.Lock()
			fn(c)
			c.mu.Unlock()
		}
	}
}

func (s *Scheduler) client(cluster string) (kubernetes.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs, ok := s.clients[cluster]; ok {
		return cs, nil
	}
	cs, err := kubernetes.NewForConfig(s.d.API.LocalConfig(cluster, schedulerUser))
	if err != nil {
		return nil, err
	}
	s.clients[cluster] = cs
	return cs, nil
}

func (s *Scheduler) recorder(cluster string) record.EventRecorder {
	if s.d.Recorder == nil {
		return &record.FakeRecorder{}
	}
	return s.d.Recorder(cluster, "default-scheduler")
}

func schedulerName(pod *corev1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// move asks the queue to retry the cluster's parked pods that ev could help.
func (s *Scheduler) move(cluster string, ev framework.ClusterEvent) {
	if ev.ActionType == 0 {
		return
	}
	s.queue.MoveOnEvent(cluster, func(qp *queue.QueuedPod) bool {
		fw, ok := s.profiles[schedulerName(qp.Pod)]
		return !ok || fw.MayHelp(qp.Rejectors, ev)
	})
}

func (s *Scheduler) onNode(ev watchcache.Event) {
	node := ev.Object.Object.(*corev1.Node)
	c := s.cluster(ev.Object.Cluster)
	c.mu.Lock()
	var change framework.ActionType
	if ev.Type == store.Deleted {
		c.removeNode(node.Name)
	} else {
		change = c.setNode(node)
	}
	c.mu.Unlock()
	s.move(c.id, framework.ClusterEvent{Resource: framework.EventNode, ActionType: change})
}

func (s *Scheduler) onNamespace(ev watchcache.Event) {
	ns := ev.Object.Object.(*corev1.Namespace)
	c := s.cluster(ev.Object.Cluster)
	c.mu.Lock()
	changed := false
	if ev.Type == store.Deleted {
		delete(c.nsLabels, ns.Name)
	} else {
		changed = !maps2Equal(c.nsLabels[ns.Name], ns.Labels)
		c.nsLabels[ns.Name] = ns.Labels
	}
	c.mu.Unlock()
	if changed {
		s.move(c.id, framework.ClusterEvent{Resource: framework.EventNamespace, ActionType: framework.Add | framework.UpdatePodLabel})
	}
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func (s *Scheduler) onPod(ev watchcache.Event) {
	pod := ev.Object.Object.(*corev1.Pod)
	c := s.cluster(ev.Object.Cluster)
	k := queue.Key{Cluster: c.id, Namespace: pod.Namespace, Name: pod.Name}
	if ev.Type == store.Deleted || terminal(pod) {
		if pod.Spec.NodeName == "" {
			s.queue.Delete(k)
		}
		c.mu.Lock()
		removed := c.removePod(pod.UID)
		c.clearNominated(pod.UID)
		c.mu.Unlock()
		if removed {
			s.move(c.id, framework.ClusterEvent{Resource: framework.EventPod, ActionType: framework.Delete})
		}
		return
	}
	if pod.Spec.NodeName != "" {
		s.queue.Delete(k)
		c.mu.Lock()
		change, err := c.addPod(pod)
		c.clearNominated(pod.UID)
		c.mu.Unlock()
		if err != nil {
			s.log.Warn("scheduler cannot account for a bound pod", "cluster", c.id, "pod", pod.Namespace+"/"+pod.Name, "err", err)
			return
		}
		s.move(c.id, framework.ClusterEvent{Resource: framework.EventPod, ActionType: change})
		return
	}
	if _, ok := s.profiles[schedulerName(pod)]; !ok {
		return // another scheduler's pod
	}
	if pod.DeletionTimestamp != nil {
		s.queue.Delete(k)
		return
	}
	if pod.Status.NominatedNodeName != "" {
		if pi, err := framework.NewPodInfo(pod); err == nil {
			c.mu.Lock()
			c.setNominated(pi, pod.Status.NominatedNodeName)
			c.mu.Unlock()
		}
	}
	s.queue.Add(k, pod)
}

// scheduleOne takes one pod from the queue and places it, or reports why it cannot be placed. It returns false
// once the queue is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	qp, ok := s.queue.Pop()
	if !ok {
		return false
	}
	pod := qp.Pod
	fw := s.profiles[schedulerName(pod)]
	c := s.cluster(qp.Key.Cluster)
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		s.fail(ctx, c, qp, nil, fmt.Sprintf("invalid pod: %v", err), true)
		return true
	}
	c.mu.Lock()
	res := s.schedulePod(ctx, fw, c, pi)
	if res.node != "" {
		bound := pod.DeepCopy()
		bound.Spec.NodeName = res.node
		bpi := *pi
		bpi.Pod = bound
		c.clearNominated(pod.UID)
		c.assume(&bpi, res.node)
	}
	var post *framework.PostFilterResult
	var postStatus *framework.Status
	var displaced []*corev1.Pod
	if res.node == "" && res.err == nil && len(fw.PostFilter) > 0 && res.statuses != nil {
		post, postStatus = fw.RunPostFilterPlugins(ctx, res.state, pi, res.snap, res.statuses)
		if post != nil && post.NominatedNodeName != "" {
			displaced = c.displaceNominated(post.NominatedNodeName, podPriority(pod))
			c.setNominated(pi, post.NominatedNodeName)
		}
	}
	c.mu.Unlock()
	s.clearNominations(ctx, c, displaced)
	if res.node != "" {
		s.bind(ctx, c, qp, res.node)
		return true
	}
	if res.err != nil {
		s.fail(ctx, c, qp, nil, res.err.Error(), true)
		return true
	}
	msg := res.message()
	if post != nil && post.NominatedNodeName != "" {
		msg += " preemption: nominated node " + post.NominatedNodeName + "."
	} else if postStatus != nil && postStatus.Message() != "" {
		msg += " " + postStatus.Message()
		if postStatus.Code() == framework.Error {
			s.log.Warn("preemption failed", "cluster", c.id, "pod", pod.Namespace+"/"+pod.Name, "err", postStatus.Message())
		}
	}
	nominated := ""
	if post != nil {
		nominated = post.NominatedNodeName
	}
	s.failWithNomination(ctx, c, qp, res.rejectors(), msg, false, nominated)
	return true
}

// result is one scheduling attempt's outcome.
type result struct {
	node     string
	err      error // an internal failure (plugin error)
	state    *framework.CycleState
	snap     *framework.Snapshot
	statuses framework.NodeToStatus
	all      int
	pre      *framework.Status // a PreFilter rejection
}

// message is upstream's FailedScheduling summary: "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had
// untolerated taint {...}."
func (r *result) message() string {
	if r.all == 0 {
		return "no nodes available to schedule pods"
	}
	if r.pre != nil {
		return fmt.Sprintf("0/%d nodes are available: %s.", r.all, r.pre.Message())
	}
	counts := map[string]int{}
	for _, st := range r.statuses {
		for _, reason := range st.Reasons() {
			counts[reason]++
		}
	}
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", r.all, strings.Join(parts, ", "))
}

// rejectors are the plugins that turned the pod down (the queue retries it on their events).
func (r *result) rejectors() sets.Set[string] {
	out := sets.New[string]()
	if r.pre != nil {
		out.Insert(r.pre.Plugin())
	}
	for _, st := range r.statuses {
		if st.Plugin() != "" {
			out.Insert(st.Plugin())
		}
	}
	return out
}

// numFeasibleNodesToFind is how many fitting nodes a cycle looks for before scoring (upstream's adaptive
// percentageOfNodesToScore: every node up to 100, then 50% shrinking by 1% per 125 nodes, at least 5% and 100).
func numFeasibleNodesToFind(all int, percentage int32) int {
	if all < 100 || percentage >= 100 {
		return all
	}
	p := int(percentage)
	if p <= 0 {
		p = max(50-all/125, 5)
	}
	return min(max(all*p/100, 100), all)
}

// schedulePod runs one scheduling cycle under the cluster cache's lock.
func (s *Scheduler) schedulePod(ctx context.Context, fw *framework.Framework, c *clusterCache, pi *framework.PodInfo) result {
	snap := c.snapshot()
	nodes := snap.Nodes
	state := framework.NewCycleState()
	r := result{state: state, snap: snap, all: len(nodes)}
	if len(nodes) == 0 {
		return r
	}
	if _, st := fw.RunPreFilterPlugins(ctx, state, pi, snap); !st.IsSuccess() {
		if st.Code() == framework.Error {
			r.err = st.Err()
			return r
		}
		r.pre = st
		r.statuses = framework.NodeToStatus{}
		for _, n := range nodes {
			r.statuses[n.Name()] = st
		}
		return r
	}
	// A pod preemption nominated to a node tries that node first, and takes it if it fits (upstream's
	// evaluateNominatedNode): the room was made for it there, and this spares the search of every node.
	if nom := c.nominatedNode(pi); nom != "" {
		if n, ok := snap.Get(nom); ok && fw.RunFilterPluginsWithNominatedPods(ctx, state, pi, n, c.nominated[nom]).IsSuccess() {
			r.node = nom
			return r
		}
	}
	percentage := *s.cfg.PercentageOfNodesToScore
	want := numFeasibleNodesToFind(len(nodes), percentage)
	feasible := make([]*framework.NodeInfo, want)
	statuses := make([]*framework.Status, len(nodes))
	var found atomic.Int32
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := c.next % len(nodes)
	var processed atomic.Int32
	fw.Parallel(fctx, len(nodes), func(i int) {
		if fctx.Err() != nil {
			return
		}
		idx := (start + i) % len(nodes)
		n := nodes[idx]
		st := fw.RunFilterPluginsWithNominatedPods(ctx, state, pi, n, c.nominated[n.Name()])
		processed.Add(1)
		if st.IsSuccess() {
			if k := found.Add(1); int(k) <= want {
				feasible[k-1] = n
				if int(k) == want {
					cancel()
				}
			}
			return
		}
		statuses[idx] = st
	})
	c.next = (start + int(processed.Load())) % len(nodes)
	nf := min(int(found.Load()), want)
	feasible = feasible[:nf]
	if nf == 0 {
		r.statuses = framework.NodeToStatus{}
		for i, st := range statuses {
			if st != nil {
				if st.Code() == framework.Error {
					r.err = st.Err()
					return r
				}
				r.statuses[nodes[i].Name()] = st
			}
		}
		return r
	}
	if nf == 1 {
		r.node = feasible[0].Name()
		return r
	}
	scores, st := fw.RunScorePlugins(ctx, state, pi, snap, feasible)
	if !st.IsSuccess() {
		r.err = st.Err()
		return r
	}
	r.node = selectHost(scores)
	return r
}

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// selectHost picks the highest total score, breaking ties at random (reservoir sampling).
func selectHost(scores []framework.NodeScore) string {
	best, ties := 0, 1
	for i := 1; i < len(scores); i++ {
		switch {
		case scores[i].Score > scores[best].Score:
			best, ties = i, 1
		case scores[i].Score == scores[best].Score:
			ties++
			if rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return scores[best].Name
}

// bind writes the binding in the background; the pod stays assumed on the node meanwhile.
func (s *Scheduler) bind(ctx context.Context, c *clusterCache, qp *queue.QueuedPod, node string) {
	pod := qp.Pod
	s.async(func() {
		cs, err := s.client(c.id)
		if err == nil {
			err = cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		}
		if err != nil {
			c.mu.Lock()
			c.forget(pod.UID)
			c.mu.Unlock()
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
				s.queue.Done(qp.Key) // deleted, or bound meanwhile: its watch event tells the rest
				return
			}
			s.recorder(c.id).Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
			s.queue.Unschedulable(qp, nil, true)
			return
		}
		s.Scheduled.Add(1)
		s.recorder(c.id).Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
		s.queue.Done(qp.Key)
	})
}

// async runs an API call off the scheduling loop, as upstream's scheduler makes its API calls asynchronously:
// the loop goes on to the next pod at once. At most maxBindingsInFlight run at a time; past that the caller
// waits, so it must not hold a cluster cache's lock (the calls take it when they fail). Run waits for them.
func (s *Scheduler) async(call func()) {
	s.calls.Add(1)
	s.sem <- struct{}{}
	go func() {
		defer func() { <-s.sem; s.calls.Done() }()
		call()
	}()
}

func (s *Scheduler) fail(ctx context.Context, c *clusterCache, qp *queue.QueuedPod, rejectors sets.Set[string], msg string, isError bool) {
	s.failWithNomination(ctx, c, qp, rejectors, msg, isError, "")
}

// failWithNomination reports a pod that could not be placed: a FailedScheduling event, the PodScheduled=False
// condition (and nominatedNodeName after preemption) when they change, and back to the queue.
func (s *Scheduler) failWithNomination(ctx context.Context, c *clusterCache, qp *queue.QueuedPod, rejectors sets.Set[string], msg string, isError bool, nominated string) {
	pod := qp.Pod
	s.recorder(c.id).Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	s.queue.Unschedulable(qp, rejectors, isError)
	reason := corev1.PodReasonUnschedulable
	if isError {
		reason = corev1.PodReasonSchedulerError
	}
	if cur := podCondition(pod, corev1.PodScheduled); cur != nil && cur.Status == corev1.ConditionFalse && cur.Reason == reason &&
		cur.Message == msg && (nominated == "" || pod.Status.NominatedNodeName == nominated) {
		return
	}
	cs, err := s.client(c.id)
	if err != nil {
		return
	}
	next := pod.DeepCopy()
	setPodCondition(next, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason,
		Message: msg, LastTransitionTime: metav1.NewTime(s.d.Clock.Now()), ObservedGeneration: pod.Generation})
	if nominated != "" {
		next.Status.NominatedNodeName = nominated
	}
	// At the pod's resourceVersion: if the pod changed meanwhile (bound, failed again), this is a conflict and
	// the newer state stands.
	s.async(func() {
		if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			s.log.Warn("cannot record why a pod is unschedulable", "cluster", c.id, "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	})
}

// clearNominations clears status.nominatedNodeName of pods preemption displaced; the status change brings them
// back through the queue.
func (s *Scheduler) clearNominations(ctx context.Context, c *clusterCache, pods []*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	cs, err := s.client(c.id)
	if err != nil {
		return
	}
	for _, p := range pods {
		cur, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID || cur.Status.NominatedNodeName == "" {
			continue
		}
		cur.Status.NominatedNodeName = ""
		if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			s.log.Warn("cannot clear a displaced pod's nomination", "cluster", c.id, "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	if cur := podCondition(pod, c.Type); cur != nil {
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// ClusterSource for the plugins.

// DeletePod deletes a preemption victim gracefully, marking it with the DisruptionTarget condition first. The
// calls run in the background (upstream's asynchronous preemption): the preemptor is nominated at once and waits,
// parked, for its victims' deletions, which move it back to the queue. A victim that cannot be deleted is
// logged and moves the parked pods back too, so that the preemptor looks again.
func (s *Scheduler) DeletePod(ctx context.Context, cluster string, pod *corev1.Pod) error {
	cs, err := s.client(cluster)
	if err != nil {
		return err
	}
	s.calls.Add(1) // not through async: this runs under the cluster cache's lock, and must not wait for a slot
	go func() {
		defer s.calls.Done()
		if err := s.evict(ctx, cs, cluster, pod); err != nil && ctx.Err() == nil {
			s.log.Warn("preemption: cannot delete a victim", "cluster", cluster, "pod", pod.Namespace+"/"+pod.Name, "err", err)
			s.move(cluster, framework.ClusterEvent{Resource: framework.EventPod, ActionType: framework.Delete})
		}
	}()
	return nil
}

// evict sets the victim's DisruptionTarget condition, then deletes it (with a UID precondition); a victim
// already gone is no error.
func (s *Scheduler) evict(ctx context.Context, cs kubernetes.Interface, cluster string, pod *corev1.Pod) error {
	next := pod.DeepCopy()
	setPodCondition(next, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "PreemptionByScheduler", Message: "default-scheduler: preempting to accommodate a higher priority pod",
		LastTransitionTime: metav1.NewTime(s.d.Clock.Now())})
	if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		s.recorder(cluster).Eventf(pod, corev1.EventTypeNormal, "Preempted", "Preempted by pod on node %s", pod.Spec.NodeName)
	}
	return err
}

// PodDisruptionBudgets lists a cluster's PDBs.
func (s *Scheduler) PodDisruptionBudgets(cluster string) []*policyv1.PodDisruptionBudget {
	col, err := s.collection(context.Background(), "poddisruptionbudgets")
	if err != nil {
		return nil
	}
	entries, _ := col.ListIn(cluster, "")
	out := make([]*policyv1.PodDisruptionBudget, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Object.(*policyv1.PodDisruptionBudget))
	}
	return out
}

// compile-time check.
var _ framework.ClusterSource = (*Scheduler)(nil)

// DefaultSelector is the union (all requirements together, as upstream) of the selectors of the Services,
// ReplicationControllers, ReplicaSets and StatefulSets in the pod's namespace that select it; labels.Nothing()
// when none does.
func (s *Scheduler) DefaultSelector(cluster string, pod *corev1.Pod) labels.Selector {
	sel := labels.NewSelector()
	found := false
	podLabels := labels.Set(pod.Labels)
	addSet := func(m map[string]string) {
		if len(m) == 0 {
			return
		}
		ls := labels.SelectorFromSet(m)
		if !ls.Matches(podLabels) {
			return
		}
		reqs, _ := ls.Requirements()
		sel = sel.Add(reqs...)
		found = true
	}
	addSelector := func(ls *metav1.LabelSelector) {
		if ls == nil {
			return
		}
		x, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil || x.Empty() || !x.Matches(podLabels) {
			return
		}
		reqs, _ := x.Requirements()
		sel = sel.Add(reqs...)
		found = true
	}
	for _, res := range []string{"services", "replicationcontrollers", "replicasets", "statefulsets"} {
		col, err := s.collection(context.Background(), res)
		if err != nil {
			continue
		}
		entries, _ := col.ListIn(cluster, pod.Namespace)
		for _, e := range entries {
			switch o := e.Object.(type) {
			case *corev1.Service:
				addSet(o.Spec.Selector)
			case *corev1.ReplicationController:
				addSet(o.Spec.Selector)
			case *appsv1.ReplicaSet:
				addSelector(o.Spec.Selector)
			case *appsv1.StatefulSet:
				addSelector(o.Spec.Selector)
			}
		}
	}
	if !found {
		return labels.Nothing()
	}
	return sel
}

// maxBindingsInFlight bounds the background bindings: enough for the store's group commit to batch them
// (schedperf at 5,000 nodes, end to end: 64 → 634-745 pods/s, 256 → 792-886, 1,024 → 743 on 2 cores).
const maxBindingsInFlight = 256

func secs(n int64) time.Duration { return time.Duration(n) * time.Second }
