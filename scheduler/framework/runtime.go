package framework

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
)

// WeightedScore is a Score plugin with its weight.
type WeightedScore struct {
	Plugin ScorePlugin
	Weight int64
}

// Framework runs one profile's plugins at each extension point.
type Framework struct {
	ProfileName string
	PreFilter   []PreFilterPlugin
	Filter      []FilterPlugin
	PostFilter  []PostFilterPlugin
	PreScore    []PreScorePlugin
	Score       []WeightedScore
	// Parallelism is how many goroutines filter and score nodes.
	Parallelism int
	// Cluster reaches the scheduler's cluster state beyond nodes (set by the scheduler).
	Cluster ClusterSource
	events  map[string][]ClusterEvent
}

// ClusterSource is what plugins need from the scheduler beyond nodes and pods: deleting preemption victims,
// PDBs, and the selectors of the objects that own or select a pod (for default topology spreading).
type ClusterSource interface {
	DeletePod(ctx context.Context, cluster string, pod *corev1.Pod) error
	PodDisruptionBudgets(cluster string) []*policyv1.PodDisruptionBudget
	DefaultSelector(cluster string, pod *corev1.Pod) labels.Selector
}

var _ Handle = (*Framework)(nil)

// RegisterEvents records which cluster events each plugin names (plugins implementing EnqueueExtensions).
func (f *Framework) RegisterEvents(plugins []Plugin) {
	f.events = map[string][]ClusterEvent{}
	for _, p := range plugins {
		if e, ok := p.(EnqueueExtensions); ok {
			f.events[p.Name()] = e.EventsToRegister()
		}
	}
}

// MayHelp tells whether ev could make a pod rejected by the named plugins schedulable. A rejection by a plugin
// that registers no events (or by no plugin at all) is retried on any event.
func (f *Framework) MayHelp(rejectors sets.Set[string], ev ClusterEvent) bool {
	if rejectors.Len() == 0 {
		return true
	}
	for name := range rejectors {
		evs, ok := f.events[name]
		if !ok {
			return true
		}
		for _, e := range evs {
			if e.Match(ev) {
				return true
			}
		}
	}
	return false
}

// RunPreFilterPlugins runs the PreFilter plugins; it returns the plugins that asked to be skipped. As upstream,
// an UnschedulableAndUnresolvable or Error status stops at once, while an Unschedulable one lets the remaining
// PreFilters run (preemption's PostFilter needs their state) and is returned at the end (the last one, with its
// plugin).
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) (skip sets.Set[string], st *Status) {
	skip = sets.New[string]()
	for _, p := range f.PreFilter {
		s := p.PreFilter(ctx, state, pod, snap)
		switch {
		case s.IsSuccess():
		case s.IsSkip():
			skip.Insert(p.Name())
		case s.Code() == Unschedulable:
			st = s.WithPlugin(p.Name())
		default:
			return skip, s.WithPlugin(p.Name())
		}
	}
	state.filters, state.filtersSet, state.extensions = nil, true, nil
	for _, p := range f.Filter {
		if !skip.Has(p.Name()) {
			state.filters = append(state.filters, p)
		}
	}
	for _, p := range f.PreFilter {
		if e, ok := p.(PreFilterExtensions); ok && !skip.Has(p.Name()) {
			state.extensions = append(state.extensions, namedExtensions{p.Name(), e})
		}
	}
	return skip, st
}

// RunFilterPlugins runs the Filter plugins on one node; the first rejection wins.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	filters := f.Filter
	if state.filtersSet {
		filters = state.filters
	}
	for _, p := range filters {
		if s := p.Filter(ctx, state, pod, node); !s.IsSuccess() {
			return s.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunFilterPluginsWithNominatedPods runs the filters on node as it is and, when pods with at least the pod's
// priority are nominated to it, once more as if they were already there (so the room preemption freed is not
// taken by someone less important). The pod must pass both, as upstream: a nominee may never arrive, and some
// filters (inter-pod affinity) may pass only with the nominees. Upstream runs the pass with the nominees first;
// the outcome is the same either way, and the plain pass first spares the copy of the node and the cycle state
// that the other needs wherever the node rejects the pod anyway (on full nodes, while preemption is busy, every
// node).
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo, nominated []Nominee) *Status {
	if st := f.RunFilterPlugins(ctx, state, pod, node); !st.IsSuccess() || len(nominated) == 0 {
		return st
	}
	prio, self := podPriority(pod), pod.uidKey()
	var with *NodeInfo
	var withState *CycleState
	for i := range nominated {
		np := &nominated[i]
		if np.Priority < prio || np.is(pod, self) {
			continue
		}
		if with == nil {
			with, withState = node.Clone(), state
			if !state.filtersSet || len(state.extensions) > 0 {
				withState = state.Clone() // else no extension changes it: the filters only read it
			}
		}
		with.AddPod(np.Info)
		if st := f.RunPreFilterExtensionAddPod(ctx, withState, pod, np.Info, with); !st.IsSuccess() {
			return st
		}
	}
	if with == nil {
		return nil
	}
	return f.RunFilterPlugins(ctx, withState, pod, with)
}

func podPriority(p *PodInfo) int32 {
	if p.Pod.Spec.Priority != nil {
		return *p.Pod.Spec.Priority
	}
	return 0
}

// RunPreFilterExtensionAddPod tells the PreFilter plugins that add runs on node (preemption's what-if).
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, pod *PodInfo, add *PodInfo, node *NodeInfo) *Status {
	for _, e := range f.extensionsIn(state) {
		if s := e.AddPod(ctx, state, pod, add, node); !s.IsSuccess() {
			return s.WithPlugin(e.name)
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod tells the PreFilter plugins that remove no longer runs on node.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, pod *PodInfo, remove *PodInfo, node *NodeInfo) *Status {
	for _, e := range f.extensionsIn(state) {
		if s := e.RemovePod(ctx, state, pod, remove, node); !s.IsSuccess() {
			return s.WithPlugin(e.name)
		}
	}
	return nil
}

// extensionsIn are the PreFilterExtensions the cycle of state runs: those chosen after PreFilter, else every
// one (a state PreFilter has not run on).
func (f *Framework) extensionsIn(state *CycleState) []namedExtensions {
	if state.filtersSet {
		return state.extensions
	}
	var out []namedExtensions
	for _, p := range f.PreFilter {
		if e, ok := p.(PreFilterExtensions); ok {
			out = append(out, namedExtensions{p.Name(), e})
		}
	}
	return out
}

// RunPostFilterPlugins runs the PostFilter plugins until one finds a way.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, filtered NodeToStatus) (*PostFilterResult, *Status) {
	var last *Status = NewStatus(Unschedulable)
	for _, p := range f.PostFilter {
		r, s := p.PostFilter(ctx, state, pod, snap, filtered)
		if s.IsSuccess() {
			return r, nil
		}
		if s.Code() == Error {
			return nil, s.WithPlugin(p.Name())
		}
		last = s.WithPlugin(p.Name())
	}
	return nil, last
}

// RunScorePlugins runs PreScore, then Score on every node in parallel, normalizes, weights and sums.
func (f *Framework) RunScorePlugins(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, nodes []*NodeInfo) ([]NodeScore, *Status) {
	skip := sets.New[string]()
	for _, p := range f.PreScore {
		s := p.PreScore(ctx, state, pod, snap, nodes)
		switch {
		case s.IsSkip():
			skip.Insert(p.Name())
		case !s.IsSuccess():
			return nil, s.WithPlugin(p.Name())
		}
	}
	active := make([]WeightedScore, 0, len(f.Score))
	for _, ws := range f.Score {
		if !skip.Has(ws.Plugin.Name()) {
			active = append(active, ws)
		}
	}
	per := make([][]NodeScore, len(active))
	for i := range active {
		per[i] = make([]NodeScore, len(nodes))
	}
	var failed atomic.Pointer[Status]
	f.parallel(ctx, len(nodes), func(j int) {
		for i, ws := range active {
			sc, s := ws.Plugin.Score(ctx, state, pod, nodes[j])
			if !s.IsSuccess() {
				failed.Store(s.WithPlugin(ws.Plugin.Name()))
				return
			}
			per[i][j] = NodeScore{Name: nodes[j].Name(), Score: sc}
		}
	})
	if s := failed.Load(); s != nil {
		return nil, s
	}
	total := make([]NodeScore, len(nodes))
	for j := range nodes {
		total[j].Name = nodes[j].Name()
	}
	for i, ws := range active {
		if n, ok := ws.Plugin.(ScoreNormalizer); ok {
			if s := n.NormalizeScore(ctx, state, pod, per[i]); !s.IsSuccess() {
				return nil, s.WithPlugin(ws.Plugin.Name())
			}
		}
		for j := range per[i] {
			sc := per[i][j].Score
			if sc < 0 || sc > MaxNodeScore {
				return nil, NewStatus(Error, fmt.Sprintf("plugin %s scored node %s %d, outside 0..%d", ws.Plugin.Name(), per[i][j].Name, sc, MaxNodeScore))
			}
			total[j].Score += sc * ws.Weight
		}
	}
	return total, nil
}

// parallel runs fn(0..n-1) on Parallelism goroutines in chunks.
func (f *Framework) parallel(ctx context.Context, n int, fn func(int)) {
	p := max(f.Parallelism, 1)
	if p == 1 || n < 64 {
		for i := range n {
			fn(i)
		}
		return
	}
	workqueue.ParallelizeUntil(ctx, p, n, fn, workqueue.WithChunkSize(max(n/(p*4), 1)))
}

// Parallel exposes the framework's parallel loop to the scheduler.
func (f *Framework) Parallel(ctx context.Context, n int, fn func(int)) { f.parallel(ctx, n, fn) }

// DeletePod deletes a preemption victim.
func (f *Framework) DeletePod(ctx context.Context, cluster string, pod *corev1.Pod) error {
	if f.Cluster == nil {
		return fmt.Errorf("framework: no cluster source")
	}
	return f.Cluster.DeletePod(ctx, cluster, pod)
}

// PodDisruptionBudgets lists a cluster's PDBs.
func (f *Framework) PodDisruptionBudgets(cluster string) []*policyv1.PodDisruptionBudget {
	if f.Cluster == nil {
		return nil
	}
	return f.Cluster.PodDisruptionBudgets(cluster)
}

// DefaultSelector is the union of the selectors of the Services, ReplicaSets, StatefulSets and
// ReplicationControllers that select pod (labels.Nothing() when none).
func (f *Framework) DefaultSelector(cluster string, pod *corev1.Pod) labels.Selector {
	if f.Cluster == nil {
		return labels.Nothing()
	}
	return f.Cluster.DefaultSelector(cluster, pod)
}
