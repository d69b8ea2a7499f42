package plugins

import (
	"context"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// ipaScoreState is the summed weight per topology key and value; read-only once written.
type ipaScoreState struct{ byKey map[string]map[string]int64 }

func (s *ipaScoreState) Clone() framework.StateData { return s }

// PreScore sums, per topology pair, the weights of: the pod's preferred affinity (+) and anti-affinity (-)
// terms matched by pods in place; and the terms of pods in place matching the pod: required affinity
// (+hardPodAffinityWeight), preferred affinity (+) and anti-affinity (-). All nodes count, not only the
// feasible ones. Skip when nothing contributes.
func (p *interPodAffinity) PreScore(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot, nodes []*framework.NodeInfo) *framework.Status {
	if len(nodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	hasPreferred := len(pod.PreferredAffinityTerms)+len(pod.PreferredAntiAffinityTerms) > 0
	if p.ignoreExistingPreferred && !hasPreferred {
		return framework.NewStatus(framework.Skip)
	}
	if !hasPreferred && !slices.ContainsFunc(snap.Nodes, func(n *framework.NodeInfo) bool { return len(n.PodsWithAffinity) > 0 }) {
		return framework.NewStatus(framework.Skip) // nothing to score: the common case, kept cheap
	}
	nsLabels := snap.NSLabels(pod.Pod.Namespace)
	per := make([][]ipaScoreEntry, len(snap.Nodes))
	p.h.Parallel(ctx, len(snap.Nodes), func(i int) {
		n := snap.Nodes[i].Node()
		if n == nil || len(n.Labels) == 0 {
			return
		}
		pods := snap.Nodes[i].PodsWithAffinity
		if hasPreferred {
			pods = snap.Nodes[i].Pods
		}
		var out []ipaScoreEntry
		for _, existing := range pods {
			out = p.scoreExisting(out, pod, nsLabels, existing, n, snap.NSLabels)
		}
		per[i] = out
	})
	s := &ipaScoreState{byKey: map[string]map[string]int64{}}
	for _, l := range per {
		for _, e := range l {
			m := s.byKey[e.key]
			if m == nil {
				m = map[string]int64{}
				s.byKey[e.key] = m
			}
			m[e.value] += e.weight
		}
	}
	if len(s.byKey) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(ipaScoreKey, s)
	return nil
}

type ipaScoreEntry struct {
	key, value string
	weight     int64
}

// scoreExisting appends the weights one pod in place contributes to its node's topology pairs.
func (p *interPodAffinity) scoreExisting(out []ipaScoreEntry, pod *framework.PodInfo, nsLabels labels.Set,
	existing *framework.PodInfo, n *corev1.Node, nsOf func(string) labels.Set) []ipaScoreEntry {
	add := func(t *framework.AffinityTerm, w int64) {
		if v, ok := n.Labels[t.TopologyKey]; ok {
			out = append(out, ipaScoreEntry{t.TopologyKey, v, w})
		}
	}
	for i := range pod.PreferredAffinityTerms {
		if t := &pod.PreferredAffinityTerms[i]; ipaTermMatches(&t.AffinityTerm, existing.Pod, nsOf) {
			add(&t.AffinityTerm, int64(t.Weight))
		}
	}
	for i := range pod.PreferredAntiAffinityTerms {
		if t := &pod.PreferredAntiAffinityTerms[i]; ipaTermMatches(&t.AffinityTerm, existing.Pod, nsOf) {
			add(&t.AffinityTerm, -int64(t.Weight))
		}
	}
	if p.hardWeight > 0 {
		for i := range existing.RequiredAffinityTerms {
			if t := &existing.RequiredAffinityTerms[i]; t.Matches(pod.Pod, nsLabels) {
				add(t, int64(p.hardWeight))
			}
		}
	}
	for i := range existing.PreferredAffinityTerms {
		if t := &existing.PreferredAffinityTerms[i]; t.Matches(pod.Pod, nsLabels) {
			add(&t.AffinityTerm, int64(t.Weight))
		}
	}
	for i := range existing.PreferredAntiAffinityTerms {
		if t := &existing.PreferredAntiAffinityTerms[i]; t.Matches(pod.Pod, nsLabels) {
			add(&t.AffinityTerm, -int64(t.Weight))
		}
	}
	return out
}

// Score is the summed weight of the node's topology pairs (normalized later).
func (p *interPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	s, st := ipaReadScoreState(state)
	if st != nil {
		return 0, st
	}
	n := node.Node()
	if n == nil {
		return 0, framework.NewStatus(framework.Error, "node not found")
	}
	var score int64
	for k, values := range s.byKey {
		if v, ok := n.Labels[k]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// NormalizeScore maps the scores linearly onto 0..MaxNodeScore, the lowest sum to 0 and the highest to
// MaxNodeScore (all 0 when they are equal).
func (p *interPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, scores []framework.NodeScore) *framework.Status {
	s, st := ipaReadScoreState(state)
	if st != nil {
		return st
	}
	if len(s.byKey) == 0 {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, sc := range scores {
		lo, hi = min(lo, sc.Score), max(hi, sc.Score)
	}
	diff := hi - lo
	for i := range scores {
		var f float64
		if diff > 0 {
			f = float64(framework.MaxNodeScore) * float64(scores[i].Score-lo) / float64(diff)
		}
		scores[i].Score = int64(f)
	}
	return nil
}

func ipaReadScoreState(state *framework.CycleState) (*ipaScoreState, *framework.Status) {
	d, ok := state.Read(ipaScoreKey)
	if !ok {
		return nil, framework.AsStatus(fmt.Errorf("reading %q from cycle state: not found", ipaScoreKey))
	}
	return d.(*ipaScoreState), nil
}
