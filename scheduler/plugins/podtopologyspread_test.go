package plugins

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"pgregory.net/rapid"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// fxSpread is a constraint on key selecting app=value.
func fxSpread(key string, maxSkew int32, action corev1.UnsatisfiableConstraintAction, app string) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: action,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func fxApps(app string, names ...string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range names {
		out = append(out, fxPod(n).label("app", app).obj())
	}
	return out
}

func TestPodTopologySpreadFilter(t *testing.T) {
	const (
		skew    = "Unschedulable: node(s) didn't match pod topology spread constraints"
		missing = "UnschedulableAndUnresolvable: node(s) didn't match pod topology spread constraints (missing required label)"
	)
	zone := func(maxSkew int32) corev1.TopologySpreadConstraint {
		return fxSpread(fxZone, maxSkew, corev1.DoNotSchedule, "web")
	}
	threeZones := func(t *testing.T) []*framework.NodeInfo {
		return []*framework.NodeInfo{
			fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxApps("web", "w1", "w2")...),
			fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxApps("web", "w3")...),
			fxNodeInfo(t, fxNode("c1", 0, fxZone, "c"), fxApps("db", "d1")...),
			fxNodeInfo(t, fxNode("x1", 0)),
		}
	}
	i32 := func(v int32) *int32 { return &v }
	ignore, honor := corev1.NodeInclusionPolicyIgnore, corev1.NodeInclusionPolicyHonor
	tests := []struct {
		name     string
		pod      *corev1.Pod
		src      *fxSource
		args     runtime.Object
		nodes    func(t *testing.T) []*framework.NodeInfo
		want     map[string]string
		wantSkip bool
	}{{
		name:  "maxSkew 1: only the emptiest zone; a node without the key is unresolvable",
		pod:   fxPod("p").label("app", "web").spread(zone(1)).obj(),
		nodes: threeZones,
		want:  map[string]string{"a1": skew, "b1": skew, "c1": "", "x1": missing},
	}, {
		name:  "maxSkew 2",
		pod:   fxPod("p").label("app", "web").spread(zone(2)).obj(),
		nodes: threeZones,
		want:  map[string]string{"a1": skew, "b1": "", "c1": "", "x1": missing},
	}, {
		name:  "a pod outside its own selector does not count itself",
		pod:   fxPod("p").label("app", "api").spread(zone(2)).obj(),
		nodes: threeZones,
		want:  map[string]string{"a1": "", "b1": "", "c1": "", "x1": missing},
	}, {
		name: "minDomains above the eligible domains makes the global minimum 0",
		pod: func() *corev1.Pod {
			c := zone(1)
			c.MinDomains = i32(4)
			return fxPod("p").label("app", "web").spread(c).obj()
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxApps("web", "w1")...),
				fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxApps("web", "w2")...),
				fxNodeInfo(t, fxNode("c1", 0, fxZone, "c"), fxApps("web", "w3")...),
			}
		},
		want: map[string]string{"a1": skew, "b1": skew, "c1": skew},
	}, {
		name: "minDomains met: the real minimum",
		pod: func() *corev1.Pod {
			c := zone(1)
			c.MinDomains = i32(3)
			return fxPod("p").label("app", "web").spread(c).obj()
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxApps("web", "w1")...),
				fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxApps("web", "w2")...),
				fxNodeInfo(t, fxNode("c1", 0, fxZone, "c"), fxApps("web", "w3")...),
			}
		},
		want: map[string]string{"a1": "", "b1": "", "c1": ""},
	}, {
		name:  "nodeAffinityPolicy Honor (default): zones the pod cannot go to are no domains",
		pod:   fxPod("p").label("app", "web").nodeSelector("pool", "x").spread(zone(1)).obj(),
		nodes: fxPoolNodes,
		// domains a (2) and b (1); c (0) is out: min 1
		want: map[string]string{"a1": skew, "b1": "", "c1": ""},
	}, {
		name: "nodeAffinityPolicy Ignore: every zone is a domain",
		pod: func() *corev1.Pod {
			c := zone(1)
			c.NodeAffinityPolicy = &ignore
			return fxPod("p").label("app", "web").nodeSelector("pool", "x").spread(c).obj()
		}(),
		nodes: fxPoolNodes,
		want:  map[string]string{"a1": skew, "b1": skew, "c1": ""},
	}, {
		name: "nodeTaintsPolicy Honor: a zone of untolerated tainted nodes is no domain",
		pod: func() *corev1.Pod {
			c := zone(1)
			c.NodeTaintsPolicy = &honor
			return fxPod("p").label("app", "web").spread(c).obj()
		}(),
		nodes: fxTaintedNodes,
		want:  map[string]string{"a1": skew, "b1": "", "c1": ""},
	}, {
		name:  "nodeTaintsPolicy Ignore (default)",
		pod:   fxPod("p").label("app", "web").spread(zone(1)).obj(),
		nodes: fxTaintedNodes,
		want:  map[string]string{"a1": skew, "b1": skew, "c1": ""},
	}, {
		name: "matchLabelKeys: only pods of the same revision count",
		pod: func() *corev1.Pod {
			c := zone(1)
			c.MatchLabelKeys = []string{"pod-template-hash"}
			return fxPod("p").label("app", "web", "pod-template-hash", "v2").spread(c).obj()
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxPod("o1").label("app", "web", "pod-template-hash", "v1").obj(),
					fxPod("o2").label("app", "web", "pod-template-hash", "v1").obj()),
				fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxPod("n1").label("app", "web", "pod-template-hash", "v2").obj()),
			}
		},
		want: map[string]string{"a1": "", "b1": skew},
	}, {
		name: "terminating pods and pods of other namespaces do not count",
		pod:  fxPod("p").label("app", "web").spread(zone(1)).obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			gone := fxPod("gone").label("app", "web").obj()
			gone.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), gone, fxPod("o").ns("other").label("app", "web").obj()),
				fxNodeInfo(t, fxNode("b1", 0, fxZone, "b")),
			}
		},
		want: map[string]string{"a1": "", "b1": ""},
	}, {
		name: "two constraints: both must hold",
		pod: fxPod("p").label("app", "web").spread(zone(1)).
			spread(fxSpread(corev1.LabelHostname, 1, corev1.DoNotSchedule, "web")).obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxApps("web", "w1")...),
				fxNodeInfo(t, fxNode("a2", 0, fxZone, "a")),
				fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxApps("web", "w2")...),
				fxNodeInfo(t, fxNode("b2", 0, fxZone, "b"), fxApps("web", "w3")...),
			}
		},
		// zones a 1, b 2 (min 1): b fails; hosts min 0: a1 1+1 > 1 fails
		want: map[string]string{"a1": skew, "a2": "", "b1": skew, "b2": skew},
	}, {
		name:     "ScheduleAnyway only: skip",
		pod:      fxPod("p").label("app", "web").spread(fxSpread(fxZone, 1, corev1.ScheduleAnyway, "web")).obj(),
		nodes:    threeZones,
		wantSkip: true,
	}, {
		name:     "system defaults are ScheduleAnyway: skip",
		pod:      fxPod("p").label("app", "web").obj(),
		src:      &fxSource{selector: labels.SelectorFromSet(labels.Set{"app": "web"})},
		nodes:    threeZones,
		wantSkip: true,
	}, {
		name: "listed default constraints take the default selector",
		pod:  fxPod("p").label("app", "web").obj(),
		src:  &fxSource{selector: labels.SelectorFromSet(labels.Set{"app": "web"})},
		args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: fxZone, WhenUnsatisfiable: corev1.DoNotSchedule}}},
		nodes: threeZones,
		want:  map[string]string{"a1": skew, "b1": skew, "c1": "", "x1": missing},
	}, {
		name: "listed default constraints without a default selector: skip",
		pod:  fxPod("p").label("app", "web").obj(),
		args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: fxZone, WhenUnsatisfiable: corev1.DoNotSchedule}}},
		nodes:    threeZones,
		wantSkip: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if src == nil {
				src = &fxSource{}
			}
			fw := fxFramework(t, src, fxPlugin{name: PodTopologySpreadName, args: tc.args})
			snap := fxSnapshot(tc.nodes(t)...)
			pod := fxInfo(t, tc.pod)
			state := framework.NewCycleState()
			skip, st := fw.RunPreFilterPlugins(t.Context(), state, pod, snap)
			if !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			if got := skip.Has(PodTopologySpreadName); got != tc.wantSkip {
				t.Fatalf("skipped = %v, want %v", got, tc.wantSkip)
			}
			if tc.wantSkip {
				return
			}
			got := map[string]string{}
			for _, n := range snap.Nodes {
				got[n.Name()] = fxReasons(fw.RunFilterPlugins(t.Context(), state, pod, n))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("filter verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// fxPoolNodes: zones a (2 web) and b (1 web) in pool x, zone c (no web) in pool y.
func fxPoolNodes(t *testing.T) []*framework.NodeInfo {
	return []*framework.NodeInfo{
		fxNodeInfo(t, fxNode("a1", 0, fxZone, "a", "pool", "x"), fxApps("web", "w1", "w2")...),
		fxNodeInfo(t, fxNode("b1", 0, fxZone, "b", "pool", "x"), fxApps("web", "w3")...),
		fxNodeInfo(t, fxNode("c1", 0, fxZone, "c", "pool", "y")),
	}
}

// fxTaintedNodes: zones a (2 web), b (1 web), c (no web, tainted NoSchedule).
func fxTaintedNodes(t *testing.T) []*framework.NodeInfo {
	c := fxNode("c1", 0, fxZone, "c")
	c.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	return []*framework.NodeInfo{
		fxNodeInfo(t, fxNode("a1", 0, fxZone, "a"), fxApps("web", "w1", "w2")...),
		fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"), fxApps("web", "w3")...),
		fxNodeInfo(t, c),
	}
}

// TestPodTopologySpreadAddRemovePod: preemption's what-if moves the counts, a clone is independent.
func TestPodTopologySpreadAddRemovePod(t *testing.T) {
	fw := fxFramework(t, &fxSource{}, fxPlugin{name: PodTopologySpreadName})
	w1, w2 := fxInfo(t, fxPod("w1").label("app", "web").obj()), fxInfo(t, fxPod("w2").label("app", "web").obj())
	a := framework.NewNodeInfo(fxNode("a1", 0, fxZone, "a"))
	a.AddPod(w1)
	a.AddPod(w2)
	b := fxNodeInfo(t, fxNode("b1", 0, fxZone, "b"))
	snap := fxSnapshot(a, b)
	pod := fxPod("p").label("app", "web").spread(fxSpread(fxZone, 1, corev1.DoNotSchedule, "web")).info(t)
	ctx := t.Context()
	state := framework.NewCycleState()
	if _, st := fw.RunPreFilterPlugins(ctx, state, pod, snap); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	verdicts := func(s *framework.CycleState) []bool {
		return []bool{fw.RunFilterPlugins(ctx, s, pod, a).IsSuccess(), fw.RunFilterPlugins(ctx, s, pod, b).IsSuccess()}
	}
	if got := verdicts(state); !cmp.Equal(got, []bool{false, true}) {
		t.Fatalf("before: %v", got)
	}
	what := state.Clone()
	for _, pi := range []*framework.PodInfo{w1, w2} {
		if st := fw.RunPreFilterExtensionRemovePod(ctx, what, pod, pi, a); !st.IsSuccess() {
			t.Fatal(st.Message())
		}
	}
	// a 0, b 0: both fine
	if got := verdicts(what); !cmp.Equal(got, []bool{true, true}) {
		t.Errorf("after removing both: %v", got)
	}
	// a 0, b 2: a fine (0+1-0), b not
	for _, pi := range []*framework.PodInfo{w1, w2} {
		if st := fw.RunPreFilterExtensionAddPod(ctx, what, pod, pi, b); !st.IsSuccess() {
			t.Fatal(st.Message())
		}
	}
	if got := verdicts(what); !cmp.Equal(got, []bool{true, false}) {
		t.Errorf("after adding both to b: %v", got)
	}
	if got := verdicts(state); !cmp.Equal(got, []bool{false, true}) {
		t.Errorf("original changed by its clone: %v", got)
	}
}

func TestPodTopologySpreadScore(t *testing.T) {
	hosts := func(t *testing.T) []*framework.NodeInfo {
		return []*framework.NodeInfo{
			fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxApps("web", "w1", "w2")...),
			fxNodeInfo(t, fxNode("n2", 0, fxZone, "a"), fxApps("web", "w3")...),
			fxNodeInfo(t, fxNode("n3", 0, fxZone, "b")),
			fxNodeInfo(t, fxNode("n4", 0)),
		}
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		src   *fxSource
		args  runtime.Object
		nodes func(t *testing.T) []*framework.NodeInfo
		want  map[string]int64
	}{{
		name:  "hostname, maxSkew 1: fewer matching pods on the node scores higher",
		pod:   fxPod("p").label("app", "web").spread(fxSpread(corev1.LabelHostname, 1, corev1.ScheduleAnyway, "web")).obj(),
		nodes: hosts,
		// weight log(4+2): raw n1 round(2*1.79)=4, n2 2, n3 0, n4 0 -> 100*(4-s)/4
		want: map[string]int64{"n1": 0, "n2": 50, "n3": 100, "n4": 100},
	}, {
		name:  "zone: a node missing the key is ignored (0)",
		pod:   fxPod("p").label("app", "web").spread(fxSpread(fxZone, 1, corev1.ScheduleAnyway, "web")).obj(),
		nodes: hosts,
		// weight log(2+2): raw a round(3*1.386)=4, b 0
		want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 0},
	}, {
		name:  "system defaults: the default selector, nodes without a zone still spread by host",
		pod:   fxPod("p").label("app", "web").obj(),
		src:   &fxSource{selector: labels.SelectorFromSet(labels.Set{"app": "web"})},
		nodes: hosts,
		// host weight log(6), maxSkew 3: n1 2*1.79+2=5.58, n2 1.79+2=3.79, n3 2, n4 2
		// zone weight log(3+2) ("" counts as a domain), maxSkew 5: a 3*1.61+4=8.83, b 4, no zone: none
		// n1 round(14.41)=14, n2 round(12.62)=13, n3 6, n4 2 -> 100*(16-s)/14
		want: map[string]int64{"n1": 14, "n2": 21, "n3": 71, "n4": 100},
	}, {
		name:  "system defaults without a default selector: skip",
		pod:   fxPod("p").label("app", "web").obj(),
		nodes: hosts,
		want:  map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if src == nil {
				src = &fxSource{}
			}
			fw := fxFramework(t, src, fxPlugin{name: PodTopologySpreadName, args: tc.args})
			snap := fxSnapshot(tc.nodes(t)...)
			scores, st := fw.RunScorePlugins(t.Context(), framework.NewCycleState(), fxInfo(t, tc.pod), snap, snap.Nodes)
			if !st.IsSuccess() {
				t.Fatalf("score: %s", st.Message())
			}
			got := map[string]int64{}
			for _, s := range scores {
				got[s.Name] = s.Score
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodTopologySpreadArgs(t *testing.T) {
	c := func(key string, skew int32, action corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: skew, WhenUnsatisfiable: action}
	}
	withSelector := c(fxZone, 1, corev1.DoNotSchedule)
	withSelector.LabelSelector = &metav1.LabelSelector{}
	tests := []struct {
		name    string
		args    runtime.Object
		wantErr bool
	}{
		{name: "nil", args: nil},
		{name: "system", args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.SystemDefaulting}},
		{name: "system with constraints", wantErr: true, args: &configv1.PodTopologySpreadArgs{
			DefaultConstraints: []corev1.TopologySpreadConstraint{c(fxZone, 1, corev1.DoNotSchedule)}}},
		{name: "list", args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{c(fxZone, 1, corev1.DoNotSchedule), c(fxZone, 2, corev1.ScheduleAnyway)}}},
		{name: "duplicate", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{c(fxZone, 1, corev1.DoNotSchedule), c(fxZone, 2, corev1.DoNotSchedule)}}},
		{name: "maxSkew 0", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{c(fxZone, 0, corev1.DoNotSchedule)}}},
		{name: "no key", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{c("", 1, corev1.DoNotSchedule)}}},
		{name: "selector", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{withSelector}}},
		{name: "bad action", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{c(fxZone, 1, "Sometimes")}}},
		{name: "bad type", wantErr: true, args: &configv1.PodTopologySpreadArgs{DefaultingType: "Mine"}},
		{name: "wrong args", wantErr: true, args: &configv1.InterPodAffinityArgs{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newPodTopologySpread(tc.args, &framework.Framework{})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestPodTopologySpreadEvents(t *testing.T) {
	fw := fxFramework(t, &fxSource{}, fxPlugin{name: PodTopologySpreadName})
	for ev, want := range map[framework.ClusterEvent]bool{
		{Resource: framework.EventPod, ActionType: framework.Add}:                    true,
		{Resource: framework.EventPod, ActionType: framework.Delete}:                 true,
		{Resource: framework.EventPod, ActionType: framework.UpdatePodLabel}:         true,
		{Resource: framework.EventNode, ActionType: framework.Delete}:                true,
		{Resource: framework.EventNode, ActionType: framework.UpdateNodeTaint}:       true,
		{Resource: framework.EventNode, ActionType: framework.UpdateNodeAllocatable}: false,
	} {
		if got := fw.MayHelp(sets.New(PodTopologySpreadName), ev); got != want {
			t.Errorf("MayHelp(%+v) = %v, want %v", ev, got, want)
		}
	}
}

// TestPodTopologySpreadSkewProperty: over random clusters, a node passes the filter exactly when placing the
// pod there keeps its domain within maxSkew of the least-loaded eligible domain (0 while fewer than minDomains
// are eligible); in particular a passing node never takes the skew of the node's domain over maxSkew. It holds
// after random AddPod/RemovePod what-ifs too (the counts and minima are maintained exactly).
func TestPodTopologySpreadSkewProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		zones := []string{"a", "b", "c", "d"}
		var nodes []*framework.NodeInfo
		for i := range rapid.IntRange(1, 8).Draw(rt, "nodes") {
			kv := []string{"pool", rapid.SampledFrom([]string{"x", "y"}).Draw(rt, fmt.Sprint("pool", i))}
			if rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("haszone", i)) > 0 {
				kv = append(kv, fxZone, rapid.SampledFrom(zones).Draw(rt, fmt.Sprint("zone", i)))
			}
			ni := framework.NewNodeInfo(fxNode(fmt.Sprint("n", i), 0, kv...))
			for j := range rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("pods", i)) {
				ni.AddPod(fxPropPod(rt, fmt.Sprintf("p%d-%d", i, j)))
			}
			nodes = append(nodes, ni)
		}
		c := fxSpread(fxZone, int32(rapid.IntRange(1, 3).Draw(rt, "maxSkew")), corev1.DoNotSchedule, "web")
		minDomains := int32(rapid.IntRange(1, 4).Draw(rt, "minDomains"))
		c.MinDomains = &minDomains
		pb := fxPod("incoming").label("app", rapid.SampledFrom([]string{"web", "db"}).Draw(rt, "app")).spread(c)
		if rapid.Bool().Draw(rt, "selector") {
			pb.nodeSelector("pool", "x")
		}
		pod := fxInfo(rt, pb.obj())
		snap := fxSnapshot(nodes...)
		fw := fxFramework(rt, &fxSource{}, fxPlugin{name: PodTopologySpreadName})
		state := framework.NewCycleState()
		if _, st := fw.RunPreFilterPlugins(rt.Context(), state, pod, snap); !st.IsSuccess() {
			rt.Fatalf("PreFilter: %s", st.Message())
		}
		fxCheckSkew(rt, fw, state, pod, nodes, c)

		// What-ifs on clones: remove and add pods on random nodes, then check again on the changed cluster.
		state = state.Clone()
		for i := range nodes {
			nodes[i] = nodes[i].Clone()
		}
		for k := range rapid.IntRange(0, 10).Draw(rt, "ops") {
			n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, fmt.Sprint("opnode", k))]
			if len(n.Pods) > 0 && rapid.Bool().Draw(rt, fmt.Sprint("remove", k)) {
				pi := n.Pods[rapid.IntRange(0, len(n.Pods)-1).Draw(rt, fmt.Sprint("victim", k))]
				if err := n.RemovePod(pi.Pod.UID); err != nil {
					rt.Fatal(err)
				}
				fw.RunPreFilterExtensionRemovePod(rt.Context(), state, pod, pi, n)
				continue
			}
			pi := fxPropPod(rt, fmt.Sprint("added", k))
			n.AddPod(pi)
			fw.RunPreFilterExtensionAddPod(rt.Context(), state, pod, pi, n)
		}
		fxCheckSkew(rt, fw, state, pod, nodes, c)
	})
}

func fxPropPod(rt *rapid.T, name string) *framework.PodInfo {
	pb := fxPod(name).label("app", rapid.SampledFrom([]string{"web", "db"}).Draw(rt, name+"/app"))
	if rapid.IntRange(0, 4).Draw(rt, name+"/ns") == 0 {
		pb.ns("other")
	}
	return fxInfo(rt, pb.obj())
}

// fxCheckSkew compares the filter with a brute-force count over nodes.
func fxCheckSkew(rt *rapid.T, fw *framework.Framework, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo, c corev1.TopologySpreadConstraint) {
	counts := map[string]int{} // eligible domains
	for _, n := range nodes {
		z, ok := n.Node().Labels[fxZone]
		if !ok || (pod.Pod.Spec.NodeSelector != nil && n.Node().Labels["pool"] != pod.Pod.Spec.NodeSelector["pool"]) {
			continue
		}
		counts[z] += 0
		for _, p := range n.Pods {
			if p.Pod.Namespace == pod.Pod.Namespace && p.Pod.Labels["app"] == "web" {
				counts[z]++
			}
		}
	}
	globalMin := 0
	if len(counts) >= int(*c.MinDomains) {
		globalMin = int(^uint(0) >> 1)
		for _, v := range counts {
			globalMin = min(globalMin, v)
		}
	}
	self := 0
	if pod.Pod.Labels["app"] == "web" {
		self = 1
	}
	for _, n := range nodes {
		st := fw.RunFilterPlugins(rt.Context(), state, pod, n)
		z, ok := n.Node().Labels[fxZone]
		want := ok && counts[z]+self-globalMin <= int(c.MaxSkew)
		if st.IsSuccess() != want {
			rt.Fatalf("node %s (zone %q): filter %q, want pass=%v (counts %v, min %d, self %d, maxSkew %d)",
				n.Name(), z, st.Message(), want, counts, globalMin, self, c.MaxSkew)
		}
	}
}

// TestPodTopologySpreadCountCache: counts are cached by node state; a pod added to the node (a new generation)
// is counted, and a clone changed apart from the cached original is not answered from the original's count.
func TestPodTopologySpreadCountCache(t *testing.T) {
	p := &podTopologySpread{counts: newPTSCountCache(ptsCountCacheMax)}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	c := &ptsConstraint{selector: sel, selKey: sel.String()}
	c.question = p.question("default", c.selKey)
	web := func(name string) *framework.PodInfo {
		pi, err := framework.NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			UID: types.UID(name), Labels: map[string]string{"app": "web"}}})
		if err != nil {
			t.Fatal(err)
		}
		return pi
	}
	ni := framework.NewNodeInfo(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	ni.AddPod(web("a"))
	clone := ni.Clone()
	if got := p.countMatching(ni, c, "default"); got != 1 {
		t.Fatalf("count %d, want 1", got)
	}
	ni.AddPod(web("b"))
	if got := p.countMatching(ni, c, "default"); got != 2 {
		t.Fatalf("after a pod was added: %d, want 2", got)
	}
	if got := p.countMatching(clone, c, "default"); got != 1 {
		t.Fatalf("the clone from before: %d, want 1", got)
	}
	clone.AddPod(web("c"))
	clone.AddPod(web("d"))
	if got := p.countMatching(clone, c, "default"); got != 3 {
		t.Fatalf("the clone changed apart: %d, want 3", got)
	}
	other := *c
	other.question = p.question("other", c.selKey)
	if got := p.countMatching(ni, &other, "other"); got != 0 {
		t.Fatalf("another namespace: %d, want 0", got)
	}
	// Updates in place: a status change keeps the pod set (and the cached answer), a label or deletion change
	// is counted.
	update := func(name string, change func(*corev1.Pod)) {
		t.Helper()
		i := slices.IndexFunc(ni.Pods, func(pi *framework.PodInfo) bool { return pi.Pod.Name == name })
		pod := ni.Pods[i].Pod.DeepCopy()
		change(pod)
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := ni.UpdatePod(pi); err != nil {
			t.Fatal(err)
		}
	}
	setGen := ni.PodSetGeneration
	update("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	if ni.PodSetGeneration != setGen {
		t.Fatal("a status update took a new pod set generation: the cached counts would be recomputed for nothing")
	}
	if got := p.countMatching(ni, c, "default"); got != 2 {
		t.Fatalf("after a status update: %d, want 2", got)
	}
	update("a", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} })
	if got := p.countMatching(ni, c, "default"); got != 1 {
		t.Fatalf("after a pod's labels changed: %d, want 1", got)
	}
	update("b", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} })
	if got := p.countMatching(ni, c, "default"); got != 0 {
		t.Fatalf("after a pod was marked for deletion: %d, want 0", got)
	}
}

// TestPodTopologySpreadDefaultsAreCached: the system default constraints take the owner's selector, and the
// count cache keys on that selector (two workloads never share counts, and neither goes uncached).
func TestPodTopologySpreadDefaultsAreCached(t *testing.T) {
	keys := map[string]string{}
	for _, app := range []string{"web", "db"} {
		src := &fxSource{selector: labels.SelectorFromSet(labels.Set{"app": app})}
		fw := fxFramework(t, src, fxPlugin{name: "PodTopologySpread"})
		p := fw.PreScore[0].(*podTopologySpread)
		cs, err := p.constraints(fxPod("p").label("app", app).obj(), "c1", corev1.ScheduleAnyway)
		if err != nil || len(cs) == 0 {
			t.Fatalf("%s: constraints %v, %v; want the system defaults", app, cs, err)
		}
		for _, c := range cs {
			if c.selKey == "" || c.selKey != c.selector.String() || c.question == 0 {
				t.Fatalf("%s: constraint on %s keyed %q (question %d) for selector %q", app, c.key, c.selKey, c.question, c.selector)
			}
		}
		keys[app] = fmt.Sprint(cs[0].selKey, cs[0].question)
	}
	if keys["web"] == keys["db"] {
		t.Fatalf("two workloads share the count cache key %q", keys["web"])
	}
}

// TestPTSCountCacheStartsOverWhenFull: the count cache answers what was put, from any goroutine, and drops
// everything once past its bound.
func TestPTSCountCacheStartsOverWhenFull(t *testing.T) {
	c := newPTSCountCache(1000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k := ptsCountKey{gen: int64(g*1000 + i), question: 7}
				c.put(k, i)
				if n, ok := c.get(k); !ok || n != i {
					t.Errorf("key %v: %d %v, want %d", k, n, ok, i)
				}
			}
		})
	}
	wg.Wait()
	if n, ok := c.get(ptsCountKey{gen: 3199, question: 7}); !ok || n != 199 {
		t.Fatalf("after 800 puts: %d %v", n, ok)
	}
	for i := range 201 {
		c.put(ptsCountKey{gen: int64(10_000 + i), question: 1}, i)
	}
	if _, ok := c.get(ptsCountKey{gen: 3199, question: 7}); ok {
		t.Fatal("a count outlived the cache's reset past its bound")
	}
	if n, ok := c.get(ptsCountKey{gen: 10_200, question: 1}); !ok || n != 200 {
		t.Fatalf("the count put after the reset: %d %v", n, ok)
	}
}
