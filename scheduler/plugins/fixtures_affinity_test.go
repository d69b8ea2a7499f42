package plugins

// Fixtures shared by the InterPodAffinity, PodTopologySpread and DefaultPreemption tests: pods and nodes built
// by hand, a fake ClusterSource, and a real framework.Framework holding real plugins.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

const (
	fxCluster = "c1"
	fxZone    = corev1.LabelTopologyZone
)

// fxSource is a fake ClusterSource: it records deletions and serves fixed PDBs and default selectors.
type fxSource struct {
	mu      sync.Mutex // guards deleted
	deleted []string   // namespace/name
	// deleteErr fails every DeletePod.
	deleteErr error
	pdbs      []*policyv1.PodDisruptionBudget
	// selector is DefaultSelector's answer (nil: labels.Nothing()).
	selector labels.Selector
}

var _ framework.ClusterSource = (*fxSource)(nil)

func (f *fxSource) DeletePod(_ context.Context, cluster string, pod *corev1.Pod) error {
	if cluster != fxCluster {
		return fmt.Errorf("cluster %q", cluster)
	}
	if f.deleteErr != nil {
		return f.deleteErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, pod.Namespace+"/"+pod.Name)
	return nil
}

func (f *fxSource) PodDisruptionBudgets(string) []*policyv1.PodDisruptionBudget { return f.pdbs }

func (f *fxSource) DefaultSelector(string, *corev1.Pod) labels.Selector {
	if f.selector == nil {
		return labels.Nothing()
	}
	return f.selector
}

func (f *fxSource) deletions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

// fxT is what the fixtures need of *testing.T, *testing.B and *rapid.T.
type fxT interface {
	Helper()
	Fatalf(format string, args ...any)
	Context() context.Context
}

// fxPlugin is a plugin of the framework under test: its registry name and args.
type fxPlugin struct {
	name string
	args runtime.Object
}

// fxFramework builds a framework holding the named plugins (from Registry, in order) at every extension point
// each implements, scores weighted 1.
func fxFramework(t fxT, src *fxSource, plugins ...fxPlugin) *framework.Framework {
	t.Helper()
	fw := &framework.Framework{ProfileName: "test", Parallelism: 4, Cluster: src}
	reg := Registry()
	var all []framework.Plugin
	for _, p := range plugins {
		factory, ok := reg[p.name]
		if !ok {
			t.Fatalf("plugin %s not registered", p.name)
		}
		pl, err := factory(p.args, fw)
		if err != nil {
			t.Fatalf("plugin %s: %v", p.name, err)
		}
		all = append(all, pl)
		if x, ok := pl.(framework.PreFilterPlugin); ok {
			fw.PreFilter = append(fw.PreFilter, x)
		}
		if x, ok := pl.(framework.FilterPlugin); ok {
			fw.Filter = append(fw.Filter, x)
		}
		if x, ok := pl.(framework.PostFilterPlugin); ok {
			fw.PostFilter = append(fw.PostFilter, x)
		}
		if x, ok := pl.(framework.PreScorePlugin); ok {
			fw.PreScore = append(fw.PreScore, x)
		}
		if x, ok := pl.(framework.ScorePlugin); ok {
			fw.Score = append(fw.Score, framework.WeightedScore{Plugin: x, Weight: 1})
		}
	}
	fw.RegisterEvents(all)
	return fw
}

// fxFilter runs PreFilter and then Filter on every node, as the scheduler does: the cycle state, each node's
// status (rejections only) and the feasible nodes. A PreFilter rejection is returned as is.
func fxFilter(t fxT, fw *framework.Framework, pod *framework.PodInfo, snap *framework.Snapshot) (*framework.CycleState, framework.NodeToStatus, []*framework.NodeInfo, *framework.Status) {
	t.Helper()
	state := framework.NewCycleState()
	if _, st := fw.RunPreFilterPlugins(t.Context(), state, pod, snap); !st.IsSuccess() {
		return state, nil, nil, st
	}
	statuses := framework.NodeToStatus{}
	var feasible []*framework.NodeInfo
	for _, n := range snap.Nodes {
		if st := fw.RunFilterPluginsWithNominatedPods(t.Context(), state, pod, n, snap.NominatedPods(n.Name())); st.IsSuccess() {
			feasible = append(feasible, n)
		} else {
			statuses[n.Name()] = st
		}
	}
	return state, statuses, feasible, nil
}

// fxPodB builds a pod.
type fxPodB struct{ p *corev1.Pod }

func fxPod(name string) *fxPodB {
	return &fxPodB{p: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}}
}

func (b *fxPodB) ns(ns string) *fxPodB {
	b.p.Namespace = ns
	b.p.UID = types.UID("uid-" + ns + "-" + b.p.Name)
	return b
}

func (b *fxPodB) label(kv ...string) *fxPodB {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		b.p.Labels[kv[i]] = kv[i+1]
	}
	return b
}

func (b *fxPodB) prio(p int32) *fxPodB { b.p.Spec.Priority = &p; return b }

func (b *fxPodB) cpu(milli int64) *fxPodB {
	b.p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}
	return b
}

func (b *fxPodB) started(sec int64) *fxPodB {
	b.p.Status.StartTime = &metav1.Time{Time: time.Unix(sec, 0)}
	return b
}

func (b *fxPodB) nodeSelector(kv ...string) *fxPodB {
	b.p.Spec.NodeSelector = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		b.p.Spec.NodeSelector[kv[i]] = kv[i+1]
	}
	return b
}

func (b *fxPodB) affinity() *corev1.Affinity {
	if b.p.Spec.Affinity == nil {
		b.p.Spec.Affinity = &corev1.Affinity{}
	}
	return b.p.Spec.Affinity
}

// podAffinity adds a required pod affinity term selecting key=value.
func (b *fxPodB) podAffinity(topologyKey, key, value string) *fxPodB {
	a := b.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, fxTerm(topologyKey, key, value))
	return b
}

// podAntiAffinity adds a required pod anti-affinity term selecting key=value.
func (b *fxPodB) podAntiAffinity(topologyKey, key, value string) *fxPodB {
	a := b.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, fxTerm(topologyKey, key, value))
	return b
}

func (b *fxPodB) preferAffinity(weight int32, topologyKey, key, value string) *fxPodB {
	a := b.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: fxTerm(topologyKey, key, value)})
	return b
}

func (b *fxPodB) preferAntiAffinity(weight int32, topologyKey, key, value string) *fxPodB {
	a := b.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: fxTerm(topologyKey, key, value)})
	return b
}

func (b *fxPodB) spread(c corev1.TopologySpreadConstraint) *fxPodB {
	b.p.Spec.TopologySpreadConstraints = append(b.p.Spec.TopologySpreadConstraints, c)
	return b
}

func (b *fxPodB) obj() *corev1.Pod { return b.p }

func (b *fxPodB) info(t fxT) *framework.PodInfo { t.Helper(); return fxInfo(t, b.p) }

func fxTerm(topologyKey, key, value string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: topologyKey,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
}

func fxInfo(t fxT, pod *corev1.Pod) *framework.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	return pi
}

// fxNode is a node with labels (key, value pairs) and milliCPU allocatable (0: 32 cores).
func fxNode(name string, milliCPU int64, kv ...string) *corev1.Node {
	if milliCPU == 0 {
		milliCPU = 32000
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(64<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		}}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// fxNodeInfo places pods (spec.nodeName set) on node.
func fxNodeInfo(t fxT, node *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	t.Helper()
	ni := framework.NewNodeInfo(node)
	for _, p := range pods {
		p.Spec.NodeName = node.Name
		ni.AddPod(fxInfo(t, p))
	}
	return ni
}

func fxSnapshot(nodes ...*framework.NodeInfo) *framework.Snapshot {
	return framework.NewSnapshot(fxCluster, nodes, func(ns string) labels.Set {
		return labels.Set{"kubernetes.io/metadata.name": ns, "team": "t-" + ns}
	})
}

// fxReasons is a status as "Code: reason, reason" ("" for success).
func fxReasons(st *framework.Status) string {
	if st.IsSuccess() {
		return ""
	}
	names := map[framework.Code]string{framework.Unschedulable: "Unschedulable",
		framework.UnschedulableAndUnresolvable: "UnschedulableAndUnresolvable", framework.Error: "Error", framework.Skip: "Skip"}
	return names[st.Code()] + ": " + st.Message()
}
