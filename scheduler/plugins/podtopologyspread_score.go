package plugins

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// ptsScoreState is what PreScore counts for Score: per ScheduleAnyway constraint, matching pods per domain of
// the feasible nodes (hostname domains are counted in Score), and each topology's weight.
type ptsScoreState struct {
	constraints []ptsConstraint
	// ignored are feasible nodes missing a topology key (non-system constraints): scored 0.
	ignored sets.Set[string]
	counts  []map[string]*int64
	weights []float64
}

func (s *ptsScoreState) Clone() framework.StateData { return s }

// PreScore counts, for each ScheduleAnyway constraint, the matching pods per domain of the feasible nodes,
// over every node of the cluster the constraint's inclusion policies admit. Nodes missing a topology key are
// ignored (scored 0) unless the constraints are the system defaults. Skip without constraints.
func (p *podTopologySpread) PreScore(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot, nodes []*framework.NodeInfo) *framework.Status {
	if len(nodes) == 0 || len(snap.Nodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	cs, err := p.constraints(pod.Pod, snap.Cluster, corev1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("soft topology spread constraints: %w", err))
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	requireAll := len(pod.Pod.Spec.TopologySpreadConstraints) > 0 || !p.systemDefaulted
	s := ptsNewScoreState(cs, nodes, requireAll)
	required := nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	p.h.Parallel(ctx, len(snap.Nodes), func(n int) {
		node := snap.Nodes[n].Node()
		if node == nil || (requireAll && !ptsHasKeys(node.Labels, cs)) {
			return
		}
		for i := range cs {
			if !cs[i].includes(pod.Pod, node, required) {
				continue
			}
			// Domains without a feasible node do not matter; hostname domains are counted in Score.
			if c := s.counts[i][node.Labels[cs[i].key]]; c != nil {
				atomic.AddInt64(c, int64(p.countMatching(snap.Nodes[n], &cs[i], pod.Pod.Namespace)))
			}
		}
	})
	state.Write(ptsScoreKey, s)
	return nil
}

// ptsNewScoreState makes the counters for the feasible nodes' domains and the topology weights: log(domains+2),
// so that counts in a topology with few domains are not watered down by one with many.
func ptsNewScoreState(cs []ptsConstraint, nodes []*framework.NodeInfo, requireAll bool) *ptsScoreState {
	s := &ptsScoreState{constraints: cs, ignored: sets.New[string](), counts: make([]map[string]*int64, len(cs)),
		weights: make([]float64, len(cs))}
	for i := range cs {
		s.counts[i] = map[string]*int64{}
	}
	for _, ni := range nodes {
		n := ni.Node()
		if requireAll && !ptsHasKeys(n.Labels, cs) {
			s.ignored.Insert(n.Name)
			continue
		}
		for i := range cs {
			if cs[i].key == corev1.LabelHostname {
				continue
			}
			if v := n.Labels[cs[i].key]; s.counts[i][v] == nil {
				s.counts[i][v] = new(int64)
			}
		}
	}
	for i := range cs {
		size := len(s.counts[i])
		if cs[i].key == corev1.LabelHostname {
			size = len(nodes) - s.ignored.Len()
		}
		s.weights[i] = math.Log(float64(size + 2))
	}
	return s
}

// Score is, over the constraints whose key the node has, the matching pods in its domain times the topology
// weight plus maxSkew-1 (which blunts small differences); lower is better, NormalizeScore inverts it.
func (p *podTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	s, st := ptsReadScoreState(state)
	if st != nil {
		return 0, st
	}
	n := node.Node()
	if n == nil {
		return 0, framework.NewStatus(framework.Error, "node not found")
	}
	if s.ignored.Has(n.Name) {
		return 0, nil
	}
	var score float64
	for i, c := range s.constraints {
		v, ok := n.Labels[c.key]
		if !ok {
			continue
		}
		var cnt int64
		if c.key == corev1.LabelHostname {
			cnt = int64(p.countMatching(node, &s.constraints[i], pod.Pod.Namespace))
		} else if cp := s.counts[i][v]; cp != nil {
			cnt = *cp
		}
		score += float64(cnt)*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore maps a score s to MaxNodeScore*(max+min-s)/max over the nodes not ignored (ignored nodes
// get 0; all MaxNodeScore when every score is 0).
func (p *podTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, scores []framework.NodeScore) *framework.Status {
	s, st := ptsReadScoreState(state)
	if st != nil {
		return st
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if !s.ignored.Has(sc.Name) {
			lo, hi = min(lo, sc.Score), max(hi, sc.Score)
		}
	}
	for i := range scores {
		switch {
		case s.ignored.Has(scores[i].Name):
			scores[i].Score = 0
		case hi == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (hi + lo - scores[i].Score) / hi
		}
	}
	return nil
}

func ptsReadScoreState(state *framework.CycleState) (*ptsScoreState, *framework.Status) {
	d, ok := state.Read(ptsScoreKey)
	if !ok {
		return nil, framework.AsStatus(fmt.Errorf("reading %q from cycle state: not found", ptsScoreKey))
	}
	return d.(*ptsScoreState), nil
}
