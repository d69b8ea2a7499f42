package plugins

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// DefaultPreemption: when no node fits, find a node where evicting lower-priority pods lets the pod fit,
// evicting as few and as unimportant pods as possible, preferring not to break PodDisruptionBudgets; delete
// those victims and nominate the node. Every step is a dry run on copies (NodeInfo.Clone, CycleState.Clone)
// driven through the PreFilter extensions and the Filter plugins, as upstream.
const DefaultPreemptionName = "DefaultPreemption"

// Reasons as upstream reports them.
const (
	dpReasonNoVictims      = "No preemption victims found for incoming pod"
	dpReasonNotHelpful     = "Preemption is not helpful for scheduling"
	dpReasonPolicyNever    = "not eligible due to preemptionPolicy=Never."
	dpReasonTerminatingPod = "not eligible due to a terminating pod on the nominated node."
)

type defaultPreemption struct {
	h framework.Handle
	// The dry run stops once it has max(minAbsolute, minPercent% of the potential nodes) candidates (and at
	// least one that violates no PDB).
	minPercent, minAbsolute int32
}

var _ framework.PostFilterPlugin = (*defaultPreemption)(nil)

// newDefaultPreemption takes *configv1.DefaultPreemptionArgs (nil: 10% and 100 nodes).
func newDefaultPreemption(args runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, errors.New("DefaultPreemption: no framework handle")
	}
	p := &defaultPreemption{h: h, minPercent: 10, minAbsolute: 100}
	if args == nil {
		return p, nil
	}
	a, ok := args.(*configv1.DefaultPreemptionArgs)
	if !ok {
		return nil, fmt.Errorf("DefaultPreemption: args are %T, want *DefaultPreemptionArgs", args)
	}
	if a == nil {
		return p, nil
	}
	if a.MinCandidateNodesPercentage != nil {
		p.minPercent = *a.MinCandidateNodesPercentage
	}
	if a.MinCandidateNodesAbsolute != nil {
		p.minAbsolute = *a.MinCandidateNodesAbsolute
	}
	switch {
	case p.minPercent < 0 || p.minPercent > 100:
		return nil, fmt.Errorf("minCandidateNodesPercentage: Invalid value: %d: not in valid range [0, 100]", p.minPercent)
	case p.minAbsolute < 0:
		return nil, fmt.Errorf("minCandidateNodesAbsolute: Invalid value: %d: not in valid range [0, inf)", p.minAbsolute)
	case p.minPercent == 0 && p.minAbsolute == 0:
		return nil, errors.New("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
	}
	return p, nil
}

func (*defaultPreemption) Name() string { return DefaultPreemptionName }

// PostFilter preempts: on success the victims are being deleted and the result names the node to nominate.
// Unschedulable when preemption cannot help (the message says why, prefixed "preemption: "); Error when the
// dry run or a deletion failed.
func (p *defaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	res, st := p.preempt(ctx, state, pod, snap, filtered)
	switch {
	case st.IsSuccess():
		return res, nil
	case st.Code() == framework.Error:
		return res, framework.AsStatus(fmt.Errorf("preemption: %w", st.Err()))
	}
	return res, framework.NewStatus(st.Code(), "preemption: "+st.Message())
}

func (p *defaultPreemption) preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, snap *framework.Snapshot, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if ok, msg := dpEligible(pod.Pod, snap, filtered); !ok {
		return nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	if len(snap.Nodes) == 0 {
		return nil, framework.AsStatus(errors.New("no nodes available"))
	}
	var potential []*framework.NodeInfo
	for _, n := range snap.Nodes {
		if filtered[n.Name()].Code() == framework.Unschedulable {
			potential = append(potential, n)
		}
	}
	var cands []dpCandidate
	statuses := framework.NodeToStatus{}
	if len(potential) > 0 {
		var err error
		cands, statuses, err = p.dryRun(ctx, state, pod, potential, p.h.PodDisruptionBudgets(snap.Cluster), snap.NominatedPods)
		if err != nil && len(cands) == 0 {
			return nil, framework.AsStatus(err)
		}
	}
	if len(cands) == 0 {
		// An empty nomination clears a stale one, as upstream.
		return &framework.PostFilterResult{}, framework.NewStatus(framework.Unschedulable, dpFitMessage(snap, statuses))
	}
	best := dpPick(cands)
	if err := p.evict(ctx, snap.Cluster, best.victims); err != nil {
		return nil, framework.AsStatus(err)
	}
	return &framework.PostFilterResult{NominatedNodeName: best.node}, nil
}

// dpEligible: a pod with preemptionPolicy Never never preempts; nor does a pod already nominated to a node
// where lower-priority pods are still terminating because of preemption (its victims), unless that node
// now rejects it for good.
func dpEligible(pod *corev1.Pod, snap *framework.Snapshot, filtered framework.NodeToStatus) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, dpReasonPolicyNever
	}
	nom := pod.Status.NominatedNodeName
	if nom == "" || filtered[nom].Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	if ni, ok := snap.Get(nom); ok {
		prio := corev1helpers.PodPriority(pod)
		for _, pi := range ni.Pods {
			if corev1helpers.PodPriority(pi.Pod) < prio && dpTerminatingByPreemption(pi.Pod) {
				return false, dpReasonTerminatingPod
			}
		}
	}
	return true, ""
}

// dpTerminatingByPreemption: the pod is terminating with a DisruptionTarget condition set by the scheduler's
// preemption. A terminating pod without any DisruptionTarget condition counts too (the victim's deleter may
// not set the condition; upstream before the condition existed looked at terminating pods only).
func dpTerminatingByPreemption(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return true
}

// dpCandidate is a node where evicting victims (most important first) lets the pod fit.
type dpCandidate struct {
	node          string
	victims       []*corev1.Pod
	pdbViolations int
}

// dpResult is one node's dry run.
type dpResult struct {
	victims    []*corev1.Pod
	violations int
	st         *framework.Status
}

// numCandidates is how many candidates the dry run looks for among n potential nodes.
func (p *defaultPreemption) numCandidates(n int) int {
	c := max(n*int(p.minPercent)/100, int(p.minAbsolute))
	return min(c, n)
}

// dpOffset is where the dry run starts among n nodes: upstream picks it at random to spread preemption over
// the cluster; here it is a hash of the pod's UID, which spreads pods as well but keeps the plugin a function
// of its inputs.
func dpOffset(uid string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(uid))
	return int(h.Sum32() % uint32(n))
}

// dryRun evaluates the potential nodes from the offset on, in parallel batches, until it has enough
// candidates including one that violates no PDB. Candidates violating no PDB come first. statuses are the
// verdicts of the nodes that are not candidates.
func (p *defaultPreemption) dryRun(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, potential []*framework.NodeInfo,
	pdbs []*policyv1.PodDisruptionBudget, nominated func(node string) []framework.Nominee) ([]dpCandidate, framework.NodeToStatus, error) {
	want := p.numCandidates(len(potential))
	offset := dpOffset(string(pod.Pod.UID), len(potential))
	statuses := framework.NodeToStatus{}
	var clean, violating []dpCandidate
	var errs []error
	for start := 0; start < len(potential); {
		if len(clean) > 0 && len(clean)+len(violating) >= want {
			break
		}
		end := min(start+max(want, 1), len(potential))
		batch := make([]*framework.NodeInfo, 0, end-start)
		for i := start; i < end; i++ {
			batch = append(batch, potential[(offset+i)%len(potential)])
		}
		start += len(batch)
		results := make([]dpResult, len(batch))
		p.h.Parallel(ctx, len(batch), func(i int) {
			results[i] = p.selectVictims(ctx, state.Clone(), pod, batch[i].Clone(), pdbs, nominated(batch[i].Name()))
		})
		if err := ctx.Err(); err != nil {
			return nil, nil, err // some results are missing
		}
		for i, r := range results {
			name := batch[i].Name()
			if r.st.IsSuccess() && len(r.victims) == 0 {
				r.st = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", name))
			}
			switch {
			case r.st.IsSuccess() && r.violations == 0:
				clean = append(clean, dpCandidate{node: name, victims: r.victims})
			case r.st.IsSuccess():
				violating = append(violating, dpCandidate{node: name, victims: r.victims, pdbViolations: r.violations})
			default:
				if r.st.Code() == framework.Error {
					errs = append(errs, r.st.Err())
				}
				statuses[name] = r.st
			}
		}
	}
	return append(clean, violating...), statuses, errors.Join(errs...)
}

// selectVictims dry-runs preemption on node (a clone, with state a clone): remove every lower-priority pod;
// if the pod then fits, put them back most important first (those whose eviction would violate a PDB before
// the others), keeping each that still lets the pod fit. The rest are the victims, most important first. Fit
// counts the pods nominated to the node with at least the pod's priority, as the filters did (upstream's
// RunFilterPluginsWithNominatedPods): otherwise room already promised to a nominee looks free.
func (p *defaultPreemption) selectVictims(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo,
	pdbs []*policyv1.PodDisruptionBudget, nominated []framework.Nominee) dpResult {
	prio := corev1helpers.PodPriority(pod.Pod)
	var potential []*framework.PodInfo
	for _, pi := range node.Pods {
		if corev1helpers.PodPriority(pi.Pod) < prio {
			potential = append(potential, pi)
		}
	}
	if len(potential) == 0 {
		return dpResult{st: framework.NewStatus(framework.UnschedulableAndUnresolvable, dpReasonNoVictims)}
	}
	for _, pi := range potential {
		if st := p.remove(ctx, state, pod, pi, node); st != nil {
			return dpResult{st: st}
		}
	}
	if st := p.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, node, nominated); !st.IsSuccess() {
		return dpResult{st: st}
	}
	sort.SliceStable(potential, func(i, j int) bool { return dpMoreImportant(potential[i].Pod, potential[j].Pod) })
	violating, clean := dpSplitByPDB(potential, pdbs)
	var r dpResult
	// reprieve puts pi back; if the pod no longer fits, pi is a victim and comes off again.
	reprieve := func(pi *framework.PodInfo) (bool, *framework.Status) {
		node.AddPod(pi)
		if st := p.h.RunPreFilterExtensionAddPod(ctx, state, pod, pi, node); !st.IsSuccess() {
			return false, st
		}
		if p.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, node, nominated).IsSuccess() {
			return false, nil
		}
		r.victims = append(r.victims, pi.Pod)
		return true, p.remove(ctx, state, pod, pi, node)
	}
	for _, pi := range violating {
		victim, st := reprieve(pi)
		if st != nil {
			return dpResult{st: st}
		}
		if victim {
			r.violations++
		}
	}
	for _, pi := range clean {
		if _, st := reprieve(pi); st != nil {
			return dpResult{st: st}
		}
	}
	if len(violating) > 0 && len(clean) > 0 {
		sort.SliceStable(r.victims, func(i, j int) bool { return dpMoreImportant(r.victims[i], r.victims[j]) })
	}
	return r
}

// remove takes pi off node and tells the PreFilter extensions; nil on success.
func (p *defaultPreemption) remove(ctx context.Context, state *framework.CycleState, pod, pi *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	if err := node.RemovePod(pi.Pod.UID); err != nil {
		return framework.AsStatus(err)
	}
	if st := p.h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, node); !st.IsSuccess() {
		return st
	}
	return nil
}

// dpMoreImportant: higher priority, then the earlier start (a pod not started yet counts as starting now,
// after every started one).
func dpMoreImportant(a, b *corev1.Pod) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return dpStartNanos(a) < dpStartNanos(b)
}

func dpStartNanos(p *corev1.Pod) int64 {
	if p.Status.StartTime == nil {
		return math.MaxInt64
	}
	return p.Status.StartTime.UnixNano()
}

// dpSplitByPDB splits pods (in order) into those whose eviction, taken in that order, would exceed a
// matching PDB's allowed disruptions, and the others. Pods a PDB already lists as disrupted do not count.
func dpSplitByPDB(pods []*framework.PodInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, clean []*framework.PodInfo) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil {
			selectors[i] = sel // an invalid selector matches nothing
		}
	}
	for _, pi := range pods {
		violated := false
		for i, pdb := range pdbs {
			sel := selectors[i]
			if len(pi.Pod.Labels) == 0 || pdb.Namespace != pi.Pod.Namespace || sel == nil || sel.Empty() || !sel.Matches(labels.Set(pi.Pod.Labels)) {
				continue
			}
			if _, disrupted := pdb.Status.DisruptedPods[pi.Pod.Name]; disrupted {
				continue
			}
			if allowed[i]--; allowed[i] < 0 {
				violated = true
			}
		}
		if violated {
			violating = append(violating, pi)
		} else {
			clean = append(clean, pi)
		}
	}
	return violating, clean
}

// evict deletes the victims (gracefully, through the handle); one already gone is fine.
func (p *defaultPreemption) evict(ctx context.Context, cluster string, victims []*corev1.Pod) error {
	errs := make([]error, len(victims))
	p.h.Parallel(ctx, len(victims), func(i int) {
		if err := p.h.DeletePod(ctx, cluster, victims[i]); err != nil && !apierrors.IsNotFound(err) {
			errs[i] = fmt.Errorf("deleting victim %s/%s: %w", victims[i].Namespace, victims[i].Name, err)
		}
	})
	return errors.Join(errs...)
}
