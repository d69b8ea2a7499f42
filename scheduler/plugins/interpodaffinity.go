package plugins

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// InterPodAffinity: required pod affinity and anti-affinity as a filter, in both directions (the incoming pod's
// terms against the pods in place, and the required anti-affinity of the pods in place against the incoming
// pod); preferred terms, both ways, plus the required affinity of pods in place weighted by
// hardPodAffinityWeight, as a score. Terms are counted per topology pair (key, value of the node label) once in
// PreFilter / PreScore so that Filter and Score are lookups.
const InterPodAffinityName = "InterPodAffinity"

// Reasons as upstream reports them.
const (
	ipaReasonAffinity     = "node(s) didn't match pod affinity rules"
	ipaReasonAntiAffinity = "node(s) didn't match pod anti-affinity rules"
	ipaReasonExistingAnti = "node(s) didn't satisfy existing pods anti-affinity rules"

	ipaFilterKey = "PreFilter" + InterPodAffinityName
	ipaScoreKey  = "PreScore" + InterPodAffinityName
)

type interPodAffinity struct {
	h framework.Handle
	// hardWeight scores an existing pod's required affinity term the incoming pod matches.
	hardWeight int32
	// ignoreExistingPreferred skips scoring (existing pods' preferred terms) when the incoming pod has no
	// preferred terms of its own.
	ignoreExistingPreferred bool
}

var (
	_ framework.PreFilterPlugin     = (*interPodAffinity)(nil)
	_ framework.PreFilterExtensions = (*interPodAffinity)(nil)
	_ framework.FilterPlugin        = (*interPodAffinity)(nil)
	_ framework.PreScorePlugin      = (*interPodAffinity)(nil)
	_ framework.ScorePlugin         = (*interPodAffinity)(nil)
	_ framework.ScoreNormalizer     = (*interPodAffinity)(nil)
	_ framework.EnqueueExtensions   = (*interPodAffinity)(nil)
)

// newInterPodAffinity takes *configv1.InterPodAffinityArgs (nil: hardPodAffinityWeight 1).
func newInterPodAffinity(args runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, errors.New("InterPodAffinity: no framework handle")
	}
	p := &interPodAffinity{h: h, hardWeight: 1}
	if args == nil {
		return p, nil
	}
	a, ok := args.(*configv1.InterPodAffinityArgs)
	if !ok {
		return nil, fmt.Errorf("InterPodAffinity: args are %T, want *InterPodAffinityArgs", args)
	}
	if a == nil {
		return p, nil
	}
	if a.HardPodAffinityWeight != nil {
		p.hardWeight = *a.HardPodAffinityWeight
	}
	if p.hardWeight < 0 || p.hardWeight > 100 {
		return nil, fmt.Errorf("hardPodAffinityWeight: Invalid value: %d: not in valid range [0-100]", p.hardWeight)
	}
	p.ignoreExistingPreferred = a.IgnorePreferredTermsOfExistingPods
	return p, nil
}

func (*interPodAffinity) Name() string { return InterPodAffinityName }

// EventsToRegister: a pod placed, removed or relabelled can satisfy affinity or lift anti-affinity; a node
// added or relabelled can complete a topology.
func (*interPodAffinity) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{
		{Resource: framework.EventPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeLabel},
	}
}

// ipaPair is a topology pair: a node label key and its value.
type ipaPair struct{ key, value string }

// ipaCounts counts matching pods per topology pair (zero entries are deleted).
type ipaCounts map[ipaPair]int64

func (m ipaCounts) add(p ipaPair, n int64) {
	m[p] += n
	if m[p] == 0 {
		delete(m, p)
	}
}

func (m ipaCounts) clone() ipaCounts {
	c := make(ipaCounts, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// ipaPairCount is one increment, gathered per node in parallel before being merged.
type ipaPairCount struct {
	pair ipaPair
	n    int64
}

// ipaFilterState is what PreFilter counts for Filter; AddPod/RemovePod keep it current during preemption.
type ipaFilterState struct {
	pod *framework.PodInfo
	// nsLabels are the labels of the incoming pod's namespace; nsOf looks up another namespace's.
	nsLabels labels.Set
	nsOf     func(string) labels.Set
	// existingAnti: pods in place whose required anti-affinity terms match the incoming pod, per pair.
	existingAnti ipaCounts
	// affinity: pods in place matching ALL of the incoming pod's required affinity terms, per term's pair.
	affinity ipaCounts
	// anti: pods in place matching each of the incoming pod's required anti-affinity terms, per pair.
	anti ipaCounts
}

func (s *ipaFilterState) Clone() framework.StateData {
	c := *s
	c.existingAnti, c.affinity, c.anti = s.existingAnti.clone(), s.affinity.clone(), s.anti.clone()
	return &c
}

// ipaTermMatches is AffinityTerm.Matches, looking the pod's namespace labels up only when the term's
// namespaceSelector decides.
func ipaTermMatches(t *framework.AffinityTerm, pod *corev1.Pod, nsOf func(string) labels.Set) bool {
	if t.NamespaceSelector == nil || t.Namespaces.Has(pod.Namespace) {
		return t.Matches(pod, nil)
	}
	return t.Matches(pod, nsOf(pod.Namespace))
}

func ipaMatchesAll(terms []framework.AffinityTerm, pod *corev1.Pod, nsOf func(string) labels.Set) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !ipaTermMatches(&terms[i], pod, nsOf) {
			return false
		}
	}
	return true
}

// ipaExistingAntiPairs appends a pair for each of existing's required anti-affinity terms that matches the pod.
func ipaExistingAntiPairs(out []ipaPairCount, existing *framework.PodInfo, pod *corev1.Pod, nsLabels labels.Set, node *corev1.Node, n int64) []ipaPairCount {
	for i := range existing.RequiredAntiAffinityTerms {
		t := &existing.RequiredAntiAffinityTerms[i]
		if v, ok := node.Labels[t.TopologyKey]; ok && t.Matches(pod, nsLabels) {
			out = append(out, ipaPairCount{ipaPair{t.TopologyKey, v}, n})
		}
	}
	return out
}

// incomingPairs appends the pairs other (on node) adds to the incoming pod's affinity and anti-affinity counts.
func (s *ipaFilterState) incomingPairs(aff, anti []ipaPairCount, other *corev1.Pod, node *corev1.Node, n int64) ([]ipaPairCount, []ipaPairCount) {
	if ipaMatchesAll(s.pod.RequiredAffinityTerms, other, s.nsOf) {
		for i := range s.pod.RequiredAffinityTerms {
			if v, ok := node.Labels[s.pod.RequiredAffinityTerms[i].TopologyKey]; ok {
				aff = append(aff, ipaPairCount{ipaPair{s.pod.RequiredAffinityTerms[i].TopologyKey, v}, n})
			}
		}
	}
	for i := range s.pod.RequiredAntiAffinityTerms {
		t := &s.pod.RequiredAntiAffinityTerms[i]
		if v, ok := node.Labels[t.TopologyKey]; ok && ipaTermMatches(t, other, s.nsOf) {
			anti = append(anti, ipaPairCount{ipaPair{t.TopologyKey, v}, n})
		}
	}
	return aff, anti
}

// PreFilter counts, per topology pair, the pods in place relevant to the incoming pod's required terms and
// those whose required anti-affinity the pod would break. Skip when there is none of either.
func (p *interPodAffinity) PreFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot) *framework.Status {
	s := &ipaFilterState{pod: pod, nsLabels: snap.NSLabels(pod.Pod.Namespace), nsOf: snap.NSLabels}
	s.existingAnti = p.countExistingAnti(ctx, s, snap)
	s.affinity, s.anti = p.countIncoming(ctx, s, snap)
	if len(s.existingAnti) == 0 && len(pod.RequiredAffinityTerms) == 0 && len(pod.RequiredAntiAffinityTerms) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(ipaFilterKey, s)
	return nil
}

func (p *interPodAffinity) countExistingAnti(ctx context.Context, s *ipaFilterState, snap *framework.Snapshot) ipaCounts {
	var nodes []*framework.NodeInfo
	for _, n := range snap.Nodes {
		if len(n.PodsWithRequiredAntiAffinity) > 0 && n.Node() != nil {
			nodes = append(nodes, n)
		}
	}
	per := make([][]ipaPairCount, len(nodes))
	p.h.Parallel(ctx, len(nodes), func(i int) {
		var out []ipaPairCount
		for _, existing := range nodes[i].PodsWithRequiredAntiAffinity {
			out = ipaExistingAntiPairs(out, existing, s.pod.Pod, s.nsLabels, nodes[i].Node(), 1)
		}
		per[i] = out
	})
	m := ipaCounts{}
	for _, l := range per {
		for _, pc := range l {
			m.add(pc.pair, pc.n)
		}
	}
	return m
}

func (p *interPodAffinity) countIncoming(ctx context.Context, s *ipaFilterState, snap *framework.Snapshot) (ipaCounts, ipaCounts) {
	aff, anti := ipaCounts{}, ipaCounts{}
	if len(s.pod.RequiredAffinityTerms) == 0 && len(s.pod.RequiredAntiAffinityTerms) == 0 {
		return aff, anti
	}
	perAff, perAnti := make([][]ipaPairCount, len(snap.Nodes)), make([][]ipaPairCount, len(snap.Nodes))
	p.h.Parallel(ctx, len(snap.Nodes), func(i int) {
		node := snap.Nodes[i].Node()
		if node == nil {
			return
		}
		var a, b []ipaPairCount
		for _, existing := range snap.Nodes[i].Pods {
			a, b = s.incomingPairs(a, b, existing.Pod, node, 1)
		}
		perAff[i], perAnti[i] = a, b
	})
	for i := range perAff {
		for _, pc := range perAff[i] {
			aff.add(pc.pair, pc.n)
		}
		for _, pc := range perAnti[i] {
			anti.add(pc.pair, pc.n)
		}
	}
	return aff, anti
}

// AddPod counts add as placed on node (preemption reprieving a victim).
func (p *interPodAffinity) AddPod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, add *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return ipaUpdate(state, add, node, 1)
}

// RemovePod counts remove as gone from node (preemption trying victims).
func (p *interPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, remove *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return ipaUpdate(state, remove, node, -1)
}

// ipaUpdate applies one pod's contribution; without state (PreFilter skipped: nothing the pod cares about)
// there is nothing to keep.
func ipaUpdate(state *framework.CycleState, other *framework.PodInfo, node *framework.NodeInfo, n int64) *framework.Status {
	d, ok := state.Read(ipaFilterKey)
	if !ok || node.Node() == nil {
		return nil
	}
	s := d.(*ipaFilterState)
	for _, pc := range ipaExistingAntiPairs(nil, other, s.pod.Pod, s.nsLabels, node.Node(), n) {
		s.existingAnti.add(pc.pair, pc.n)
	}
	aff, anti := s.incomingPairs(nil, nil, other.Pod, node.Node(), n)
	for _, pc := range aff {
		s.affinity.add(pc.pair, pc.n)
	}
	for _, pc := range anti {
		s.anti.add(pc.pair, pc.n)
	}
	return nil
}

// Filter checks, in upstream's order, the pod's affinity (UnschedulableAndUnresolvable: removing pods cannot
// help), its anti-affinity, and the anti-affinity of the pods in place.
func (p *interPodAffinity) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	n := node.Node()
	if n == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	d, ok := state.Read(ipaFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("reading %q from cycle state: not found", ipaFilterKey))
	}
	s := d.(*ipaFilterState)
	switch {
	case !s.satisfiesAffinity(n):
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ipaReasonAffinity)
	case !s.satisfiesAntiAffinity(n):
		return framework.NewStatus(framework.Unschedulable, ipaReasonAntiAffinity)
	case !s.satisfiesExistingAnti(n):
		return framework.NewStatus(framework.Unschedulable, ipaReasonExistingAnti)
	}
	return nil
}

// satisfiesAffinity: every term's topology key is on the node and a matching pod is in the node's domain. The
// first pod of a group with affinity to itself may go anywhere with the keys: when no pod in the cluster
// matches and the pod matches its own terms.
func (s *ipaFilterState) satisfiesAffinity(n *corev1.Node) bool {
	found := true
	for i := range s.pod.RequiredAffinityTerms {
		k := s.pod.RequiredAffinityTerms[i].TopologyKey
		v, ok := n.Labels[k]
		if !ok {
			return false
		}
		if s.affinity[ipaPair{k, v}] <= 0 {
			found = false
		}
	}
	if found {
		return true
	}
	return len(s.affinity) == 0 && ipaMatchesAll(s.pod.RequiredAffinityTerms, s.pod.Pod, s.nsOf)
}

func (s *ipaFilterState) satisfiesAntiAffinity(n *corev1.Node) bool {
	if len(s.anti) == 0 {
		return true
	}
	for i := range s.pod.RequiredAntiAffinityTerms {
		k := s.pod.RequiredAntiAffinityTerms[i].TopologyKey
		if v, ok := n.Labels[k]; ok && s.anti[ipaPair{k, v}] > 0 {
			return false
		}
	}
	return true
}

func (s *ipaFilterState) satisfiesExistingAnti(n *corev1.Node) bool {
	if len(s.existingAnti) == 0 {
		return true
	}
	for k, v := range n.Labels {
		if s.existingAnti[ipaPair{k, v}] > 0 {
			return false
		}
	}
	return true
}
