package framework

import (
	"fmt"
	"hash/maphash"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Defaults a container without requests is counted with when scoring (not when filtering), as upstream: so
// that a node full of request-less pods does not look empty.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
	// MaxNodeScore is the highest score a Score plugin gives after normalization.
	MaxNodeScore int64 = 100
	// DefaultMaxPods is the pod capacity of a node that reports none.
	DefaultMaxPods = 110
)

// Resource is an amount of the resources the scheduler tracks.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int
	// Scalar holds extended resources (example.com/gpu, hugepages-2Mi, ...).
	Scalar map[corev1.ResourceName]int64
}

// NewResource reads a resource list.
func NewResource(rl corev1.ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add adds a resource list.
func (r *Resource) Add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		default:
			if r.Scalar == nil {
				r.Scalar = map[corev1.ResourceName]int64{}
			}
			r.Scalar[name] += q.Value()
		}
	}
}

func (r *Resource) plus(o *Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	r.AllowedPodNumber += int(sign) * o.AllowedPodNumber
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[k] += sign * v
	}
}

// Clone copies the resource.
func (r Resource) Clone() Resource {
	if r.Scalar != nil {
		s := make(map[corev1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			s[k] = v
		}
		r.Scalar = s
	}
	return r
}

// Get is the amount of one resource (milli-units for CPU).
func (r *Resource) Get(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case corev1.ResourcePods:
		return int64(r.AllowedPodNumber)
	}
	return r.Scalar[name]
}

// AffinityTerm is a parsed pod (anti-)affinity term: which pods it selects, in which namespaces, by which
// topology key.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector // nil: only Namespaces
}

// Matches tells whether the term selects pod (nsLabels are the labels of pod's namespace).
func (t *AffinityTerm) Matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if !t.Namespaces.Has(pod.Namespace) && (t.NamespaceSelector == nil || !t.NamespaceSelector.Matches(nsLabels)) {
		return false
	}
	return t.Selector.Matches(labels.Set(pod.Labels))
}

// WeightedAffinityTerm is a preferred term with its weight.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// PodInfo is a pod with what the plugins need of it computed once.
type PodInfo struct {
	Pod *corev1.Pod
	// Requests are the pod's effective requests (containers, init containers as upstream, and overhead), with
	// AllowedPodNumber 1.
	Requests Resource
	// NonZero are the CPU and memory requests with the scoring defaults for containers that request none.
	NonZero                    Resource
	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []WeightedAffinityTerm
	PreferredAntiAffinityTerms []WeightedAffinityTerm
	// HostPorts are the host ports the pod holds while it runs (PodHostPorts), nil for most pods.
	HostPorts []HostPort
	// uidHash is a hash of the pod's UID, to tell it from a Nominee without reading the nominee's UID.
	uidHash uint64
}

var uidSeed = maphash.MakeSeed()

func hashUID(uid types.UID) uint64 { return maphash.String(uidSeed, string(uid)) }

// uidKey is the pod's UID hash (computed now for a PodInfo not made by NewPodInfo).
func (pi *PodInfo) uidKey() uint64 {
	if pi.uidHash == 0 {
		return hashUID(pi.Pod.UID)
	}
	return pi.uidHash
}

// NewPodInfo computes a pod's PodInfo; an error means its affinity terms cannot be parsed (validation should
// have refused them).
func NewPodInfo(pod *corev1.Pod) (*PodInfo, error) {
	pi := &PodInfo{Pod: pod}
	// While a resize is pending or in progress (KEP 1287) a pod holds the larger of what its spec asks and what the
	// kubelet allocated or applied (its containers' status), as upstream's scheduler counts it: a shrink frees
	// room only once the node has made it, a growth takes room as soon as it is asked for (an infeasible one not).
	pi.Requests = NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true}))
	pi.Requests.AllowedPodNumber = 1
	nz := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		NonMissingContainerRequests: corev1.ResourceList{
			corev1.ResourceCPU:    *resourceQuantity(DefaultMilliCPURequest, true),
			corev1.ResourceMemory: *resourceQuantity(DefaultMemoryRequest, false),
		}})
	pi.NonZero = Resource{MilliCPU: nz.Cpu().MilliValue(), Memory: nz.Memory().Value()}
	pi.HostPorts = PodHostPorts(pod)
	pi.uidHash = hashUID(pod.UID)
	a := pod.Spec.Affinity
	if a == nil {
		return pi, nil
	}
	var err error
	if a.PodAffinity != nil {
		if pi.RequiredAffinityTerms, err = affinityTerms(pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, err
		}
		if pi.PreferredAffinityTerms, err = weightedTerms(pod, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, err
		}
	}
	if a.PodAntiAffinity != nil {
		if pi.RequiredAntiAffinityTerms, err = affinityTerms(pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, err
		}
		if pi.PreferredAntiAffinityTerms, err = weightedTerms(pod, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return nil, err
		}
	}
	return pi, nil
}

// HasAffinity tells whether the pod has any pod affinity or anti-affinity term.
func (pi *PodInfo) HasAffinity() bool {
	return len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms)+len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
}

func newAffinityTerm(pod *corev1.Pod, t *corev1.PodAffinityTerm) (AffinityTerm, error) {
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return AffinityTerm{}, fmt.Errorf("pod affinity term selector: %w", err)
	}
	// matchLabelKeys / mismatchLabelKeys: the pod's own values of those keys join the selector.
	for _, k := range t.MatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, "=", []string{v})
			if err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	for _, k := range t.MismatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, "!=", []string{v})
			if err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	term := AffinityTerm{Namespaces: sets.New(t.Namespaces...), Selector: sel, TopologyKey: t.TopologyKey}
	if t.NamespaceSelector != nil {
		if term.NamespaceSelector, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
			return AffinityTerm{}, fmt.Errorf("pod affinity namespace selector: %w", err)
		}
	}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		term.Namespaces.Insert(pod.Namespace)
	}
	return term, nil
}

func affinityTerms(pod *corev1.Pod, in []corev1.PodAffinityTerm) ([]AffinityTerm, error) {
	out := make([]AffinityTerm, 0, len(in))
	for i := range in {
		t, err := newAffinityTerm(pod, &in[i])
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func weightedTerms(pod *corev1.Pod, in []corev1.WeightedPodAffinityTerm) ([]WeightedAffinityTerm, error) {
	out := make([]WeightedAffinityTerm, 0, len(in))
	for i := range in {
		t, err := newAffinityTerm(pod, &in[i].PodAffinityTerm)
		if err != nil {
			return nil, err
		}
		out = append(out, WeightedAffinityTerm{AffinityTerm: t, Weight: in[i].Weight})
	}
	return out, nil
}

func resourceQuantity(v int64, milli bool) *resource.Quantity {
	if milli {
		return resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return resource.NewQuantity(v, resource.BinarySI)
}
