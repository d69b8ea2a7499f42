package framework

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CycleState carries data from a plugin's PreFilter or PreScore to its Filter or Score within one scheduling
// cycle. Writes happen before the parallel phases and are few; reads are concurrent — every filter of every node
// reads — so they take no lock: a write replaces the whole (small) map, which readers load atomically.
type CycleState struct {
	mu   sync.Mutex // serializes writers
	data atomic.Pointer[map[string]StateData]
	// filters are the Filter plugins the cycle runs (those whose PreFilter did not ask to be skipped), set by
	// RunPreFilterPlugins before filtering starts; until then (filtersSet false) every Filter runs.
	filters    []FilterPlugin
	filtersSet bool
	// extensions are the PreFilterExtensions of the PreFilter plugins that did not ask to be skipped (set with
	// filters): when there are none, adding or removing a pod in a what-if changes nothing in the state.
	extensions []namedExtensions
}

type namedExtensions struct {
	name string
	PreFilterExtensions
}

// StateData is a plugin's per-cycle data; Clone is used when preemption explores "what if" states.
type StateData interface{ Clone() StateData }

// NewCycleState makes an empty state.
func NewCycleState() *CycleState { return &CycleState{} }

// Write stores a plugin's data.
func (c *CycleState) Write(key string, d StateData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]StateData
	if p := c.data.Load(); p != nil {
		old = *p
	}
	m := make(map[string]StateData, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = d
	c.data.Store(&m)
}

// Read loads a plugin's data.
func (c *CycleState) Read(key string) (StateData, bool) {
	p := c.data.Load()
	if p == nil {
		return nil, false
	}
	d, ok := (*p)[key]
	return d, ok
}

// Clone copies the state (each plugin's data cloned).
func (c *CycleState) Clone() *CycleState {
	out := &CycleState{filters: c.filters, filtersSet: c.filtersSet, extensions: c.extensions}
	if p := c.data.Load(); p != nil {
		m := make(map[string]StateData, len(*p))
		for k, v := range *p {
			m[k] = v.Clone()
		}
		out.data.Store(&m)
	}
	return out
}

// Plugin is any plugin.
type Plugin interface{ Name() string }

// PreFilterPlugin computes per-pod state before filtering; an Unschedulable result rejects the pod on every node,
// Skip skips the plugin's Filter.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status
}

// PreFilterExtensions update a PreFilter's state when preemption considers adding or removing a pod on a node.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, pod *PodInfo, add *PodInfo, node *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, pod *PodInfo, remove *PodInfo, node *NodeInfo) *Status
}

// FilterPlugin tells whether the pod fits one node.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
}

// PreScorePlugin computes per-pod state for scoring over the feasible nodes; Skip skips its Score.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, nodes []*NodeInfo) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// ScorePlugin ranks a feasible node.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status)
}

// ScoreNormalizer rescales a Score plugin's scores to 0..MaxNodeScore.
type ScoreNormalizer interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *PodInfo, scores []NodeScore) *Status
}

// NodeToStatus is each node's filter verdict (nodes absent passed, or were not evaluated).
type NodeToStatus map[string]*Status

// PostFilterResult is what a PostFilter plugin achieved: a node nominated for the pod once victims are gone.
type PostFilterResult struct{ NominatedNodeName string }

// PostFilterPlugin runs when no node fits (preemption).
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, filtered NodeToStatus) (*PostFilterResult, *Status)
}

// ActionType is what happened to an object (bits).
type ActionType int

const (
	Add ActionType = 1 << iota
	Delete
	UpdateNodeAllocatable
	UpdateNodeLabel
	UpdateNodeTaint
	UpdateNodeCondition
	UpdatePodLabel
	UpdatePodScaleDown // a pod's requests shrank
	Update             = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition | UpdatePodLabel | UpdatePodScaleDown
	All                = Add | Delete | Update
)

// Resource kinds cluster events are about.
const (
	EventNode      = "Node"
	EventPod       = "Pod"       // an assigned pod
	EventNamespace = "Namespace" // labels (namespaceSelector)
)

// ClusterEvent is a change in a cluster that could make rejected pods schedulable.
type ClusterEvent struct {
	Resource   string
	ActionType ActionType
}

// Match tells whether an event ev falls under a registration e.
func (e ClusterEvent) Match(ev ClusterEvent) bool {
	return e.Resource == ev.Resource && e.ActionType&ev.ActionType != 0
}

// EnqueueExtensions name the events after which a pod this plugin rejected may fit: the queue moves such pods
// back to active only on those.
type EnqueueExtensions interface {
	EventsToRegister() []ClusterEvent
}

// Handle is what plugins get from the framework: running the filters (preemption's what-if) and the
// PreFilter extensions.
type Handle interface {
	RunFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
	// RunFilterPluginsWithNominatedPods runs them counting the pods nominated to the node (Snapshot.Nominated).
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo, nominated []Nominee) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, pod *PodInfo, remove *PodInfo, node *NodeInfo) *Status
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, pod *PodInfo, add *PodInfo, node *NodeInfo) *Status
	// DeletePod deletes a preemption victim (gracefully, with a UID precondition). It may return before the
	// deletion is stored; an error is one the deletion could not even start with.
	DeletePod(ctx context.Context, cluster string, pod *corev1.Pod) error
	// PodDisruptionBudgets are a cluster's PDBs, for preemption.
	PodDisruptionBudgets(cluster string) []*policyv1.PodDisruptionBudget
	// DefaultSelector is the union of the selectors of the Services, ReplicaSets, StatefulSets and
	// ReplicationControllers that select pod (labels.Nothing() when none): PodTopologySpread's system defaults.
	DefaultSelector(cluster string, pod *corev1.Pod) labels.Selector
	// Parallel runs fn(0..n-1) on the framework's goroutines.
	Parallel(ctx context.Context, n int, fn func(int))
}
