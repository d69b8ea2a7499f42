package plugins

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

func TestInterPodAffinityFilter(t *testing.T) {
	const (
		affinity     = "UnschedulableAndUnresolvable: node(s) didn't match pod affinity rules"
		anti         = "Unschedulable: node(s) didn't match pod anti-affinity rules"
		existingAnti = "Unschedulable: node(s) didn't satisfy existing pods anti-affinity rules"
	)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		nodes    func(t *testing.T) []*framework.NodeInfo
		want     map[string]string
		wantSkip bool
	}{{
		name: "no terms anywhere: skip",
		pod:  fxPod("p").label("app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 0), fxPod("a").label("app", "web").obj())}
		},
		wantSkip: true,
	}, {
		name: "required affinity: the zone of a matching pod; a node without the key never",
		pod:  fxPod("p").podAffinity(fxZone, "app", "db").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "a")),
				fxNodeInfo(t, fxNode("n3", 0, fxZone, "b"), fxPod("web").label("app", "web").obj()),
				fxNodeInfo(t, fxNode("n4", 0)),
			}
		},
		want: map[string]string{"n1": "", "n2": "", "n3": affinity, "n4": affinity},
	}, {
		name: "required affinity matches pods of its own namespace only",
		pod:  fxPod("p").podAffinity(fxZone, "app", "db").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").ns("other").label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "b"), fxPod("db").label("app", "db").obj()),
			}
		},
		want: map[string]string{"n1": affinity, "n2": ""},
	}, {
		name: "first pod of a self-affine group goes anywhere with the key",
		pod:  fxPod("p").label("app", "web").podAffinity(fxZone, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "b")),
				fxNodeInfo(t, fxNode("n3", 0)),
			}
		},
		want: map[string]string{"n1": "", "n2": "", "n3": affinity},
	}, {
		name: "self-affine pod once the group exists: only its zone",
		pod:  fxPod("p").label("app", "web").podAffinity(fxZone, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("w1").label("app", "web").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "b")),
			}
		},
		want: map[string]string{"n1": "", "n2": affinity},
	}, {
		name: "a pod not matching its own affinity is not the first of a group",
		pod:  fxPod("p").label("app", "api").podAffinity(fxZone, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"))}
		},
		want: map[string]string{"n1": affinity},
	}, {
		name: "required anti-affinity by hostname",
		pod:  fxPod("p").label("app", "web").podAntiAffinity(corev1.LabelHostname, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("w1").label("app", "web").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "a")),
			}
		},
		want: map[string]string{"n1": anti, "n2": ""},
	}, {
		name: "existing pods' anti-affinity keeps the pod out of their zone",
		pod:  fxPod("p").label("app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").podAntiAffinity(fxZone, "app", "web").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "a")),
				fxNodeInfo(t, fxNode("n3", 0, fxZone, "b")),
				fxNodeInfo(t, fxNode("n4", 0)),
			}
		},
		want: map[string]string{"n1": existingAnti, "n2": existingAnti, "n3": "", "n4": ""},
	}, {
		name: "existing anti-affinity not matching the pod: skip",
		pod:  fxPod("p").label("app", "api").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").podAntiAffinity(fxZone, "app", "web").obj()),
			}
		},
		wantSkip: true,
	}, {
		name: "affinity is checked before anti-affinity",
		pod:  fxPod("p").label("app", "web").podAffinity(fxZone, "app", "db").podAntiAffinity(corev1.LabelHostname, "app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").obj(), fxPod("w").label("app", "web").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "a")),
				fxNodeInfo(t, fxNode("n3", 0, fxZone, "b"), fxPod("w2").label("app", "web").obj()),
			}
		},
		want: map[string]string{"n1": anti, "n2": "", "n3": affinity},
	}, {
		name: "namespaceSelector terms match by the namespace's labels",
		pod: func() *corev1.Pod {
			p := fxPod("p").obj()
			term := fxTerm(fxZone, "app", "db")
			term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "t-data"}}
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
			return p
		}(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "b"), fxPod("db").ns("data").label("app", "db").obj()),
			}
		},
		want: map[string]string{"n1": affinity, "n2": ""},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := fxFramework(t, &fxSource{}, fxPlugin{name: InterPodAffinityName})
			snap := fxSnapshot(tc.nodes(t)...)
			pod := fxInfo(t, tc.pod)
			state := framework.NewCycleState()
			skip, st := fw.RunPreFilterPlugins(t.Context(), state, pod, snap)
			if !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			if got := skip.Has(InterPodAffinityName); got != tc.wantSkip {
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

// TestInterPodAffinityAddRemovePod drives preemption's what-if: taking the pods the incoming pod objects to
// off a node lifts the rejection, putting them back restores it, and a clone of the state is independent.
func TestInterPodAffinityAddRemovePod(t *testing.T) {
	fw := fxFramework(t, &fxSource{}, fxPlugin{name: InterPodAffinityName})
	guard := fxInfo(t, fxPod("guard").label("app", "db").podAntiAffinity(fxZone, "app", "web").obj())
	web := fxInfo(t, fxPod("w1").label("app", "web").obj())
	n1 := framework.NewNodeInfo(fxNode("n1", 0, fxZone, "a"))
	n1.AddPod(guard)
	n1.AddPod(web)
	n2 := fxNodeInfo(t, fxNode("n2", 0, fxZone, "a"))
	snap := fxSnapshot(n1, n2)
	pod := fxPod("p").label("app", "web").podAntiAffinity(corev1.LabelHostname, "app", "web").info(t)
	ctx := t.Context()

	state := framework.NewCycleState()
	if _, st := fw.RunPreFilterPlugins(ctx, state, pod, snap); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	verdicts := func(s *framework.CycleState, nodes ...*framework.NodeInfo) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, fxReasons(fw.RunFilterPlugins(ctx, s, pod, n)))
		}
		return out
	}
	before := verdicts(state, n1, n2)

	what := state.Clone()
	n1c := n1.Clone()
	for _, pi := range []*framework.PodInfo{guard, web} {
		if err := n1c.RemovePod(pi.Pod.UID); err != nil {
			t.Fatal(err)
		}
		if st := fw.RunPreFilterExtensionRemovePod(ctx, what, pod, pi, n1c); !st.IsSuccess() {
			t.Fatal(st.Message())
		}
	}
	if got := verdicts(what, n1c, n2); !cmp.Equal(got, []string{"", ""}) {
		t.Errorf("after removing guard and web: %q, want both feasible", got)
	}
	n1c.AddPod(web)
	if st := fw.RunPreFilterExtensionAddPod(ctx, what, pod, web, n1c); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if got, want := verdicts(what, n1c, n2), []string{"Unschedulable: node(s) didn't match pod anti-affinity rules", ""}; !cmp.Equal(got, want) {
		t.Errorf("after adding web back: %q, want %q", got, want)
	}
	if got := verdicts(state, n1, n2); !cmp.Equal(got, before) {
		t.Errorf("original state changed by its clone: %q, want %q", got, before)
	}
}

func TestInterPodAffinityScore(t *testing.T) {
	nodes := func(t *testing.T) []*framework.NodeInfo {
		return []*framework.NodeInfo{
			fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("db").label("app", "db").obj()),
			fxNodeInfo(t, fxNode("n2", 0, fxZone, "b"), fxPod("cache").label("app", "cache").obj()),
			fxNodeInfo(t, fxNode("n3", 0, fxZone, "c")),
			fxNodeInfo(t, fxNode("n4", 0)),
		}
	}
	withHardAffinity := func(t *testing.T) []*framework.NodeInfo {
		return []*framework.NodeInfo{
			fxNodeInfo(t, fxNode("n1", 0, fxZone, "a")),
			fxNodeInfo(t, fxNode("n2", 0, fxZone, "b"), fxPod("fan").podAffinity(fxZone, "app", "web").obj()),
			fxNodeInfo(t, fxNode("n3", 0, fxZone, "c"), fxPod("pref").preferAffinity(3, fxZone, "app", "web").obj()),
		}
	}
	weight := func(w int32) runtime.Object { return &configv1.InterPodAffinityArgs{HardPodAffinityWeight: &w} }
	tests := []struct {
		name  string
		args  runtime.Object
		pod   *corev1.Pod
		nodes func(t *testing.T) []*framework.NodeInfo
		want  map[string]int64
	}{{
		name: "preferred affinity and anti-affinity of the incoming pod",
		pod:  fxPod("p").preferAffinity(10, fxZone, "app", "db").preferAntiAffinity(5, fxZone, "app", "cache").obj(),
		// raw: a 10, b -5, c 0, no zone 0 -> (s+5)*100/15
		nodes: nodes,
		want:  map[string]int64{"n1": 100, "n2": 0, "n3": 33, "n4": 33},
	}, {
		name:  "existing pods' required affinity counts hardPodAffinityWeight (default 1), preferred their weight",
		pod:   fxPod("p").label("app", "web").obj(),
		nodes: withHardAffinity,
		// raw: a 0, b 1, c 3
		want: map[string]int64{"n1": 0, "n2": 33, "n3": 100},
	}, {
		name:  "hardPodAffinityWeight 10",
		args:  weight(10),
		pod:   fxPod("p").label("app", "web").obj(),
		nodes: withHardAffinity,
		want:  map[string]int64{"n1": 0, "n2": 100, "n3": 30},
	}, {
		name:  "ignorePreferredTermsOfExistingPods without own preferred terms: skip",
		args:  &configv1.InterPodAffinityArgs{IgnorePreferredTermsOfExistingPods: true},
		pod:   fxPod("p").label("app", "web").obj(),
		nodes: withHardAffinity,
		want:  map[string]int64{"n1": 0, "n2": 0, "n3": 0},
	}, {
		name: "existing pods' preferred anti-affinity pushes away",
		pod:  fxPod("p").label("app", "web").obj(),
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{
				fxNodeInfo(t, fxNode("n1", 0, fxZone, "a"), fxPod("x").preferAntiAffinity(7, fxZone, "app", "web").obj()),
				fxNodeInfo(t, fxNode("n2", 0, fxZone, "b")),
			}
		},
		want: map[string]int64{"n1": 0, "n2": 100},
	}, {
		name:  "nothing to score: skip",
		pod:   fxPod("p").obj(),
		nodes: nodes,
		want:  map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := fxFramework(t, &fxSource{}, fxPlugin{name: InterPodAffinityName, args: tc.args})
			snap := fxSnapshot(tc.nodes(t)...)
			pod := fxInfo(t, tc.pod)
			scores, st := fw.RunScorePlugins(t.Context(), framework.NewCycleState(), pod, snap, snap.Nodes)
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

func TestInterPodAffinityArgs(t *testing.T) {
	w := func(v int32) *int32 { return &v }
	tests := []struct {
		name    string
		args    runtime.Object
		wantErr bool
	}{
		{name: "nil", args: nil},
		{name: "typed nil", args: (*configv1.InterPodAffinityArgs)(nil)},
		{name: "weight 100", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: w(100)}},
		{name: "weight 101", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: w(101)}, wantErr: true},
		{name: "weight -1", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: w(-1)}, wantErr: true},
		{name: "wrong type", args: &configv1.NodeAffinityArgs{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newInterPodAffinity(tc.args, &framework.Framework{})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestInterPodAffinityEvents(t *testing.T) {
	fw := fxFramework(t, &fxSource{}, fxPlugin{name: InterPodAffinityName})
	for ev, want := range map[framework.ClusterEvent]bool{
		{Resource: framework.EventPod, ActionType: framework.Add}:                true,
		{Resource: framework.EventPod, ActionType: framework.Delete}:             true,
		{Resource: framework.EventPod, ActionType: framework.UpdatePodLabel}:     true,
		{Resource: framework.EventNode, ActionType: framework.Add}:               true,
		{Resource: framework.EventNode, ActionType: framework.UpdateNodeLabel}:   true,
		{Resource: framework.EventNode, ActionType: framework.UpdateNodeTaint}:   false,
		{Resource: framework.EventPod, ActionType: framework.UpdatePodScaleDown}: false,
	} {
		if got := fw.MayHelp(sets.New(InterPodAffinityName), ev); got != want {
			t.Errorf("MayHelp(%+v) = %v, want %v", ev, got, want)
		}
	}
}
