package plugins

import (
	"context"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// NodeResourcesFit: the pod's requests (containers, init containers and overhead) and one more pod must fit
// the node's allocatable minus what its pods request; scoring by LeastAllocated (the default), MostAllocated
// (bin packing) or RequestedToCapacityRatio.
const NodeResourcesFitName = "NodeResourcesFit"

type nodeResourcesFit struct {
	ignored       map[string]bool
	ignoredGroups []string
	strategy      configv1.ScoringStrategyType
	resources     []configv1.ResourceSpec
	shape         []configv1.UtilizationShapePoint
}

var defaultScoredResources = []configv1.ResourceSpec{{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1}}

func newNodeResourcesFit(args runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	p := &nodeResourcesFit{ignored: map[string]bool{}, strategy: configv1.LeastAllocated, resources: defaultScoredResources}
	a, _ := args.(*configv1.NodeResourcesFitArgs)
	if a == nil {
		return p, nil
	}
	for _, r := range a.IgnoredResources {
		p.ignored[r] = true
	}
	p.ignoredGroups = a.IgnoredResourceGroups
	if s := a.ScoringStrategy; s != nil {
		if s.Type != "" {
			p.strategy = s.Type
		}
		if len(s.Resources) > 0 {
			p.resources = s.Resources
		}
		if s.RequestedToCapacityRatio != nil {
			p.shape = s.RequestedToCapacityRatio.Shape
		}
	}
	switch p.strategy {
	case configv1.LeastAllocated, configv1.MostAllocated:
	case configv1.RequestedToCapacityRatio:
		if len(p.shape) == 0 {
			return nil, fmt.Errorf("scoringStrategy.requestedToCapacityRatio.shape: Required value: a shape is needed for RequestedToCapacityRatio")
		}
	default:
		return nil, fmt.Errorf("scoringStrategy.type: Unsupported value: %q: supported values: %q, %q, %q", p.strategy,
			configv1.LeastAllocated, configv1.MostAllocated, configv1.RequestedToCapacityRatio)
	}
	return p, nil
}

func (*nodeResourcesFit) Name() string { return NodeResourcesFitName }

func (p *nodeResourcesFit) isIgnored(name corev1.ResourceName) bool {
	if p.ignored[string(name)] {
		return true
	}
	if i := strings.IndexByte(string(name), '/'); i > 0 {
		for _, g := range p.ignoredGroups {
			if string(name)[:i] == g {
				return true
			}
		}
	}
	return false
}

// insufficient lists what the node lacks for the pod; unresolvable is set when the pod would not fit even on
// the empty node (preemption cannot help).
func (p *nodeResourcesFit) insufficient(pod *framework.PodInfo, node *framework.NodeInfo) (reasons []string, unresolvable bool) {
	req, used, alloc := &pod.Requests, &node.Requested, &node.Allocatable
	check := func(name string, want, inUse, have int64) {
		if want == 0 {
			return
		}
		if want > have-inUse {
			reasons = append(reasons, "Insufficient "+name)
			if want > have {
				unresolvable = true
			}
		}
	}
	if len(node.Pods)+1 > alloc.AllowedPodNumber {
		reasons = append(reasons, "Too many pods")
		if alloc.AllowedPodNumber == 0 {
			unresolvable = true
		}
	}
	check("cpu", req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
	check("memory", req.Memory, used.Memory, alloc.Memory)
	check("ephemeral-storage", req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
	for name, want := range req.Scalar {
		if p.isIgnored(name) {
			continue
		}
		check(string(name), want, used.Scalar[name], alloc.Scalar[name])
	}
	return reasons, unresolvable
}

func (p *nodeResourcesFit) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	reasons, unresolvable := p.insufficient(pod, node)
	if len(reasons) == 0 {
		return nil
	}
	if unresolvable {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
	}
	return framework.NewStatus(framework.Unschedulable, reasons...)
}

// requestedAfter is what the node's pods would request of a resource with the pod added, and its
// allocatable; CPU and memory count request-less containers at the scoring defaults.
func requestedAfter(pod *framework.PodInfo, node *framework.NodeInfo, name corev1.ResourceName) (requested, allocatable int64) {
	switch name {
	case corev1.ResourceCPU:
		return node.NonZeroRequested.MilliCPU + pod.NonZero.MilliCPU, node.Allocatable.MilliCPU
	case corev1.ResourceMemory:
		return node.NonZeroRequested.Memory + pod.NonZero.Memory, node.Allocatable.Memory
	}
	return node.Requested.Get(name) + pod.Requests.Get(name), node.Allocatable.Get(name)
}

func (p *nodeResourcesFit) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var sum, weights int64
	for _, r := range p.resources {
		requested, alloc := requestedAfter(pod, node, corev1.ResourceName(r.Name))
		if alloc == 0 {
			continue
		}
		w := max(r.Weight, 1)
		var s int64
		switch p.strategy {
		case configv1.MostAllocated:
			s = min(requested, alloc) * framework.MaxNodeScore / alloc
		case configv1.RequestedToCapacityRatio:
			s = shapeScore(p.shape, min(requested, alloc)*100/alloc)
		default: // LeastAllocated
			if requested <= alloc {
				s = (alloc - requested) * framework.MaxNodeScore / alloc
			}
		}
		sum += s * w
		weights += w
	}
	if weights == 0 {
		return 0, nil
	}
	return sum / weights, nil
}

// shapeScore interpolates the RequestedToCapacityRatio shape (scores 0..10 scaled to 0..100) at utilization u.
func shapeScore(shape []configv1.UtilizationShapePoint, u int64) int64 {
	scale := framework.MaxNodeScore / 10
	if u <= int64(shape[0].Utilization) {
		return int64(shape[0].Score) * scale
	}
	for i := 1; i < len(shape); i++ {
		a, b := shape[i-1], shape[i]
		if u <= int64(b.Utilization) {
			span := int64(b.Utilization - a.Utilization)
			return (int64(a.Score)*scale*span + (int64(b.Score)-int64(a.Score))*scale*(u-int64(a.Utilization))) / span
		}
	}
	return int64(shape[len(shape)-1].Score) * scale
}

func (*nodeResourcesFit) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventPod, ActionType: framework.Delete | framework.UpdatePodScaleDown},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeAllocatable}}
}

// NodeResourcesBalancedAllocation favours nodes whose resources would be used evenly with the pod placed:
// 100 × (1 − the standard deviation of the requested fractions).
const NodeResourcesBalancedAllocName = "NodeResourcesBalancedAllocation"

type balancedAllocation struct{ resources []configv1.ResourceSpec }

func newBalancedAllocation(args runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	p := &balancedAllocation{resources: defaultScoredResources}
	if a, _ := args.(*configv1.NodeResourcesBalancedAllocationArgs); a != nil && len(a.Resources) > 0 {
		p.resources = a.Resources
	}
	return p, nil
}

func (*balancedAllocation) Name() string { return NodeResourcesBalancedAllocName }

func (p *balancedAllocation) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var fractions [8]float64
	fs := fractions[:0]
	for _, r := range p.resources {
		requested, alloc := requestedAfter(pod, node, corev1.ResourceName(r.Name))
		if alloc == 0 {
			continue
		}
		fs = append(fs, math.Min(float64(requested)/float64(alloc), 1))
	}
	if len(fs) < 2 {
		return framework.MaxNodeScore, nil
	}
	var mean float64
	for _, f := range fs {
		mean += f
	}
	mean /= float64(len(fs))
	var variance float64
	for _, f := range fs {
		variance += (f - mean) * (f - mean)
	}
	std := math.Sqrt(variance / float64(len(fs)))
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}

func (*balancedAllocation) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventPod, ActionType: framework.Delete},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeAllocatable}}
}
