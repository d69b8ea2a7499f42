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

// isIgnored tells whether the profile's ignoredResources or ignoredResourceGroups exempt name from the fit
// check. As upstream, only extended resources (domain-prefixed, outside kubernetes.io) can be ignored: hugepages
// and kubernetes.io/ resources are always checked.
func (p *nodeResourcesFit) isIgnored(name corev1.ResourceName) bool {
	n := string(name)
	i := strings.IndexByte(n, '/')
	if i <= 0 || strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	if p.ignored[n] {
		return true
	}
	for _, g := range p.ignoredGroups {
		if n[:i] == g {
			return true
		}
	}
	return false
}

// insufficient lists what the node lacks for the pod; unresolvable is set when the pod would not fit even on
// the empty node (preemption cannot help). As upstream, "Too many pods" alone is never unresolvable.
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

// allocatableRequested is a resource's allocatable on the node and what the node's pods would request of it with
// the pod placed. nonZero counts request-less containers at the scoring defaults for CPU and memory (the fit
// strategies); without it, actual requests (BalancedAllocation). An allocatable of 0 leaves the resource out of the
// score, as upstream: extended resources the pod does not request (so that nodes having them are not penalized)
// and resources the node does not have.
func allocatableRequested(pod *framework.PodInfo, node *framework.NodeInfo, name corev1.ResourceName, nonZero bool) (allocatable, requested int64) {
	used, want := &node.Requested, &pod.Requests
	if nonZero {
		used, want = &node.NonZeroRequested, &pod.NonZero
	}
	switch name {
	case corev1.ResourceCPU:
		return node.Allocatable.MilliCPU, used.MilliCPU + want.MilliCPU
	case corev1.ResourceMemory:
		return node.Allocatable.Memory, used.Memory + want.Memory
	case corev1.ResourceEphemeralStorage:
		return node.Allocatable.EphemeralStorage, node.Requested.EphemeralStorage + pod.Requests.EphemeralStorage
	case corev1.ResourcePods:
		return 0, 0
	}
	if pod.Requests.Scalar[name] == 0 {
		return 0, 0
	}
	return node.Allocatable.Scalar[name], node.Requested.Scalar[name] + pod.Requests.Scalar[name]
}

func (p *nodeResourcesFit) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var sum, weights int64
	for _, r := range p.resources {
		alloc, requested := allocatableRequested(pod, node, corev1.ResourceName(r.Name), true)
		if alloc == 0 {
			continue
		}
		var s int64
		switch p.strategy {
		case configv1.MostAllocated:
			s = min(requested, alloc) * framework.MaxNodeScore / alloc
		case configv1.RequestedToCapacityRatio:
			// Over capacity counts as 100 % utilization; a resource scoring 0 does not count towards the
			// weights (upstream).
			if s = shapeScore(p.shape, min(requested, alloc)*100/alloc); s == 0 {
				continue
			}
		default: // LeastAllocated
			if requested <= alloc {
				s = (alloc - requested) * framework.MaxNodeScore / alloc
			}
		}
		w := max(r.Weight, 1)
		sum += s * w
		weights += w
	}
	switch {
	case weights == 0:
		return 0, nil
	case p.strategy == configv1.RequestedToCapacityRatio:
		return int64(math.Round(float64(sum) / float64(weights))), nil
	}
	return sum / weights, nil
}

// shapeScore interpolates the RequestedToCapacityRatio shape (scores 0..10 scaled to 0..100) at utilization u,
// rounding as upstream's broken linear function: the lower point's score plus the truncated slope part.
func shapeScore(shape []configv1.UtilizationShapePoint, u int64) int64 {
	scale := framework.MaxNodeScore / 10
	for i, b := range shape {
		if u > int64(b.Utilization) {
			continue
		}
		if i == 0 {
			return int64(b.Score) * scale
		}
		a := shape[i-1]
		return int64(a.Score)*scale + (int64(b.Score)-int64(a.Score))*scale*(u-int64(a.Utilization))/int64(b.Utilization-a.Utilization)
	}
	return int64(shape[len(shape)-1].Score) * scale
}

func (*nodeResourcesFit) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventPod, ActionType: framework.Delete | framework.UpdatePodScaleDown},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeAllocatable}}
}

// NodeResourcesBalancedAllocation favours nodes whose resources would be used evenly with the pod placed:
// 100 × (1 − the standard deviation of the requested fractions), counting actual requests (no scoring
// defaults). Pods requesting none of its resources skip it (upstream: best-effort pods would otherwise all pile
// onto the node that looks most balanced).
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

// bestEffort tells whether the pod requests none of the scored resources.
func (p *balancedAllocation) bestEffort(pod *framework.PodInfo) bool {
	for _, r := range p.resources {
		if name := corev1.ResourceName(r.Name); name != corev1.ResourcePods && pod.Requests.Get(name) != 0 {
			return false
		}
	}
	return true
}

func (p *balancedAllocation) PreScore(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, _ *framework.Snapshot, _ []*framework.NodeInfo) *framework.Status {
	if p.bestEffort(pod) {
		return framework.NewStatus(framework.Skip)
	}
	return nil
}

func (p *balancedAllocation) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	if p.bestEffort(pod) { // PreScore not run
		return 0, nil
	}
	var fractions [8]float64
	fs := fractions[:0]
	for _, r := range p.resources {
		alloc, requested := allocatableRequested(pod, node, corev1.ResourceName(r.Name), false)
		if alloc == 0 {
			continue
		}
		fs = append(fs, math.Min(float64(requested)/float64(alloc), 1))
	}
	var std float64
	switch len(fs) {
	case 0, 1:
	case 2: // as upstream, so that rounding matches
		std = math.Abs(fs[0]-fs[1]) / 2
	default:
		var mean, variance float64
		for _, f := range fs {
			mean += f
		}
		mean /= float64(len(fs))
		for _, f := range fs {
			variance += (f - mean) * (f - mean)
		}
		std = math.Sqrt(variance / float64(len(fs)))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}

func (*balancedAllocation) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventPod, ActionType: framework.Delete},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeAllocatable}}
}
