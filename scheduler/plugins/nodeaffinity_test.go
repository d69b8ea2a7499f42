package plugins

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

func naExpr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// naTerm is a node selector term of label expressions (ANDed).
func naTerm(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func naNodeAffinity(b *fxPodB) *corev1.NodeAffinity {
	a := b.affinity()
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	return a.NodeAffinity
}

// require sets the pod's required node affinity to terms (ORed); no terms leaves an empty, non-nil selector.
func (b *fxPodB) require(terms ...corev1.NodeSelectorTerm) *fxPodB {
	naNodeAffinity(b).RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	return b
}

func (b *fxPodB) prefer(weight int32, term corev1.NodeSelectorTerm) *fxPodB {
	na := naNodeAffinity(b)
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.PreferredSchedulingTerm{Weight: weight, Preference: term})
	return b
}

// naNodes are nodes with the given labels ("name": key, value, ...).
func naNodes(t *testing.T, labels map[string][]string) []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for name, kv := range labels {
		out = append(out, fxNodeInfo(t, fxNode(name, 0, kv...)))
	}
	return out
}

// TestNodeAffinityFilter follows upstream's nodeaffinity Filter tests: nodeSelector and required node
// affinity must both match (terms ORed, expressions within a term ANDed), an empty terms list or an empty
// term matches nothing, and the profile's addedAffinity is checked first with its own message. The verdicts
// are the same whether PreFilter ran or not.
func TestNodeAffinityFilter(t *testing.T) {
	const (
		pod     = "UnschedulableAndUnresolvable: node(s) didn't match Pod's node affinity/selector"
		enforce = "UnschedulableAndUnresolvable: node(s) didn't match scheduler-enforced node affinity"
	)
	nodes := map[string][]string{
		"foo-bar":  {"foo", "bar"},
		"foo-baz":  {"foo", "baz", "kernel", "0206"},
		"gpu-zone": {"gpu", "true", "zone", "a", "kernel", "0198"},
		"bare":     nil,
	}
	added := func(terms ...corev1.NodeSelectorTerm) runtime.Object {
		return &configv1.NodeAffinityArgs{AddedAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	tests := []struct {
		name string
		args runtime.Object
		pod  *corev1.Pod
		want map[string]string
	}{{
		name: "no selector, no affinity",
		pod:  fxPod("p").obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": "", "gpu-zone": "", "bare": ""},
	}, {
		name: "affinity without node affinity",
		pod:  fxPod("p").podAffinity(fxZone, "app", "x").obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": "", "gpu-zone": "", "bare": ""},
	}, {
		name: "nodeSelector",
		pod:  fxPod("p").nodeSelector("foo", "bar").obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "an empty nodeSelector matches every node",
		pod:  fxPod("p").nodeSelector().obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": "", "gpu-zone": "", "bare": ""},
	}, {
		name: "In",
		pod:  fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpIn, "bar", "value2"))).obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "NotIn matches nodes without the key",
		pod:  fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpNotIn, "bar"))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": "", "gpu-zone": "", "bare": ""},
	}, {
		name: "Exists",
		pod:  fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpExists))).obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": "", "gpu-zone": pod, "bare": pod},
	}, {
		name: "DoesNotExist",
		pod:  fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpDoesNotExist))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": "", "bare": ""},
	}, {
		name: "Gt and Lt compare integers",
		pod:  fxPod("p").require(naTerm(naExpr("kernel", corev1.NodeSelectorOpGt, "0200"), naExpr("kernel", corev1.NodeSelectorOpLt, "300"))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": "", "gpu-zone": pod, "bare": pod},
	}, {
		name: "Gt with a value that is not an integer matches nothing",
		pod:  fxPod("p").require(naTerm(naExpr("kernel", corev1.NodeSelectorOpGt, "abc"))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "expressions of a term are ANDed",
		pod:  fxPod("p").require(naTerm(naExpr("gpu", corev1.NodeSelectorOpIn, "true"), naExpr("zone", corev1.NodeSelectorOpIn, "b"))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "terms are ORed",
		pod: fxPod("p").require(naTerm(naExpr("gpu", corev1.NodeSelectorOpIn, "true")),
			naTerm(naExpr("foo", corev1.NodeSelectorOpIn, "baz"))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": "", "gpu-zone": "", "bare": pod},
	}, {
		name: "nodeSelector and affinity must both match",
		pod:  fxPod("p").nodeSelector("foo", "bar").require(naTerm(naExpr("kernel", corev1.NodeSelectorOpExists))).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "an empty terms list matches nothing",
		pod:  fxPod("p").require().obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "a term without expressions matches nothing",
		pod:  fxPod("p").require(naTerm()).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": pod},
	}, {
		name: "matchFields on metadata.name",
		pod: fxPod("p").require(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			naExpr("metadata.name", corev1.NodeSelectorOpIn, "bare")}}).obj(),
		want: map[string]string{"foo-bar": pod, "foo-baz": pod, "gpu-zone": pod, "bare": ""},
	}, {
		name: "addedAffinity applies to every pod",
		args: added(naTerm(naExpr("foo", corev1.NodeSelectorOpExists))),
		pod:  fxPod("p").obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": "", "gpu-zone": enforce, "bare": enforce},
	}, {
		name: "addedAffinity is checked before the pod's own",
		args: added(naTerm(naExpr("foo", corev1.NodeSelectorOpExists))),
		pod:  fxPod("p").nodeSelector("foo", "bar").obj(),
		want: map[string]string{"foo-bar": "", "foo-baz": pod, "gpu-zone": enforce, "bare": enforce},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bothWays(t, func(t *testing.T, withoutPre bool) {
				got := nbVerdicts(t, fxPlugin{name: NodeAffinityName, args: tc.args}, withoutPre, tc.pod, naNodes(t, nodes)...)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("verdicts (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestNodeAffinityPreFilterSkip: a pod with nothing required of nodes, in a profile without addedAffinity,
// skips NodeAffinity's Filter.
func TestNodeAffinityPreFilterSkip(t *testing.T) {
	addedArgs := &configv1.NodeAffinityArgs{AddedAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{naTerm(naExpr("foo", corev1.NodeSelectorOpExists))}}}}
	tests := []struct {
		name string
		args runtime.Object
		pod  *corev1.Pod
		want bool
	}{
		{name: "nothing required", pod: fxPod("p").obj(), want: true},
		{name: "preferred only", pod: fxPod("p").prefer(1, naTerm(naExpr("foo", corev1.NodeSelectorOpExists))).obj(), want: true},
		{name: "nodeSelector", pod: fxPod("p").nodeSelector("foo", "bar").obj()},
		{name: "required affinity", pod: fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpExists))).obj()},
		{name: "addedAffinity", args: addedArgs, pod: fxPod("p").obj()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := fxFramework(t, &fxSource{}, fxPlugin{name: NodeAffinityName, args: tc.args})
			skip, st := fw.RunPreFilterPlugins(t.Context(), framework.NewCycleState(), fxInfo(t, tc.pod), fxSnapshot())
			if !st.IsSuccess() {
				t.Fatal(fxReasons(st))
			}
			if got := skip.Has(NodeAffinityName); got != tc.want {
				t.Errorf("skipped %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeAffinityScore follows upstream's nodeaffinity Score tests: a node scores the weights of the
// preferred terms it matches (the pod's and the profile's addedAffinity), normalized so that the best node
// has 100. The scores are the same whether PreScore ran or not.
func TestNodeAffinityScore(t *testing.T) {
	prefs := func(b *fxPodB) *fxPodB {
		return b.prefer(2, naTerm(naExpr("foo", corev1.NodeSelectorOpIn, "bar"))).
			prefer(4, naTerm(naExpr("key", corev1.NodeSelectorOpIn, "value"))).
			prefer(5, naTerm(naExpr("foo", corev1.NodeSelectorOpIn, "bar"), naExpr("key", corev1.NodeSelectorOpIn, "value"),
				naExpr("az", corev1.NodeSelectorOpIn, "az1")))
	}
	nodes := map[string][]string{
		"n1": {"foo", "bar"},
		"n2": {"key", "value"},
		"n3": {"az", "az1"},
		"n5": {"foo", "bar", "key", "value", "az", "az1"},
	}
	addedPreferred := &configv1.NodeAffinityArgs{AddedAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 10, Preference: naTerm(naExpr("az", corev1.NodeSelectorOpExists))}}}}
	tests := []struct {
		name     string
		args     runtime.Object
		pod      *corev1.Pod
		wantSkip bool
		want     map[string]int64
	}{{
		name:     "no preferred terms: skipped",
		pod:      fxPod("p").require(naTerm(naExpr("foo", corev1.NodeSelectorOpExists))).obj(),
		wantSkip: true,
		want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n5": 0},
	}, {
		name: "no node matches",
		pod:  fxPod("p").prefer(3, naTerm(naExpr("gpu", corev1.NodeSelectorOpExists))).obj(),
		want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n5": 0},
	}, {
		name: "one node matches",
		pod:  fxPod("p").prefer(3, naTerm(naExpr("key", corev1.NodeSelectorOpIn, "value"), naExpr("az", corev1.NodeSelectorOpDoesNotExist))).obj(),
		want: map[string]int64{"n1": 0, "n2": 100, "n3": 0, "n5": 0},
	}, {
		// raw: n1 2, n2 4, n3 0, n5 2+4+5 = 11
		name: "weights of matching terms add up",
		pod:  prefs(fxPod("p")).obj(),
		want: map[string]int64{"n1": 18, "n2": 36, "n3": 0, "n5": 100},
	}, {
		// raw: n1 2, n2 4, n3 10, n5 21
		name: "addedAffinity's preferred terms add to the pod's",
		args: addedPreferred,
		pod:  prefs(fxPod("p")).obj(),
		want: map[string]int64{"n1": 9, "n2": 19, "n3": 47, "n5": 100},
	}, {
		name: "addedAffinity's preferred terms alone",
		args: addedPreferred,
		pod:  fxPod("p").obj(),
		want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n5": 100},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plugin := fxPlugin{name: NodeAffinityName, args: tc.args}
			if got := nbPreScoreSkips(t, plugin, tc.pod, naNodes(t, nodes)...); got != tc.wantSkip {
				t.Errorf("PreScore skipped %v, want %v", got, tc.wantSkip)
			}
			bothWays(t, func(t *testing.T, withoutPre bool) {
				got := nbScores(t, plugin, withoutPre, tc.pod, naNodes(t, nodes)...)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("scores (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestNodeAffinityArgs(t *testing.T) {
	bad := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: "Bogus"}}}
	tests := []struct {
		name    string
		args    runtime.Object
		wantErr bool
	}{
		{name: "nil", args: nil},
		{name: "no addedAffinity", args: &configv1.NodeAffinityArgs{}},
		{name: "invalid required term", wantErr: true, args: &configv1.NodeAffinityArgs{AddedAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{bad}}}}},
		{name: "invalid preferred term", wantErr: true, args: &configv1.NodeAffinityArgs{AddedAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: bad}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newNodeAffinity(tc.args, &framework.Framework{})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func naTaint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

// TestTaintTolerationFilter: the first NoSchedule or NoExecute taint the pod does not tolerate rules the node
// out, named in the reason; PreferNoSchedule taints are left to scoring.
func TestTaintTolerationFilter(t *testing.T) {
	tests := []struct {
		name   string
		taints []corev1.Taint
		tols   []corev1.Toleration
		want   string
	}{{
		name: "no taints",
		tols: nil,
	}, {
		name:   "an untolerated NoSchedule taint",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoSchedule)},
		want:   "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: user1}",
	}, {
		name:   "an untolerated NoExecute taint",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoExecute)},
		want:   "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: user1}",
	}, {
		name:   "a taint without value",
		taints: []corev1.Taint{naTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)},
		want:   "UnschedulableAndUnresolvable: node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
	}, {
		name:   "tolerated with Equal",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoSchedule)},
		tols:   []corev1.Toleration{nbToleration("dedicated", corev1.TolerationOpEqual, "user1", corev1.TaintEffectNoSchedule)},
	}, {
		name:   "tolerated with an empty operator (Equal)",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoSchedule)},
		tols:   []corev1.Toleration{nbToleration("dedicated", "", "user1", corev1.TaintEffectNoSchedule)},
	}, {
		name:   "another value is not tolerated",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoSchedule)},
		tols:   []corev1.Toleration{nbToleration("dedicated", corev1.TolerationOpEqual, "user2", corev1.TaintEffectNoSchedule)},
		want:   "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: user1}",
	}, {
		name:   "Exists on the key, any effect",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoExecute)},
		tols:   []corev1.Toleration{nbToleration("dedicated", corev1.TolerationOpExists, "", "")},
	}, {
		name:   "an empty key with Exists tolerates everything",
		taints: []corev1.Taint{naTaint("a", "1", corev1.TaintEffectNoSchedule), naTaint("b", "2", corev1.TaintEffectNoExecute)},
		tols:   []corev1.Toleration{nbToleration("", corev1.TolerationOpExists, "", "")},
	}, {
		name:   "a NoSchedule toleration does not cover NoExecute",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectNoExecute)},
		tols:   []corev1.Toleration{nbToleration("dedicated", corev1.TolerationOpEqual, "user1", corev1.TaintEffectNoSchedule)},
		want:   "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: user1}",
	}, {
		name:   "NoExecute tolerated for a while is tolerated",
		taints: []corev1.Taint{naTaint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)},
		tols: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64)}},
	}, {
		name:   "PreferNoSchedule does not filter",
		taints: []corev1.Taint{naTaint("dedicated", "user1", corev1.TaintEffectPreferNoSchedule)},
	}, {
		name: "the first untolerated taint in the node's order is reported",
		taints: []corev1.Taint{naTaint("a", "1", corev1.TaintEffectNoSchedule), naTaint("p", "0", corev1.TaintEffectPreferNoSchedule),
			naTaint("b", "2", corev1.TaintEffectNoExecute), naTaint("c", "3", corev1.TaintEffectNoSchedule)},
		tols: []corev1.Toleration{nbToleration("a", corev1.TolerationOpExists, "", "")},
		want: "UnschedulableAndUnresolvable: node(s) had untolerated taint {b: 2}",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := fxNode("n1", 0)
			node.Spec.Taints = tc.taints
			got := nbVerdicts(t, fxPlugin{name: TaintTolerationName}, false, fxPod("p").tolerate(tc.tols...).obj(), fxNodeInfo(t, node))
			if got["n1"] != tc.want {
				t.Errorf("verdict %q, want %q", got["n1"], tc.want)
			}
		})
	}
}

// TestTaintTolerationScore follows upstream's tainttoleration Score tests: a node scores the number of
// PreferNoSchedule taints the pod does not tolerate (tolerations with another effect do not count),
// normalized in reverse so that the fewest get 100.
func TestTaintTolerationScore(t *testing.T) {
	prefer := corev1.TaintEffectPreferNoSchedule
	node := func(t *testing.T, name string, taints ...corev1.Taint) *framework.NodeInfo {
		n := fxNode(name, 0)
		n.Spec.Taints = taints
		return fxNodeInfo(t, n)
	}
	tests := []struct {
		name  string
		tols  []corev1.Toleration
		nodes func(t *testing.T) []*framework.NodeInfo
		want  map[string]int64
	}{{
		name: "tolerated taints score higher than untolerated ones",
		tols: []corev1.Toleration{nbToleration("foo", corev1.TolerationOpEqual, "bar", prefer)},
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{node(t, "a", naTaint("foo", "bar", prefer)), node(t, "b", naTaint("foo", "blah", prefer))}
		},
		want: map[string]int64{"a": 100, "b": 0},
	}, {
		name: "however many tolerated taints, the same score",
		tols: []corev1.Toleration{nbToleration("cpu-type", corev1.TolerationOpEqual, "arm64", prefer),
			nbToleration("disk-type", corev1.TolerationOpEqual, "ssd", prefer)},
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{node(t, "a"), node(t, "b", naTaint("cpu-type", "arm64", prefer)),
				node(t, "c", naTaint("cpu-type", "arm64", prefer), naTaint("disk-type", "ssd", prefer))}
		},
		want: map[string]int64{"a": 100, "b": 100, "c": 100},
	}, {
		name: "the more untolerated taints, the lower",
		tols: []corev1.Toleration{nbToleration("foo", corev1.TolerationOpEqual, "bar", prefer)},
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{node(t, "a"), node(t, "b", naTaint("cpu-type", "arm64", prefer)),
				node(t, "c", naTaint("cpu-type", "arm64", prefer), naTaint("disk-type", "ssd", prefer))}
		},
		want: map[string]int64{"a": 100, "b": 50, "c": 0},
	}, {
		name: "only PreferNoSchedule taints and tolerations that may apply to them count",
		tols: []corev1.Toleration{nbToleration("cpu-type", corev1.TolerationOpEqual, "arm64", corev1.TaintEffectNoSchedule),
			nbToleration("disk-type", corev1.TolerationOpExists, "", "")},
		nodes: func(t *testing.T) []*framework.NodeInfo {
			return []*framework.NodeInfo{node(t, "a", naTaint("cpu-type", "arm64", corev1.TaintEffectNoSchedule)),
				node(t, "b", naTaint("cpu-type", "arm64", prefer)), node(t, "c", naTaint("disk-type", "ssd", prefer))}
		},
		want: map[string]int64{"a": 100, "b": 0, "c": 100},
	}, {
		name:  "no taints anywhere: all 100",
		nodes: func(t *testing.T) []*framework.NodeInfo { return []*framework.NodeInfo{node(t, "a"), node(t, "b")} },
		want:  map[string]int64{"a": 100, "b": 100},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nbScores(t, fxPlugin{name: TaintTolerationName}, false, fxPod("p").tolerate(tc.tols...).obj(), tc.nodes(t)...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}
