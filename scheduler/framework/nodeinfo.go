package framework

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// NodeInfo is a node with the pods placed on it (bound or assumed) and their sums.
type NodeInfo struct {
	node *corev1.Node
	Pods []*PodInfo
	// PodsWithAffinity have any pod (anti-)affinity term; PodsWithRequiredAntiAffinity a required
	// anti-affinity term (the ones an incoming pod must respect).
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	UsedPorts                    HostPorts
	Requested                    Resource
	NonZeroRequested             Resource
	Allocatable                  Resource
	// Generation grows with every change (the scheduler's snapshot uses it). Generations come from one
	// process-wide counter, as upstream's: two different states of any NodeInfos (a clone changed apart from its
	// original included) never share one, so (name, Generation) names a node's pods exactly.
	Generation int64
	// PodSetGeneration changes when the node's pods change in a way a pod selector can see: a pod added or
	// removed, or one whose namespace, labels or deletion mark changed. A status update keeps it, so what is
	// computed from the pods' identities alone (topology spread counts) can be cached by (name,
	// PodSetGeneration). Drawn from the same counter as Generation.
	PodSetGeneration int64
}

// NewNodeInfo makes an empty NodeInfo for node (which may be nil while only pods are known).
func NewNodeInfo(node *corev1.Node) *NodeInfo {
	n := &NodeInfo{}
	if node != nil {
		n.SetNode(node)
	}
	return n
}

// Node is the node (nil if only its pods are known so far).
func (n *NodeInfo) Node() *corev1.Node { return n.node }

// Name is the node's name ("" without a node).
func (n *NodeInfo) Name() string {
	if n.node == nil {
		return ""
	}
	return n.node.Name
}

var generations atomic.Int64

func nextGeneration() int64 { return generations.Add(1) }

// SetNode sets or replaces the node.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.node = node
	n.Allocatable = NewResource(node.Status.Allocatable)
	if _, ok := node.Status.Allocatable[corev1.ResourcePods]; !ok {
		n.Allocatable.AllowedPodNumber = DefaultMaxPods
	}
	n.Generation = nextGeneration()
}

// AddPod places a pod on the node.
func (n *NodeInfo) AddPod(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if pi.HasAffinity() {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if len(pi.RequiredAntiAffinityTerms) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.Requested.plus(&pi.Requests, 1)
	n.NonZeroRequested.plus(&pi.NonZero, 1)
	if len(pi.HostPorts) > 0 {
		if n.UsedPorts == nil {
			n.UsedPorts = HostPorts{}
		}
		n.UsedPorts.add(pi.HostPorts, 1)
	}
	n.Generation = nextGeneration()
	n.PodSetGeneration = n.Generation
}

// UpdatePod replaces a pod on the node with a newer state of itself (same UID). PodSetGeneration stays
// unless the newer state differs in namespace, labels or deletion mark.
func (n *NodeInfo) UpdatePod(pi *PodInfo) error {
	i := indexOf(n.Pods, pi.Pod.UID)
	if i < 0 {
		return fmt.Errorf("pod %s is not on node %s", pi.Pod.UID, n.Name())
	}
	old := n.Pods[i].Pod
	same := old.Namespace == pi.Pod.Namespace && (old.DeletionTimestamp == nil) == (pi.Pod.DeletionTimestamp == nil) &&
		labels.Equals(old.Labels, pi.Pod.Labels)
	setGen := n.PodSetGeneration
	_ = n.RemovePod(pi.Pod.UID)
	n.AddPod(pi)
	if same {
		n.PodSetGeneration = setGen
	}
	return nil
}

// RemovePod takes a pod (by UID) off the node.
func (n *NodeInfo) RemovePod(uid types.UID) error {
	i := indexOf(n.Pods, uid)
	if i < 0 {
		return fmt.Errorf("pod %s is not on node %s", uid, n.Name())
	}
	pi := n.Pods[i]
	n.Pods = removeAt(n.Pods, i)
	if j := indexOf(n.PodsWithAffinity, uid); j >= 0 {
		n.PodsWithAffinity = removeAt(n.PodsWithAffinity, j)
	}
	if j := indexOf(n.PodsWithRequiredAntiAffinity, uid); j >= 0 {
		n.PodsWithRequiredAntiAffinity = removeAt(n.PodsWithRequiredAntiAffinity, j)
	}
	n.Requested.plus(&pi.Requests, -1)
	n.NonZeroRequested.plus(&pi.NonZero, -1)
	n.UsedPorts.add(pi.HostPorts, -1)
	n.Generation = nextGeneration()
	n.PodSetGeneration = n.Generation
	return nil
}

// Clone copies the NodeInfo (the pods themselves are shared, read-only).
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{node: n.node, Pods: append([]*PodInfo(nil), n.Pods...),
		PodsWithAffinity:             append([]*PodInfo(nil), n.PodsWithAffinity...),
		PodsWithRequiredAntiAffinity: append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...),
		UsedPorts:                    n.UsedPorts.clone(), Requested: n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(), Allocatable: n.Allocatable.Clone(), Generation: n.Generation,
		PodSetGeneration: n.PodSetGeneration}
	return c
}

func indexOf(pods []*PodInfo, uid types.UID) int {
	for i, p := range pods {
		if p.Pod.UID == uid {
			return i
		}
	}
	return -1
}

// removeAt removes element i without keeping order (swap with the last).
func removeAt(pods []*PodInfo, i int) []*PodInfo {
	last := len(pods) - 1
	pods[i] = pods[last]
	pods[last] = nil
	return pods[:last]
}

// HostPort is a host port in use: IP (0.0.0.0 for all), protocol and port.
type HostPort struct {
	IP       string
	Protocol corev1.Protocol
	Port     int32
}

// HostPorts counts the host ports the node's pods use.
type HostPorts map[HostPort]int

func (h HostPorts) add(ports []HostPort, sign int) {
	for _, p := range ports {
		h[p] += sign
		if h[p] <= 0 {
			delete(h, p)
		}
	}
}

func (h HostPorts) clone() HostPorts {
	if len(h) == 0 {
		return nil // AddPod makes the map when a pod with host ports comes
	}
	c := make(HostPorts, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

// Conflicts tells whether p clashes with a port in use: the same protocol and port on the same IP, or with
// either side bound to every address (0.0.0.0).
func (h HostPorts) Conflicts(p HostPort) bool {
	if len(h) == 0 {
		return false
	}
	if p.IP == anyIP {
		for used := range h {
			if used.Protocol == p.Protocol && used.Port == p.Port {
				return true
			}
		}
		return false
	}
	if h[p] > 0 {
		return true
	}
	return h[HostPort{IP: anyIP, Protocol: p.Protocol, Port: p.Port}] > 0
}

const anyIP = "0.0.0.0"

// PodHostPorts lists the host ports a pod holds while it runs: its containers' and its restartable (sidecar)
// init containers' (a regular init container has exited before the containers start), as upstream.
func PodHostPorts(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := HostPort{IP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
			if hp.IP == "" {
				hp.IP = anyIP
			}
			if hp.Protocol == "" {
				hp.Protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// Nominee is a pod nominated to a node by preemption. What the filters' pass with nominees checks first on
// every node — the nominee's priority and UID — is kept in the list itself: at thousands of nodes a cycle,
// reading the nominees' own scattered pods was most of that pass's cost.
type Nominee struct {
	UID      types.UID
	Priority int32
	Info     *PodInfo
	uidHash  uint64
}

// NewNominee is pi as a Nominee.
func NewNominee(pi *PodInfo) Nominee {
	return Nominee{UID: pi.Pod.UID, Priority: podPriority(pi), Info: pi, uidHash: pi.uidKey()}
}

// is reports whether the nominee is pod (comparing UIDs only when their hashes agree).
func (n *Nominee) is(pod *PodInfo, podHash uint64) bool {
	return n.uidHash == podHash && n.UID == pod.Pod.UID
}

// Snapshot is the scheduler's view of one cluster during a scheduling cycle.
type Snapshot struct {
	Cluster string
	// Nodes are the cluster's nodes (with a Node object), in a stable order.
	Nodes  []*NodeInfo
	byName map[string]*NodeInfo
	// NamespaceLabels gives the labels of a namespace (for affinity namespaceSelectors); nil: none known.
	NamespaceLabels func(namespace string) labels.Set
	// Nominated gives the pending pods preemption nominated to a node (valid during the cycle); nil: none.
	Nominated func(node string) []Nominee
}

// NominatedPods is the pods nominated to a node.
func (s *Snapshot) NominatedPods(node string) []Nominee {
	if s == nil || s.Nominated == nil {
		return nil
	}
	return s.Nominated(node)
}

// NewSnapshot indexes nodes by name.
func NewSnapshot(cluster string, nodes []*NodeInfo, nsLabels func(string) labels.Set) *Snapshot {
	s := &Snapshot{Cluster: cluster, Nodes: nodes, byName: make(map[string]*NodeInfo, len(nodes)), NamespaceLabels: nsLabels}
	for _, n := range nodes {
		s.byName[n.Name()] = n
	}
	return s
}

// Get is the NodeInfo of a node by name.
func (s *Snapshot) Get(name string) (*NodeInfo, bool) {
	n, ok := s.byName[name]
	return n, ok
}

// NSLabels is the labels of a namespace.
func (s *Snapshot) NSLabels(ns string) labels.Set {
	if s.NamespaceLabels == nil {
		return nil
	}
	return s.NamespaceLabels(ns)
}
