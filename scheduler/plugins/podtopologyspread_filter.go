package plugins

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// ptsFilterState is what PreFilter counts for Filter: per DoNotSchedule constraint, the matching pods in each
// eligible domain and the two smallest counts (kept exact under AddPod/RemovePod).
type ptsFilterState struct {
	pod         *corev1.Pod
	required    nodeaffinity.RequiredNodeAffinity
	constraints []ptsConstraint
	counts      []map[string]int
	mins        []ptsMins
}

// ptsMins holds the two smallest domain counts of a constraint ([0] the minimum).
type ptsMins [2]struct {
	value string
	num   int
}

func ptsMinsOf(counts map[string]int) ptsMins {
	var m ptsMins
	m[0].num, m[1].num = math.MaxInt32, math.MaxInt32
	for v, n := range counts {
		m.offer(v, n)
	}
	return m
}

// offer considers a domain not among the two.
func (m *ptsMins) offer(v string, n int) {
	switch {
	case n < m[0].num:
		m[1] = m[0]
		m[0].value, m[0].num = v, n
	case n < m[1].num:
		m[1].value, m[1].num = v, n
	}
}

func (s *ptsFilterState) Clone() framework.StateData {
	c := *s
	c.counts = make([]map[string]int, len(s.counts))
	for i, m := range s.counts {
		c.counts[i] = make(map[string]int, len(m))
		for k, v := range m {
			c.counts[i][k] = v
		}
	}
	c.mins = append([]ptsMins(nil), s.mins...)
	return &c
}

// set changes constraint i's count for domain v, keeping the two smallest exact (upstream lets them drift
// when a tracked domain grows; here they are recomputed then).
func (s *ptsFilterState) set(i int, v string, n int) {
	old, existed := s.counts[i][v]
	s.counts[i][v] = n
	m := &s.mins[i]
	at := -1
	for j := range m {
		if m[j].num != math.MaxInt32 && m[j].value == v {
			at = j
		}
	}
	switch {
	case !existed || (at < 0 && n < old):
		m.offer(v, n)
	case at < 0:
	case n <= old:
		m[at].num = n
		if m[0].num > m[1].num {
			m[0], m[1] = m[1], m[0]
		}
	case at == 0 && n <= m[1].num:
		m[0].num = n
	default:
		*m = ptsMinsOf(s.counts[i])
	}
}

// PreFilter counts, for each DoNotSchedule constraint, the pods matching its selector in the pod's namespace
// per domain, over the nodes with every topology key that the constraint's node inclusion policies admit.
func (p *podTopologySpread) PreFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot) *framework.Status {
	cs, err := p.constraints(pod.Pod, snap.Cluster, corev1.DoNotSchedule)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("hard topology spread constraints: %w", err))
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &ptsFilterState{pod: pod.Pod, required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod), constraints: cs,
		counts: make([]map[string]int, len(cs)), mins: make([]ptsMins, len(cs))}
	// per[node*len(cs)+i] is the node's count for constraint i, -1 when the node is not one of its domains.
	per := make([]int, len(snap.Nodes)*len(cs))
	p.h.Parallel(ctx, len(snap.Nodes), func(n int) {
		row := per[n*len(cs) : (n+1)*len(cs)]
		node := snap.Nodes[n].Node()
		for i := range row {
			row[i] = -1
		}
		if node == nil || !ptsHasKeys(node.Labels, cs) {
			return
		}
		for i := range cs {
			if cs[i].includes(pod.Pod, node, s.required) {
				row[i] = p.countMatching(snap.Nodes[n], &cs[i], pod.Pod.Namespace)
			}
		}
	})
	for i := range cs {
		s.counts[i] = map[string]int{}
	}
	for n, ni := range snap.Nodes {
		for i, c := range per[n*len(cs) : (n+1)*len(cs)] {
			if c >= 0 {
				s.counts[i][ni.Node().Labels[cs[i].key]] += c
			}
		}
	}
	for i := range cs {
		s.mins[i] = ptsMinsOf(s.counts[i])
	}
	state.Write(ptsFilterKey, s)
	return nil
}

// AddPod counts add on node (preemption reprieving a victim).
func (p *podTopologySpread) AddPod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, add *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	ptsUpdate(state, add.Pod, node.Node(), 1)
	return nil
}

// RemovePod uncounts remove on node (preemption trying victims).
func (p *podTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, remove *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	ptsUpdate(state, remove.Pod, node.Node(), -1)
	return nil
}

func ptsUpdate(state *framework.CycleState, other *corev1.Pod, node *corev1.Node, delta int) {
	d, ok := state.Read(ptsFilterKey)
	if !ok || node == nil {
		return
	}
	s := d.(*ptsFilterState)
	if other.Namespace != s.pod.Namespace || !ptsHasKeys(node.Labels, s.constraints) {
		return
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		if !c.includes(s.pod, node, s.required) || !ptsMatches(other, c.selector, s.pod.Namespace) {
			continue
		}
		v := node.Labels[c.key]
		s.set(i, v, s.counts[i][v]+delta)
	}
}

// Filter: for each constraint the node must have the topology key (else UnschedulableAndUnresolvable), and
// the matching pods in its domain, plus one if the pod matches itself, minus the global minimum (0 while
// fewer than minDomains domains are eligible) must not exceed maxSkew.
func (p *podTopologySpread) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	n := node.Node()
	if n == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	d, ok := state.Read(ptsFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("reading %q from cycle state: not found", ptsFilterKey))
	}
	s := d.(*ptsFilterState)
	podLabels := labels.Set(pod.Pod.Labels)
	for i := range s.constraints {
		c := &s.constraints[i]
		v, ok := n.Labels[c.key]
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ptsReasonMissingLabel)
		}
		if s.counts[i][v]+ptsSelf(c, podLabels)-s.globalMin(i) > int(c.maxSkew) {
			return framework.NewStatus(framework.Unschedulable, ptsReasonConstraints)
		}
	}
	return nil
}

func ptsSelf(c *ptsConstraint, podLabels labels.Set) int {
	if c.selector.Matches(podLabels) {
		return 1
	}
	return 0
}

// globalMin is constraint i's smallest domain count, or 0 while there are fewer domains than minDomains.
func (s *ptsFilterState) globalMin(i int) int {
	if len(s.counts[i]) < int(s.constraints[i].minDomains) || s.mins[i][0].num == math.MaxInt32 {
		return 0
	}
	return s.mins[i][0].num
}
