package plugins

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// PodTopologySpread: a pod's DoNotSchedule topology spread constraints as a filter (placing the pod must not
// take its domain more than maxSkew above the least-loaded eligible domain) and its ScheduleAnyway constraints
// as a score (fewer matching pods in the node's domains scores higher). A pod without constraints gets the
// plugin's default constraints (upstream's system defaults unless the args list others), selecting the pods of
// the Services, ReplicaSets, StatefulSets and ReplicationControllers the pod belongs to.
const PodTopologySpreadName = "PodTopologySpread"

// Reasons as upstream reports them.
const (
	ptsReasonConstraints  = "node(s) didn't match pod topology spread constraints"
	ptsReasonMissingLabel = ptsReasonConstraints + " (missing required label)"

	ptsFilterKey = "PreFilter" + PodTopologySpreadName
	ptsScoreKey  = "PreScore" + PodTopologySpreadName
)

// ptsSystemDefaults are upstream's system default constraints (defaultingType System).
var ptsSystemDefaults = []corev1.TopologySpreadConstraint{
	{TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 5},
}

type podTopologySpread struct {
	// counts caches ptsCountMatching by node state (name and PodSetGeneration: pod status updates keep it),
	// namespace and selector: scheduling
	// the replicas of one workload asks the same question of every node each cycle, and all nodes but the one
	// that got the last pod still have the answer. Entries of old states are dropped wholesale at
	// ptsCountCacheMax.
	counts *ptsCountCache
	// questions interns (namespace, selector) pairs for the count keys.
	questions                   sync.Map // string → int64
	questionsSize, nextQuestion atomic.Int64
	h                           framework.Handle
	defaults                    []corev1.TopologySpreadConstraint
	// systemDefaulted: the defaults are the system ones, under which scoring also counts nodes that lack some
	// of the topology keys (a cluster without zones still spreads by host).
	systemDefaulted bool
}

var (
	_ framework.PreFilterPlugin     = (*podTopologySpread)(nil)
	_ framework.PreFilterExtensions = (*podTopologySpread)(nil)
	_ framework.FilterPlugin        = (*podTopologySpread)(nil)
	_ framework.PreScorePlugin      = (*podTopologySpread)(nil)
	_ framework.ScorePlugin         = (*podTopologySpread)(nil)
	_ framework.ScoreNormalizer     = (*podTopologySpread)(nil)
	_ framework.EnqueueExtensions   = (*podTopologySpread)(nil)
)

// newPodTopologySpread takes *configv1.PodTopologySpreadArgs (nil: defaultingType System).
func newPodTopologySpread(args runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, errors.New("PodTopologySpread: no framework handle")
	}
	p := &podTopologySpread{h: h, defaults: ptsSystemDefaults, systemDefaulted: true, counts: newPTSCountCache(ptsCountCacheMax)}
	if args == nil {
		return p, nil
	}
	a, ok := args.(*configv1.PodTopologySpreadArgs)
	if !ok {
		return nil, fmt.Errorf("PodTopologySpread: args are %T, want *PodTopologySpreadArgs", args)
	}
	if a == nil {
		return p, nil
	}
	switch a.DefaultingType {
	case "", configv1.SystemDefaulting:
		if len(a.DefaultConstraints) > 0 {
			return nil, errors.New(`defaultConstraints: Invalid value: when .defaultingType is "System", .defaultConstraints must be empty`)
		}
	case configv1.ListDefaulting:
		if err := ptsValidateDefaults(a.DefaultConstraints); err != nil {
			return nil, err
		}
		p.defaults, p.systemDefaulted = a.DefaultConstraints, false
	default:
		return nil, fmt.Errorf("defaultingType: Unsupported value: %q: supported values: %q, %q", a.DefaultingType,
			configv1.SystemDefaulting, configv1.ListDefaulting)
	}
	return p, nil
}

// ptsValidateDefaults checks default constraints as upstream's args validation does.
func ptsValidateDefaults(cs []corev1.TopologySpreadConstraint) error {
	type keyAction struct {
		key    string
		action corev1.UnsatisfiableConstraintAction
	}
	seen := map[keyAction]bool{}
	for i, c := range cs {
		path := fmt.Sprintf("defaultConstraints[%d]", i)
		switch {
		case c.MaxSkew <= 0:
			return fmt.Errorf("%s.maxSkew: Invalid value: %d: not in valid range (0, inf)", path, c.MaxSkew)
		case c.TopologyKey == "":
			return fmt.Errorf("%s.topologyKey: Required value: can not be empty", path)
		case c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway:
			return fmt.Errorf("%s.whenUnsatisfiable: Unsupported value: %q", path, c.WhenUnsatisfiable)
		case c.LabelSelector != nil:
			return fmt.Errorf("%s.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod", path)
		case seen[keyAction{c.TopologyKey, c.WhenUnsatisfiable}]:
			return fmt.Errorf("%s: Duplicate value: {%v, %v}", path, c.TopologyKey, c.WhenUnsatisfiable)
		}
		seen[keyAction{c.TopologyKey, c.WhenUnsatisfiable}] = true
	}
	return nil
}

func (*podTopologySpread) Name() string { return PodTopologySpreadName }

// EventsToRegister: pods placed, removed or relabelled change the counts; nodes added, removed, relabelled or
// (re)tainted change the domains.
func (*podTopologySpread) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{
		{Resource: framework.EventPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete},
		{Resource: framework.EventNode, ActionType: framework.Add | framework.Delete | framework.UpdateNodeLabel | framework.UpdateNodeTaint},
	}
}

// ptsConstraint is a parsed constraint.
type ptsConstraint struct {
	maxSkew    int32
	key        string
	selector   labels.Selector
	selKey     string // selector.String(), for the count cache
	question   int64  // the count cache's id of (the pod's namespace, selKey); 0: not cached
	minDomains int32
	// honorAffinity / honorTaints: nodeAffinityPolicy / nodeTaintsPolicy Honor (defaults: Honor, Ignore).
	honorAffinity, honorTaints bool
}

// constraints are the pod's constraints with the given action, or the default ones for a pod without any.
func (p *podTopologySpread) constraints(pod *corev1.Pod, cluster string, action corev1.UnsatisfiableConstraintAction) ([]ptsConstraint, error) {
	cs, err := p.constraintsOf(pod, cluster, action)
	for i := range cs {
		if cs[i].selKey != "" {
			cs[i].question = p.question(pod.Namespace, cs[i].selKey)
		}
	}
	return cs, err
}

func (p *podTopologySpread) constraintsOf(pod *corev1.Pod, cluster string, action corev1.UnsatisfiableConstraintAction) ([]ptsConstraint, error) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return ptsParse(pod.Spec.TopologySpreadConstraints, pod.Labels, action)
	}
	cs, err := ptsParse(p.defaults, pod.Labels, action)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	sel := p.h.DefaultSelector(cluster, pod)
	if sel == nil {
		return nil, nil
	}
	if reqs, selectable := sel.Requirements(); !selectable || len(reqs) == 0 {
		return nil, nil // nothing owns or selects the pod
	}
	key := sel.String()
	for i := range cs {
		cs[i].selector, cs[i].selKey = sel, key
	}
	return cs, nil
}

// ptsParse parses the constraints with the given action: the selector with matchLabelKeys' values from the
// pod's labels, minDomains defaulting to 1.
func ptsParse(in []corev1.TopologySpreadConstraint, podLabels map[string]string, action corev1.UnsatisfiableConstraintAction) ([]ptsConstraint, error) {
	var out []ptsConstraint
	for i := range in {
		c := &in[i]
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("topology spread constraint %q selector: %w", c.TopologyKey, err)
		}
		sel = ptsWithMatchLabelKeys(sel, c.MatchLabelKeys, podLabels)
		pc := ptsConstraint{maxSkew: c.MaxSkew, key: c.TopologyKey, selector: sel, selKey: sel.String(), minDomains: 1, honorAffinity: true}
		if c.MinDomains != nil {
			pc.minDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			pc.honorAffinity = *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
		}
		if c.NodeTaintsPolicy != nil {
			pc.honorTaints = *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		}
		out = append(out, pc)
	}
	return out, nil
}

// ptsWithMatchLabelKeys adds key=value requirements for the pod's values of keys (a selector that selects
// nothing stays so).
func ptsWithMatchLabelKeys(sel labels.Selector, keys []string, podLabels map[string]string) labels.Selector {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return sel
	}
	set := labels.Set{}
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			set[k] = v
		}
	}
	if len(set) == 0 {
		return sel
	}
	return labels.SelectorFromSet(set).Add(reqs...)
}

var ptsLogger = klog.Background()

// includes tells whether node counts as one of the constraint's domains for pod (nodeAffinityPolicy,
// nodeTaintsPolicy).
func (c *ptsConstraint) includes(pod *corev1.Pod, node *corev1.Node, required nodeaffinity.RequiredNodeAffinity) bool {
	if c.honorAffinity {
		if ok, _ := required.Match(node); !ok { // parse errors count as no match, as upstream
			return false
		}
	}
	if c.honorTaints {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(ptsLogger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
		if untolerated {
			return false
		}
	}
	return true
}

// ptsHasKeys tells whether the node has every constraint's topology key.
func ptsHasKeys(nodeLabels map[string]string, cs []ptsConstraint) bool {
	for i := range cs {
		if _, ok := nodeLabels[cs[i].key]; !ok {
			return false
		}
	}
	return true
}

// ptsCountMatching counts the pods in ns matching sel, leaving out terminating pods; an empty selector counts
// none.
func ptsCountMatching(pods []*framework.PodInfo, sel labels.Selector, ns string) int {
	if sel.Empty() {
		return 0
	}
	n := 0
	for _, p := range pods {
		if ptsMatches(p.Pod, sel, ns) {
			n++
		}
	}
	return n
}

// ptsCountCacheMax bounds the count cache (about 100 bytes an entry).
const ptsCountCacheMax = 200_000

// ptsCountKey names a count: a node's pod set (PodSetGeneration is unique across nodes and clones) and the
// question (an interned namespace and selector), two integers that hash fast — a cycle asks once per node.
type ptsCountKey struct {
	gen, question int64
}

// question is the interned id of (ns, selKey) for the count cache, made once per scheduling cycle.
func (p *podTopologySpread) question(ns, selKey string) int64 {
	k := ns + "\x00" + selKey
	if id, ok := p.questions.Load(k); ok {
		return id.(int64)
	}
	if p.questionsSize.Add(1) > ptsCountCacheMax {
		p.questions.Clear() // ids are never reused: counts cached under a dropped id are simply never asked again
		p.questionsSize.Store(0)
	}
	id, _ := p.questions.LoadOrStore(k, p.nextQuestion.Add(1))
	return id.(int64)
}

// countMatching is ptsCountMatching of ni's pods in ns (the namespace c.question was made for), through the
// count cache.
func (p *podTopologySpread) countMatching(ni *framework.NodeInfo, c *ptsConstraint, ns string) int {
	if ni.PodSetGeneration == 0 || c.question == 0 { // a NodeInfo or constraint built by hand: nothing to key on
		return ptsCountMatching(ni.Pods, c.selector, ns)
	}
	k := ptsCountKey{gen: ni.PodSetGeneration, question: c.question}
	if n, ok := p.counts.get(k); ok {
		return n
	}
	n := ptsCountMatching(ni.Pods, c.selector, ns)
	p.counts.put(k, n)
	return n
}

func ptsMatches(pod *corev1.Pod, sel labels.Selector, ns string) bool {
	return pod.DeletionTimestamp == nil && pod.Namespace == ns && !sel.Empty() && sel.Matches(labels.Set(pod.Labels))
}
