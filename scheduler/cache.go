package scheduler

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// clusterCache is the scheduler's state of one cluster: its nodes with the pods placed on them (bound, or
// assumed while their binding is in flight), the pods nominated to nodes by preemption, and namespace labels.
// A scheduling cycle holds mu from filtering to assuming, so it sees one consistent state; watch events wait.
type clusterCache struct {
	id    string
	mu    sync.Mutex
	nodes map[string]*framework.NodeInfo
	// order is the nodes that have a Node object, sorted by name, rebuilt when nodes come and go.
	order []*framework.NodeInfo
	dirty bool
	// snap is the snapshot over order, rebuilt with it.
	snap *framework.Snapshot
	pods map[types.UID]*cachedPod
	// nominated are pending pods preemption made room for, by node; nominatedTo is each one's node.
	nominated   map[string][]framework.Nominee
	nominatedTo map[types.UID]string
	nsLabels    map[string]labels.Set
	// next is where the next cycle starts looking (round robin over nodes, as upstream).
	next int
	// stale marks entries not seen since the last Reset of their collection.
	staleNodes map[string]bool
	stalePods  map[types.UID]bool
}

type cachedPod struct {
	info    *framework.PodInfo
	node    string
	assumed bool
}

func newClusterCache(id string) *clusterCache {
	return &clusterCache{id: id, nodes: map[string]*framework.NodeInfo{}, pods: map[types.UID]*cachedPod{},
		nominated: map[string][]framework.Nominee{}, nominatedTo: map[types.UID]string{}, nsLabels: map[string]labels.Set{}}
}

// nodeInfo is the NodeInfo of a node, made on demand (pods can be seen before their node).
func (c *clusterCache) nodeInfo(name string) *framework.NodeInfo {
	n, ok := c.nodes[name]
	if !ok {
		n = framework.NewNodeInfo(nil)
		c.nodes[name] = n
	}
	return n
}

// setNode records a node's new state and tells what changed about it.
func (c *clusterCache) setNode(node *corev1.Node) framework.ActionType {
	if c.staleNodes != nil {
		delete(c.staleNodes, node.Name)
	}
	n := c.nodeInfo(node.Name)
	old := n.Node()
	n.SetNode(node)
	if old == nil {
		c.dirty = true
		return framework.Add
	}
	var change framework.ActionType
	if !equalResources(old.Status.Allocatable, node.Status.Allocatable) {
		change |= framework.UpdateNodeAllocatable
	}
	if !labels.Equals(old.Labels, node.Labels) {
		change |= framework.UpdateNodeLabel
	}
	if !slices.EqualFunc(old.Spec.Taints, node.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) ||
		old.Spec.Unschedulable != node.Spec.Unschedulable {
		change |= framework.UpdateNodeTaint
	}
	if !slices.EqualFunc(old.Status.Conditions, node.Status.Conditions, func(a, b corev1.NodeCondition) bool { return a.Type == b.Type && a.Status == b.Status }) {
		change |= framework.UpdateNodeCondition
	}
	return change
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func (c *clusterCache) removeNode(name string) {
	n, ok := c.nodes[name]
	if !ok {
		return
	}
	if len(n.Pods) == 0 {
		delete(c.nodes, name)
	} else {
		// Its pods are still there (they will be deleted or rebound); keep them without the node.
		fresh := framework.NewNodeInfo(nil)
		for _, p := range n.Pods {
			fresh.AddPod(p)
		}
		c.nodes[name] = fresh
	}
	c.dirty = true
}

// addPod places a bound pod on its node (replacing its assumed or older self) and tells what changed.
func (c *clusterCache) addPod(pod *corev1.Pod) (framework.ActionType, error) {
	if c.stalePods != nil {
		delete(c.stalePods, pod.UID)
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return 0, err
	}
	var change framework.ActionType = framework.Add
	if old, ok := c.pods[pod.UID]; ok {
		change = 0
		if !labels.Equals(old.info.Pod.Labels, pod.Labels) {
			change |= framework.UpdatePodLabel
		}
		if pi.Requests.MilliCPU < old.info.Requests.MilliCPU || pi.Requests.Memory < old.info.Requests.Memory {
			change |= framework.UpdatePodScaleDown
		}
		if old.assumed {
			change |= framework.Add // the binding is now visible to everyone
		}
		if old.node == pod.Spec.NodeName {
			c.pods[pod.UID] = &cachedPod{info: pi, node: pod.Spec.NodeName}
			return change, c.nodeInfo(old.node).UpdatePod(pi)
		}
		_ = c.nodeInfo(old.node).RemovePod(pod.UID)
	}
	c.pods[pod.UID] = &cachedPod{info: pi, node: pod.Spec.NodeName}
	c.nodeInfo(pod.Spec.NodeName).AddPod(pi)
	return change, nil
}

func (c *clusterCache) removePod(uid types.UID) bool {
	p, ok := c.pods[uid]
	if !ok {
		return false
	}
	delete(c.pods, uid)
	n := c.nodeInfo(p.node)
	_ = n.RemovePod(uid)
	if n.Node() == nil && len(n.Pods) == 0 {
		delete(c.nodes, p.node)
	}
	return true
}

// assume places a pod on a node before its binding is stored.
func (c *clusterCache) assume(pi *framework.PodInfo, node string) {
	c.pods[pi.Pod.UID] = &cachedPod{info: pi, node: node, assumed: true}
	c.nodeInfo(node).AddPod(pi)
}

// forget undoes assume after a failed binding (unless the watch already showed the pod bound).
func (c *clusterCache) forget(uid types.UID) {
	if p, ok := c.pods[uid]; ok && p.assumed {
		c.removePod(uid)
	}
}

// setNominated records (node != "") or clears a pending pod's nomination.
func (c *clusterCache) setNominated(pi *framework.PodInfo, node string) {
	c.clearNominated(pi.Pod.UID)
	if node != "" {
		c.nominated[node] = append(c.nominated[node], framework.NewNominee(pi))
		c.nominatedTo[pi.Pod.UID] = node
	}
}

// nominatedNode is the node preemption nominated the pod to: the one this scheduler recorded, else the pod's
// status.nominatedNodeName (set by a previous leader, or not yet seen back from the API).
func (c *clusterCache) nominatedNode(pi *framework.PodInfo) string {
	if n, ok := c.nominatedTo[pi.Pod.UID]; ok {
		return n
	}
	return pi.Pod.Status.NominatedNodeName
}

// clearNominated forgets a pod's nomination, if it has one.
func (c *clusterCache) clearNominated(uid types.UID) {
	n, ok := c.nominatedTo[uid]
	if !ok {
		return
	}
	delete(c.nominatedTo, uid)
	list := c.nominated[n]
	if i := slices.IndexFunc(list, func(p framework.Nominee) bool { return p.UID == uid }); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(c.nominated, n)
	} else {
		c.nominated[n] = list
	}
}

// displaceNominated removes, and returns, the pods nominated to node with a lower priority than priority: the
// room preemption just made there is for the new nominee, so they must look again (upstream's prepareCandidate).
func (c *clusterCache) displaceNominated(node string, priority int32) []*corev1.Pod {
	var out []*corev1.Pod
	keep := c.nominated[node][:0]
	for _, p := range c.nominated[node] {
		if p.Priority < priority {
			out = append(out, p.Info.Pod)
			delete(c.nominatedTo, p.UID)
		} else {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		delete(c.nominated, node)
	} else {
		c.nominated[node] = keep
	}
	return out
}

// snapshot is the cluster's nodes for a cycle (only valid while c.mu is held).
func (c *clusterCache) snapshot() *framework.Snapshot {
	if c.dirty || c.snap == nil {
		c.snap = framework.NewSnapshot(c.id, c.list(), c.namespaceLabels)
		c.snap.Nominated = func(node string) []framework.Nominee { return c.nominated[node] } // read under c.mu
	}
	return c.snap
}

// list is the nodes with a Node object, by name.
func (c *clusterCache) list() []*framework.NodeInfo {
	if c.dirty {
		c.order = nil // a fresh slice: the last snapshot keeps the old one
		for _, n := range c.nodes {
			if n.Node() != nil {
				c.order = append(c.order, n)
			}
		}
		slices.SortFunc(c.order, func(a, b *framework.NodeInfo) int { return strings.Compare(a.Name(), b.Name()) })
		c.dirty = false
	}
	return c.order
}

func (c *clusterCache) namespaceLabels(ns string) labels.Set { return c.nsLabels[ns] }

func (c *clusterCache) resetPods() {
	c.stalePods = map[types.UID]bool{}
	for uid, p := range c.pods {
		if !p.assumed {
			c.stalePods[uid] = true
		}
	}
}

func (c *clusterCache) dropStalePods() {
	for uid := range c.stalePods {
		c.removePod(uid)
	}
	c.stalePods = nil
}

func (c *clusterCache) resetNodes() {
	c.staleNodes = map[string]bool{}
	for name, n := range c.nodes {
		if n.Node() != nil {
			c.staleNodes[name] = true
		}
	}
}

func (c *clusterCache) dropStaleNodes() {
	for name := range c.staleNodes {
		c.removeNode(name)
	}
	c.staleNodes = nil
}
