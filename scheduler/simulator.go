package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// Simulator runs the scheduling algorithm alone, in memory: the same configuration, framework, plugins and
// cache as the scheduler, without the API (no watch, no binding, no events). The perf harness measures the
// algorithm with it; it also answers "where would this pod go" questions. Not safe for concurrent use.
type Simulator struct {
	s *Scheduler
	c *clusterCache
	// Selectors stand in for the Services and controllers that select pods (PodTopologySpread's system
	// defaults); PDBs for preemption. Victims lists the pods preemption deleted.
	Selectors []labels.Selector
	PDBs      []*policyv1.PodDisruptionBudget
	Victims   []*corev1.Pod
}

// NewSimulator builds a simulator from a completed configuration (nil: the defaults).
func NewSimulator(cfg *Configuration) (*Simulator, error) {
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(""); err != nil {
			return nil, err
		}
	}
	sim := &Simulator{c: newClusterCache("sim")}
	s := &Scheduler{cfg: cfg, profiles: map[string]*framework.Framework{}}
	for i := range cfg.Profiles {
		fw, err := newFramework(&cfg.Profiles[i], cfg, sim)
		if err != nil {
			return nil, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		s.profiles[fw.ProfileName] = fw
	}
	sim.s = s
	return sim, nil
}

// AddNode adds or updates a node.
func (sim *Simulator) AddNode(n *corev1.Node) { sim.c.setNode(n) }

// AddPod places a bound pod (spec.nodeName set).
func (sim *Simulator) AddPod(p *corev1.Pod) error {
	_, err := sim.c.addPod(p)
	return err
}

// SetNamespaceLabels sets a namespace's labels (for affinity namespace selectors).
func (sim *Simulator) SetNamespaceLabels(ns string, l map[string]string) { sim.c.nsLabels[ns] = l }

// Schedule runs one scheduling cycle for a pending pod and, if a node fits, places the pod there (as the
// scheduler assumes it). It returns the node, or "" and the FailedScheduling message (after preemption, if
// the profile has it; victims are removed from the simulation and listed in Victims, and the pod is nominated
// to the node as the scheduler records it, so that its next cycle tries that node first).
func (sim *Simulator) Schedule(ctx context.Context, pod *corev1.Pod) (node, message string, err error) {
	fw, ok := sim.s.profiles[schedulerName(pod)]
	if !ok {
		return "", "", fmt.Errorf("no profile %q", schedulerName(pod))
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return "", "", err
	}
	res := sim.s.schedulePod(ctx, fw, sim.c, pi)
	if res.err != nil {
		return "", "", res.err
	}
	if res.node != "" {
		bound := pod.DeepCopy()
		bound.Spec.NodeName = res.node
		bpi := *pi
		bpi.Pod = bound
		sim.c.clearNominated(pod.UID)
		sim.c.assume(&bpi, res.node)
		return res.node, "", nil
	}
	msg := res.message()
	if len(fw.PostFilter) > 0 && res.statuses != nil {
		post, st := fw.RunPostFilterPlugins(ctx, res.state, pi, res.snap, res.statuses)
		if post != nil && post.NominatedNodeName != "" {
			sim.c.displaceNominated(post.NominatedNodeName, podPriority(pod))
			sim.c.setNominated(pi, post.NominatedNodeName) // as the scheduler records it
			msg += " preemption: nominated node " + post.NominatedNodeName + "."
		} else if st != nil {
			msg += " " + st.Message()
		}
	}
	return "", msg, nil
}

// DeletePod removes a preemption victim from the simulation.
func (sim *Simulator) DeletePod(_ context.Context, _ string, pod *corev1.Pod) error {
	sim.c.removePod(pod.UID)
	sim.Victims = append(sim.Victims, pod)
	return nil
}

// PodDisruptionBudgets are the simulation's PDBs.
func (sim *Simulator) PodDisruptionBudgets(string) []*policyv1.PodDisruptionBudget { return sim.PDBs }

// DefaultSelector joins the simulation's selectors that match the pod.
func (sim *Simulator) DefaultSelector(_ string, pod *corev1.Pod) labels.Selector {
	sel := labels.NewSelector()
	found := false
	for _, s := range sim.Selectors {
		if s.Matches(labels.Set(pod.Labels)) {
			reqs, _ := s.Requirements()
			sel = sel.Add(reqs...)
			found = true
		}
	}
	if !found {
		return labels.Nothing()
	}
	return sel
}

var _ framework.ClusterSource = (*Simulator)(nil)
