package plugins

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// NodeAffinity: nodeSelector and required node affinity as a filter (plus the profile's addedAffinity), the
// preferred terms' weights as a score.
const NodeAffinityName = "NodeAffinity"

type nodeAffinity struct {
	added          *nodeaffinity.NodeSelector
	addedPreferred *nodeaffinity.PreferredSchedulingTerms
}

func newNodeAffinity(args runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	p := &nodeAffinity{}
	a, _ := args.(*configv1.NodeAffinityArgs)
	if a == nil || a.AddedAffinity == nil {
		return p, nil
	}
	var err error
	if r := a.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		if p.added, err = nodeaffinity.NewNodeSelector(r); err != nil {
			return nil, fmt.Errorf("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: %w", err)
		}
	}
	if pr := a.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(pr) > 0 {
		if p.addedPreferred, err = nodeaffinity.NewPreferredSchedulingTerms(pr); err != nil {
			return nil, fmt.Errorf("addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
		}
	}
	return p, nil
}

func (*nodeAffinity) Name() string { return NodeAffinityName }

type nodeAffinityState struct {
	required nodeaffinity.RequiredNodeAffinity
}

func (s *nodeAffinityState) Clone() framework.StateData { return s }

func (p *nodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ *framework.Snapshot) *framework.Status {
	a := pod.Pod.Spec.Affinity
	if p.added == nil && len(pod.Pod.Spec.NodeSelector) == 0 &&
		(a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(NodeAffinityName, &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod)})
	return nil
}

const errNodeAffinity = "node(s) didn't match Pod's node affinity/selector"

func (p *nodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	n := node.Node()
	if p.added != nil && !p.added.Match(n) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match scheduler-enforced node affinity")
	}
	// Without PreFilter's state (PreFilter disabled in the profile) the pod's terms are read here, as upstream.
	var required nodeaffinity.RequiredNodeAffinity
	if d, ok := state.Read(NodeAffinityName); ok {
		required = d.(*nodeAffinityState).required
	} else {
		required = nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	}
	if match, _ := required.Match(n); !match {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, errNodeAffinity)
	}
	return nil
}

type nodeAffinityScoreState struct {
	preferred *nodeaffinity.PreferredSchedulingTerms
}

func (s *nodeAffinityScoreState) Clone() framework.StateData { return s }

func (p *nodeAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ *framework.Snapshot, _ []*framework.NodeInfo) *framework.Status {
	preferred, err := podPreferredTerms(pod.Pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	if p.addedPreferred == nil && preferred == nil {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(NodeAffinityName+"/score", &nodeAffinityScoreState{preferred: preferred})
	return nil
}

// podPreferredTerms parses the pod's preferred node affinity terms (nil when it has none).
func podPreferredTerms(pod *corev1.Pod) (*nodeaffinity.PreferredSchedulingTerms, error) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil, nil
	}
	return nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
}

func (p *nodeAffinity) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var score int64
	if p.addedPreferred != nil {
		score += p.addedPreferred.Score(node.Node())
	}
	// Without PreScore's state (PreScore disabled in the profile) the pod's terms are read here, as upstream.
	var preferred *nodeaffinity.PreferredSchedulingTerms
	if d, ok := state.Read(NodeAffinityName + "/score"); ok {
		preferred = d.(*nodeAffinityScoreState).preferred
	} else {
		var err error
		if preferred, err = podPreferredTerms(pod.Pod); err != nil {
			return 0, framework.AsStatus(err)
		}
	}
	if preferred != nil {
		score += preferred.Score(node.Node())
	}
	return score, nil
}

func (*nodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, scores []framework.NodeScore) *framework.Status {
	normalize(scores, false)
	return nil
}

func (*nodeAffinity) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeLabel}}
}

// normalize scales scores to 0..MaxNodeScore by the highest (reverse: the highest becomes 0), as upstream's
// DefaultNormalizeScore.
func normalize(scores []framework.NodeScore, reverse bool) {
	var top int64
	for _, s := range scores {
		top = max(top, s.Score)
	}
	if top == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = framework.MaxNodeScore
			}
		}
		return
	}
	for i := range scores {
		s := framework.MaxNodeScore * scores[i].Score / top
		if reverse {
			s = framework.MaxNodeScore - s
		}
		scores[i].Score = s
	}
}

// TaintToleration: NoSchedule and NoExecute taints the pod does not tolerate rule a node out; untolerated
// PreferNoSchedule taints lower its score.
const TaintTolerationName = "TaintToleration"

type taintToleration struct{}

func newTaintToleration(runtime.Object, framework.Handle) (framework.Plugin, error) {
	return taintToleration{}, nil
}

func (taintToleration) Name() string { return TaintTolerationName }

func (taintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	tols := pod.Pod.Spec.Tolerations
	for i := range node.Node().Spec.Taints {
		t := &node.Node().Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(tols, t) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value))
		}
	}
	return nil
}

func tolerated(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tolerates(&tols[i], t) {
			return true
		}
	}
	return false
}

func (taintToleration) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var n int64
	for i := range node.Node().Spec.Taints {
		t := &node.Node().Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		// Only tolerations that could apply to PreferNoSchedule count (effect empty or PreferNoSchedule).
		ok := false
		for _, tol := range pod.Pod.Spec.Tolerations {
			if (tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule) && tolerates(&tol, t) {
				ok = true
				break
			}
		}
		if !ok {
			n++
		}
	}
	return n, nil
}

func (taintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, scores []framework.NodeScore) *framework.Status {
	normalize(scores, true)
	return nil
}

func (taintToleration) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeTaint}}
}
