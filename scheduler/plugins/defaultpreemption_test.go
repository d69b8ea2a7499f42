package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"pgregory.net/rapid"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// fxPreemptionPlugins are the plugins preemption runs with in these tests.
func fxPreemptionPlugins(args runtime.Object) []fxPlugin {
	return []fxPlugin{{name: NodeResourcesFitName}, {name: InterPodAffinityName}, {name: PodTopologySpreadName},
		{name: DefaultPreemptionName, args: args}}
}

// fxPreempt runs a scheduling cycle up to PostFilter: the nominated node ("" if none) and PostFilter's status.
func fxPreempt(t fxT, fw *framework.Framework, pod *framework.PodInfo, snap *framework.Snapshot) (string, *framework.Status) {
	t.Helper()
	state, statuses, feasible, st := fxFilter(t, fw, pod, snap)
	if st != nil {
		t.Fatalf("PreFilter: %s", st.Message())
	}
	if len(feasible) > 0 {
		t.Fatalf("%d feasible nodes, the first %s: no preemption needed", len(feasible), feasible[0].Name())
	}
	res, st := fw.RunPostFilterPlugins(t.Context(), state, pod, snap, statuses)
	if res == nil {
		return "", st
	}
	return res.NominatedNodeName, st
}

func fxPDB(app string, allowed int32, disrupted ...string) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-" + app, Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, DisruptedPods: map[string]metav1.Time{}}}
	for _, d := range disrupted {
		pdb.Status.DisruptedPods[d] = metav1.Time{}
	}
	return pdb
}

func TestDefaultPreemption(t *testing.T) {
	never := corev1.PreemptNever
	preemptor := func() *fxPodB { return fxPod("p").prio(10).cpu(2000) }
	terminating := func(name string, prio int32, byPreemption bool) *corev1.Pod {
		p := fxPod(name).prio(prio).cpu(2000).obj()
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		if byPreemption {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonPreemptionByScheduler}}
		}
		return p
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       func(t *testing.T) []*framework.NodeInfo
		pdbs        []*policyv1.PodDisruptionBudget
		deleteErr   error
		nominees    map[string][]*corev1.Pod // pending pods nominated to nodes
		wantNode    string
		wantStatus  string
		wantDeleted []string
	}{{
		name: "preemptionPolicy Never",
		pod: func() *corev1.Pod {
			p := preemptor().obj()
			p.Spec.PreemptionPolicy = &never
			return p
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("low").prio(1).cpu(2000).obj())}
		},
		wantStatus: "Unschedulable: preemption: not eligible due to preemptionPolicy=Never.",
	}, {
		name: "nominated to a node where its victims are still terminating",
		pod: func() *corev1.Pod {
			p := preemptor().obj()
			p.Status.NominatedNodeName = "n1"
			return p
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), terminating("old", 1, true)),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("low").prio(1).cpu(2000).obj())}
		},
		wantStatus: "Unschedulable: preemption: not eligible due to a terminating pod on the nominated node.",
	}, {
		name: "a pod terminating for another reason does not hold the nomination",
		pod: func() *corev1.Pod {
			p := preemptor().obj()
			p.Status.NominatedNodeName = "n1"
			return p
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			old := terminating("old", 1, true)
			old.Status.Conditions[0].Reason = "EvictionByEvictionAPI"
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), old)}
		},
		wantNode: "n1", wantDeleted: []string{"default/old"},
	}, {
		name: "nominated node now unresolvable: preempt elsewhere",
		pod: func() *corev1.Pod {
			p := preemptor().obj()
			p.Status.NominatedNodeName = "n1"
			return p
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 1000), terminating("old", 1, true)),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("low").prio(1).cpu(2000).obj())}
		},
		wantNode: "n2", wantDeleted: []string{"default/low"},
	}, {
		name: "the node whose most important victim is least important",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("mid").prio(5).cpu(2000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("low").prio(1).cpu(2000).obj())}
		},
		wantNode: "n2", wantDeleted: []string{"default/low"},
	}, {
		name: "no lower-priority pods anywhere",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("hi").prio(10).cpu(2000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("higher").prio(20).cpu(2000).obj())}
		},
		wantStatus: "Unschedulable: preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
	}, {
		name: "unresolvable nodes are no candidates",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 1000), fxPod("low").prio(1).cpu(1000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("hi").prio(10).cpu(2000).obj())}
		},
		wantStatus: "Unschedulable: preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
	}, {
		name: "evicting every lower-priority pod is not enough",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 4000), fxPod("hi").prio(20).cpu(3000).obj(), fxPod("low").prio(1).cpu(1000).obj())}
		},
		wantStatus: "Unschedulable: preemption: 0/1 nodes are available: 1 Insufficient cpu.",
	}, {
		name: "victims are reprieved most important first",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 4000), fxPod("p1").prio(1).cpu(1000).obj(),
				fxPod("p2").prio(2).cpu(1000).obj(), fxPod("p3").prio(3).cpu(2000).obj())}
		},
		wantNode: "n1", wantDeleted: []string{"default/p2", "default/p1"},
	}, {
		name: "pods a PDB protects are reprieved first",
		pod:  fxPod("p").prio(10).cpu(1000).obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("plain").prio(1).cpu(1000).started(100).obj(),
				fxPod("guarded").label("app", "x").prio(1).cpu(1000).started(200).obj())}
		},
		pdbs:     []*policyv1.PodDisruptionBudget{fxPDB("x", 0)},
		wantNode: "n1", wantDeleted: []string{"default/plain"},
	}, {
		name: "fewest PDB violations first",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("guarded").label("app", "x").prio(1).cpu(2000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("mid").prio(5).cpu(2000).obj())}
		},
		pdbs:     []*policyv1.PodDisruptionBudget{fxPDB("x", 0)},
		wantNode: "n2", wantDeleted: []string{"default/mid"},
	}, {
		name: "a pod the PDB already counts as disrupted is no violation",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("guarded").label("app", "x").prio(1).cpu(2000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("mid").prio(5).cpu(2000).obj())}
		},
		pdbs:     []*policyv1.PodDisruptionBudget{fxPDB("x", 0, "guarded")},
		wantNode: "n1", wantDeleted: []string{"default/guarded"},
	}, {
		name: "smallest sum of victim priorities",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 2000), fxPod("a1").prio(3).cpu(1000).obj(), fxPod("a2").prio(3).cpu(1000).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("b1").prio(3).cpu(1000).obj(), fxPod("b2").prio(1).cpu(1000).obj())}
		},
		wantNode: "n2", wantDeleted: []string{"default/b1", "default/b2"},
	}, {
		name: "latest start of the most important victims",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 2000), fxPod("old").prio(3).cpu(2000).started(100).obj()),
				fxNodeInfo(t, fxNode("n2", 2000), fxPod("new").prio(3).cpu(2000).started(200).obj()),
				fxNodeInfo(t, fxNode("n3", 2000), fxPod("older").prio(3).cpu(2000).started(50).obj())}
		},
		wantNode: "n2", wantDeleted: []string{"default/new"},
	}, {
		name: "the pod's anti-affinity: the pods it objects to are victims",
		pod:  fxPod("p").prio(10).label("app", "web").podAntiAffinity(corev1.LabelHostname, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0), fxPod("w1").prio(1).label("app", "web").obj(), fxPod("db").prio(1).label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0), fxPod("w2").prio(20).label("app", "web").obj())}
		},
		wantNode: "n1", wantDeleted: []string{"default/w1"},
	}, {
		name: "existing pods' anti-affinity: the objecting pod is the victim",
		pod:  fxPod("p").prio(10).label("app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("loner").prio(1).podAntiAffinity(fxZone, "app", "web").obj(),
					fxPod("other").prio(1).obj())}
		},
		wantNode: "n1", wantDeleted: []string{"default/loner"},
	}, {
		name: "topology spread: evicting a matching pod lowers the skew",
		pod: func() *corev1.Pod {
			c := fxSpread(corev1.LabelHostname, 1, corev1.DoNotSchedule, "web")
			three := int32(3)
			c.MinDomains = &three
			return fxPod("p").prio(10).label("app", "web").spread(c).obj()
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0), fxPod("w1").prio(1).label("app", "web").obj(), fxPod("db").prio(1).label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0), fxPod("w2").prio(20).label("app", "web").obj())}
		},
		wantNode: "n1", wantDeleted: []string{"default/w1"},
	}, {
		// The filters count the nominee's 3 CPUs; without it the dry run saw the node fit with no victim.
		name: "room promised to a nominee of equal priority is not free",
		pod:  fxPod("p").prio(10).cpu(1000).obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 4000), fxPod("low").prio(1).cpu(1000).obj())}
		},
		nominees: map[string][]*corev1.Pod{"n1": {fxPod("nominee").prio(10).cpu(3000).obj()}},
		wantNode: "n1", wantDeleted: []string{"default/low"},
	}, {
		name: "room promised to a nominee of higher priority cannot be preempted for",
		pod:  fxPod("p").prio(10).cpu(2000).obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 4000), fxPod("low").prio(1).cpu(1000).obj())}
		},
		nominees:   map[string][]*corev1.Pod{"n1": {fxPod("vip").prio(100).cpu(3000).obj()}},
		wantStatus: "Unschedulable: preemption: 0/1 nodes are available: 1 Insufficient cpu.",
	}, {
		name: "deleting a victim fails",
		pod:  preemptor().obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 2000), fxPod("low").prio(1).cpu(2000).obj())}
		},
		deleteErr:  errors.New("store unavailable"),
		wantStatus: "Error: preemption: deleting victim default/low: store unavailable",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &fxSource{pdbs: tc.pdbs, deleteErr: tc.deleteErr}
			fw := fxFramework(t, src, fxPreemptionPlugins(nil)...)
			snap := fxSnapshot(tc.nodes(t)...)
			if tc.nominees != nil {
				infos := map[string][]framework.Nominee{}
				for n, pods := range tc.nominees {
					for _, p := range pods {
						infos[n] = append(infos[n], framework.NewNominee(fxInfo(t, p)))
					}
				}
				snap.Nominated = func(n string) []framework.Nominee { return infos[n] }
			}
			node, st := fxPreempt(t, fw, fxInfo(t, tc.pod), snap)
			if got := fxReasons(st); got != tc.wantStatus {
				t.Errorf("status %q, want %q", got, tc.wantStatus)
			}
			if node != tc.wantNode {
				t.Errorf("nominated %q, want %q", node, tc.wantNode)
			}
			if diff := cmp.Diff(tc.wantDeleted, src.deletions()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultPreemptionDeterministic: the same pod on the same cluster nominates the same node run after run,
// whether the dry run stops after a few candidates or tries every node (in parallel: 80 nodes).
func TestDefaultPreemptionDeterministic(t *testing.T) {
	two, zero := int32(2), int32(0)
	for name, args := range map[string]*configv1.DefaultPreemptionArgs{
		"two candidates": {MinCandidateNodesAbsolute: &two, MinCandidateNodesPercentage: &zero},
		"defaults":       nil,
	} {
		t.Run(name, func(t *testing.T) {
			var first string
			for i := range 10 {
				var nodes []*framework.NodeInfo
				for j := range 80 {
					nodes = append(nodes, fxNodeInfo(t, fxNode(fmt.Sprint("n", j), 2000),
						fxPod(fmt.Sprint("low", j)).prio(int32(1+j%3)).cpu(2000).started(int64(j%7)).obj()))
				}
				fw := fxFramework(t, &fxSource{}, fxPreemptionPlugins(args)...)
				node, st := fxPreempt(t, fw, fxPod("p").prio(10).cpu(2000).info(t), fxSnapshot(nodes...))
				if !st.IsSuccess() {
					t.Fatal(st.Message())
				}
				if i == 0 {
					first = node
				} else if node != first {
					t.Fatalf("run %d nominated %s, run 0 %s", i, node, first)
				}
			}
			if args == nil {
				// Every node is tried; the best victims are priority 1 (j%3 == 0) started latest (j%7 == 6):
				// j = 6, 27, 48, 69, of which the first in the dry run's order (from its offset) wins.
				want := ""
				for i := range 80 {
					if j := (dpOffset("uid-p", 80) + i) % 80; j%21 == 6 {
						want = fmt.Sprint("n", j)
						break
					}
				}
				if first != want {
					t.Errorf("nominated %s, want %s", first, want)
				}
			}
		})
	}
}

func TestDefaultPreemptionNumCandidates(t *testing.T) {
	tests := []struct{ nodes, percent, absolute, want int }{
		{nodes: 5, percent: 10, absolute: 100, want: 5},
		{nodes: 500, percent: 10, absolute: 100, want: 100},
		{nodes: 5000, percent: 10, absolute: 100, want: 500},
		{nodes: 50, percent: 0, absolute: 3, want: 3},
		{nodes: 50, percent: 50, absolute: 0, want: 25},
	}
	for _, tc := range tests {
		p := &defaultPreemption{minPercent: int32(tc.percent), minAbsolute: int32(tc.absolute)}
		if got := p.numCandidates(tc.nodes); got != tc.want {
			t.Errorf("numCandidates(%d) with %d%%, %d = %d, want %d", tc.nodes, tc.percent, tc.absolute, got, tc.want)
		}
	}
}

func TestDefaultPreemptionArgs(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	tests := []struct {
		name    string
		args    runtime.Object
		wantErr bool
	}{
		{name: "nil"},
		{name: "set", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: i(20), MinCandidateNodesAbsolute: i(10)}},
		{name: "percentage over 100", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: i(101)}, wantErr: true},
		{name: "negative absolute", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesAbsolute: i(-1)}, wantErr: true},
		{name: "both zero", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: i(0), MinCandidateNodesAbsolute: i(0)}, wantErr: true},
		{name: "wrong type", args: &configv1.PodTopologySpreadArgs{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newDefaultPreemption(tc.args, &framework.Framework{})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// TestDefaultPreemptionProperty: over random clusters (CPU, pod anti-affinity, PDBs), when preemption
// nominates a node: every victim is on it and of lower priority than the preemptor; without the victims the
// pod passes every filter there; and keeping any single victim would not (the filters here only get harder
// with more pods, so a smaller set that works is one reprieve would have found). When preemption fails, no
// node where preemption was worth trying fits the pod even without all its lower-priority pods.
func TestDefaultPreemptionProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var nodes []*framework.NodeInfo
		pods := map[string]*framework.PodInfo{}
		for i := range rapid.IntRange(1, 5).Draw(rt, "nodes") {
			capacity := int64(rapid.IntRange(2, 6).Draw(rt, fmt.Sprint("cpu", i))) * 1000
			ni := framework.NewNodeInfo(fxNode(fmt.Sprint("n", i), capacity))
			for j := range rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("pods", i)) {
				name := fmt.Sprintf("n%d-p%d", i, j)
				cpu := int64(rapid.IntRange(1, 3).Draw(rt, name+"/cpu")) * 1000
				if ni.Requested.MilliCPU+cpu > capacity {
					break
				}
				pb := fxPod(name).prio(int32(rapid.IntRange(0, 5).Draw(rt, name+"/prio"))).cpu(cpu).
					label("app", rapid.SampledFrom([]string{"web", "db"}).Draw(rt, name+"/app"))
				if rapid.IntRange(0, 3).Draw(rt, name+"/start") > 0 {
					pb.started(int64(rapid.IntRange(1, 5).Draw(rt, name+"/startAt")))
				}
				pb.p.Spec.NodeName = ni.Name()
				pods[name] = fxInfo(rt, pb.obj())
				ni.AddPod(pods[name])
			}
			nodes = append(nodes, ni)
		}
		pb := fxPod("incoming").label("app", "api").prio(int32(rapid.IntRange(0, 6).Draw(rt, "prio"))).
			cpu(int64(rapid.IntRange(1, 4).Draw(rt, "cpu")) * 1000)
		if rapid.Bool().Draw(rt, "antiWeb") {
			pb.podAntiAffinity(corev1.LabelHostname, "app", "web")
		}
		pod := fxInfo(rt, pb.obj())
		src := &fxSource{}
		if rapid.Bool().Draw(rt, "pdb") {
			src.pdbs = []*policyv1.PodDisruptionBudget{fxPDB("db", int32(rapid.IntRange(0, 2).Draw(rt, "allowed")))}
		}
		fw := fxFramework(rt, src, fxPreemptionPlugins(nil)...)
		snap := fxSnapshot(nodes...)
		state, statuses, feasible, st := fxFilter(rt, fw, pod, snap)
		if st != nil || len(feasible) > 0 {
			return // nothing to preempt for
		}
		res, st := fw.RunPostFilterPlugins(rt.Context(), state, pod, snap, statuses)
		if !st.IsSuccess() {
			if st.Code() != framework.Unschedulable {
				rt.Fatalf("PostFilter: %s", fxReasons(st))
			}
			fxCheckNoCandidate(rt, fw, pod, nodes, statuses)
			return
		}
		fxCheckVictims(rt, fw, pod, nodes, pods, res.NominatedNodeName, src.deletions())
	})
}

// fxFits runs PreFilter on a snapshot with node replaced by changed, then Filter on changed.
func fxFits(rt *rapid.T, fw *framework.Framework, pod *framework.PodInfo, nodes []*framework.NodeInfo, changed *framework.NodeInfo) bool {
	var all []*framework.NodeInfo
	for _, n := range nodes {
		if n.Name() == changed.Name() {
			n = changed
		}
		all = append(all, n)
	}
	state := framework.NewCycleState()
	if _, st := fw.RunPreFilterPlugins(rt.Context(), state, pod, fxSnapshot(all...)); !st.IsSuccess() {
		rt.Fatalf("PreFilter: %s", st.Message())
	}
	return fw.RunFilterPlugins(rt.Context(), state, pod, changed).IsSuccess()
}

func fxCheckVictims(rt *rapid.T, fw *framework.Framework, pod *framework.PodInfo, nodes []*framework.NodeInfo,
	pods map[string]*framework.PodInfo, nominated string, deleted []string) {
	if len(deleted) == 0 {
		rt.Fatalf("nominated %s without victims", nominated)
	}
	var node *framework.NodeInfo
	for _, n := range nodes {
		if n.Name() == nominated {
			node = n
		}
	}
	if node == nil {
		rt.Fatalf("nominated unknown node %q", nominated)
	}
	without := node.Clone()
	var victims []*framework.PodInfo
	for _, d := range deleted {
		v := pods[strings.TrimPrefix(d, "default/")]
		switch {
		case v == nil || v.Pod.Spec.NodeName != nominated:
			rt.Fatalf("victim %s is not on the nominated node %s", d, nominated)
		case *v.Pod.Spec.Priority >= *pod.Pod.Spec.Priority:
			rt.Fatalf("victim %s has priority %d, preemptor %d", d, *v.Pod.Spec.Priority, *pod.Pod.Spec.Priority)
		}
		if err := without.RemovePod(v.Pod.UID); err != nil {
			rt.Fatal(err)
		}
		victims = append(victims, v)
	}
	if !fxFits(rt, fw, pod, nodes, without) {
		rt.Fatalf("pod does not fit %s without the victims %v", nominated, deleted)
	}
	for _, v := range victims {
		kept := without.Clone()
		kept.AddPod(v)
		if fxFits(rt, fw, pod, nodes, kept) {
			rt.Fatalf("pod fits %s keeping victim %s: victims %v are not minimal", nominated, v.Pod.Name, deleted)
		}
	}
}

func fxCheckNoCandidate(rt *rapid.T, fw *framework.Framework, pod *framework.PodInfo, nodes []*framework.NodeInfo, statuses framework.NodeToStatus) {
	for _, n := range nodes {
		if statuses[n.Name()].Code() != framework.Unschedulable {
			continue
		}
		without := n.Clone()
		for _, pi := range n.Pods {
			if *pi.Pod.Spec.Priority < *pod.Pod.Spec.Priority {
				if err := without.RemovePod(pi.Pod.UID); err != nil {
					rt.Fatal(err)
				}
			}
		}
		if len(without.Pods) < len(n.Pods) && fxFits(rt, fw, pod, nodes, without) {
			rt.Fatalf("preemption failed but the pod fits %s without its lower-priority pods", n.Name())
		}
	}
}

// TestDefaultPreemptionCancelled: a cancelled cycle preempts nothing.
func TestDefaultPreemptionCancelled(t *testing.T) {
	src := &fxSource{}
	fw := fxFramework(t, src, fxPreemptionPlugins(nil)...)
	snap := fxSnapshot(fxNodeInfo(t, fxNode("n1", 2000), fxPod("low").prio(1).cpu(2000).obj()))
	pod := fxPod("p").prio(10).cpu(2000).info(t)
	state, statuses, _, _ := fxFilter(t, fw, pod, snap)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, st := fw.RunPostFilterPlugins(ctx, state, pod, snap, statuses)
	if st.Code() != framework.Error || res != nil {
		t.Errorf("got %v, %q; want an Error status", res, fxReasons(st))
	}
	if d := src.deletions(); len(d) != 0 {
		t.Errorf("deleted %v", d)
	}
}
