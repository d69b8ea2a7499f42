package plugins

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// Helpers shared by the node plugin tests (NodeUnschedulable, NodeName, NodePorts, NodeAffinity,
// TaintToleration, NodeResourcesFit, NodeResourcesBalancedAllocation): each plugin runs alone in a real
// framework.Framework, with its PreFilter / PreScore as in the default profile or without them as in a
// profile that disables those extension points (upstream's plugins fall back to computing in Filter / Score).

// nbVerdicts runs plugin's PreFilter (unless withoutPre) and Filter for pod on every node: each node's
// verdict as fxReasons.
func nbVerdicts(t *testing.T, plugin fxPlugin, withoutPre bool, pod *corev1.Pod, nodes ...*framework.NodeInfo) map[string]string {
	t.Helper()
	fw := fxFramework(t, &fxSource{}, plugin)
	if withoutPre {
		fw.PreFilter = nil
	}
	_, statuses, _, st := fxFilter(t, fw, fxInfo(t, pod), fxSnapshot(nodes...))
	if !st.IsSuccess() {
		t.Fatalf("PreFilter: %s", fxReasons(st))
	}
	got := map[string]string{}
	for _, n := range nodes {
		got[n.Name()] = fxReasons(statuses[n.Name()])
	}
	return got
}

// nbScores runs plugin's PreScore (unless withoutPre), Score and normalization for pod on nodes, weight 1.
func nbScores(t *testing.T, plugin fxPlugin, withoutPre bool, pod *corev1.Pod, nodes ...*framework.NodeInfo) map[string]int64 {
	t.Helper()
	fw := fxFramework(t, &fxSource{}, plugin)
	if withoutPre {
		fw.PreScore = nil
	}
	snap := fxSnapshot(nodes...)
	scores, st := fw.RunScorePlugins(t.Context(), framework.NewCycleState(), fxInfo(t, pod), snap, snap.Nodes)
	if !st.IsSuccess() {
		t.Fatalf("score: %s", fxReasons(st))
	}
	got := map[string]int64{}
	for _, s := range scores {
		got[s.Name] = s.Score
	}
	return got
}

// nbPreScoreSkips tells whether plugin's PreScore asks to be skipped for pod.
func nbPreScoreSkips(t *testing.T, plugin fxPlugin, pod *corev1.Pod, nodes ...*framework.NodeInfo) bool {
	t.Helper()
	fw := fxFramework(t, &fxSource{}, plugin)
	if len(fw.PreScore) != 1 {
		t.Fatalf("%s has no PreScore", plugin.name)
	}
	st := fw.PreScore[0].PreScore(t.Context(), framework.NewCycleState(), fxInfo(t, pod), fxSnapshot(nodes...), nodes)
	if !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreScore: %s", fxReasons(st))
	}
	return st.IsSkip()
}

// bothWays runs check with and without the plugin's PreFilter / PreScore.
func bothWays(t *testing.T, check func(t *testing.T, withoutPre bool)) {
	for _, withoutPre := range []bool{false, true} {
		t.Run(map[bool]string{false: "with pre", true: "without pre"}[withoutPre], func(t *testing.T) { check(t, withoutPre) })
	}
}

func nbToleration(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
}

func (b *fxPodB) tolerate(tols ...corev1.Toleration) *fxPodB {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, tols...)
	return b
}

func TestNodeUnschedulableFilter(t *testing.T) {
	const reason = "UnschedulableAndUnresolvable: node(s) were unschedulable"
	cordoned := func() *corev1.Node {
		n := fxNode("cordoned", 0)
		n.Spec.Unschedulable = true
		return n
	}
	tests := []struct {
		name string
		tols []corev1.Toleration
		want string
	}{
		{name: "no toleration", want: reason},
		{name: "tolerates node.kubernetes.io/unschedulable:NoSchedule",
			tols: []corev1.Toleration{nbToleration(corev1.TaintNodeUnschedulable, corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule)}},
		{name: "the key with any effect",
			tols: []corev1.Toleration{nbToleration(corev1.TaintNodeUnschedulable, corev1.TolerationOpExists, "", "")}},
		{name: "every taint (empty key, Exists)",
			tols: []corev1.Toleration{nbToleration("", corev1.TolerationOpExists, "", "")}},
		{name: "the key for NoExecute only", want: reason,
			tols: []corev1.Toleration{nbToleration(corev1.TaintNodeUnschedulable, corev1.TolerationOpExists, "", corev1.TaintEffectNoExecute)}},
		{name: "another key", want: reason,
			tols: []corev1.Toleration{nbToleration("dedicated", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule)}},
		{name: "Equal with a value the taint does not have", want: reason,
			tols: []corev1.Toleration{nbToleration(corev1.TaintNodeUnschedulable, corev1.TolerationOpEqual, "true", corev1.TaintEffectNoSchedule)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := fxPod("p").tolerate(tc.tols...).obj()
			got := nbVerdicts(t, fxPlugin{name: NodeUnschedulableName}, false, pod, fxNodeInfo(t, cordoned()), fxNodeInfo(t, fxNode("open", 0)))
			if diff := cmp.Diff(map[string]string{"cordoned": tc.want, "open": ""}, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeNameFilter(t *testing.T) {
	const reason = "UnschedulableAndUnresolvable: node(s) didn't match the requested node name"
	tests := []struct {
		nodeName string
		want     map[string]string
	}{
		{nodeName: "", want: map[string]string{"n1": "", "n2": ""}},
		{nodeName: "n1", want: map[string]string{"n1": "", "n2": reason}},
		{nodeName: "gone", want: map[string]string{"n1": reason, "n2": reason}},
	}
	for _, tc := range tests {
		t.Run("nodeName="+tc.nodeName, func(t *testing.T) {
			pod := fxPod("p").obj()
			pod.Spec.NodeName = tc.nodeName
			got := nbVerdicts(t, fxPlugin{name: NodeNameName}, false, pod, fxNodeInfo(t, fxNode("n1", 0)), fxNodeInfo(t, fxNode("n2", 0)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// nbPorts is a pod whose ports are written "protocol/ip/port" (protocol and ip may be empty); "init:" and
// "sidecar:" put the port on a regular or a restartable init container.
func nbPorts(name string, ports ...string) *corev1.Pod {
	p := fxPod(name).obj()
	for _, s := range ports {
		kind, spec, found := strings.Cut(s, ":")
		if !found {
			kind, spec = "", s
		}
		f := strings.Split(spec, "/")
		port, err := strconv.Atoi(f[2])
		if err != nil {
			panic(s)
		}
		cp := corev1.ContainerPort{Protocol: corev1.Protocol(f[0]), HostIP: f[1], HostPort: int32(port), ContainerPort: 8080}
		switch kind {
		case "init", "sidecar":
			c := corev1.Container{Name: fmt.Sprint(kind, len(p.Spec.InitContainers)), Ports: []corev1.ContainerPort{cp}}
			if kind == "sidecar" {
				always := corev1.ContainerRestartPolicyAlways
				c.RestartPolicy = &always
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		default:
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, cp)
		}
	}
	return p
}

// TestNodePortsFilter follows upstream's nodeports tests: host ports clash on the same protocol and port when
// the IPs are equal or either is 0.0.0.0; a sidecar's ports count on both sides, a regular init
// container's on neither. The verdicts are the same whether PreFilter ran or not.
func TestNodePortsFilter(t *testing.T) {
	const reason = "Unschedulable: node(s) didn't have free ports for the requested pod ports"
	tests := []struct {
		name     string
		pod      []string
		existing []string
		want     string
	}{
		{name: "nothing running", pod: []string{"UDP/127.0.0.1/8080"}},
		{name: "other port", pod: []string{"UDP/127.0.0.1/8080"}, existing: []string{"UDP/127.0.0.1/9090"}},
		{name: "same udp port", pod: []string{"UDP/127.0.0.1/8080"}, existing: []string{"UDP/127.0.0.1/8080"}, want: reason},
		{name: "same tcp port", pod: []string{"TCP/127.0.0.1/8080"}, existing: []string{"TCP/127.0.0.1/8080"}, want: reason},
		{name: "different host ip", pod: []string{"TCP/127.0.0.1/8080"}, existing: []string{"TCP/127.0.0.2/8080"}},
		{name: "different protocol", pod: []string{"UDP/127.0.0.1/8080"}, existing: []string{"TCP/127.0.0.1/8080"}},
		{name: "second udp port conflict", pod: []string{"UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"},
			existing: []string{"UDP/127.0.0.1/8080"}, want: reason},
		{name: "first tcp port conflict", pod: []string{"TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"},
			existing: []string{"TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"}, want: reason},
		{name: "first tcp port conflict due to 0.0.0.0 hostIP", pod: []string{"TCP/0.0.0.0/8001"},
			existing: []string{"TCP/127.0.0.1/8001"}, want: reason},
		{name: "TCP hostPort conflict due to 0.0.0.0 hostIP", pod: []string{"TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"},
			existing: []string{"TCP/127.0.0.1/8001"}, want: reason},
		{name: "second tcp port conflict to 0.0.0.0 hostIP", pod: []string{"TCP/127.0.0.1/8001"},
			existing: []string{"TCP/0.0.0.0/8001"}, want: reason},
		{name: "second different protocol", pod: []string{"UDP/127.0.0.1/8001"}, existing: []string{"TCP/0.0.0.0/8001"}},
		{name: "UDP hostPort conflict due to 0.0.0.0 hostIP", pod: []string{"UDP/127.0.0.1/8001"},
			existing: []string{"TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"}, want: reason},
		{name: "empty host IP and protocol are 0.0.0.0 and TCP", pod: []string{"//8001"}, existing: []string{"TCP/10.0.0.1/8001"}, want: reason},
		{name: "the incoming pod's sidecar port", pod: []string{"sidecar:TCP//8001"}, existing: []string{"TCP//8001"}, want: reason},
		{name: "an existing pod's sidecar port", pod: []string{"TCP//8001"}, existing: []string{"sidecar:TCP//8001"}, want: reason},
		{name: "the incoming pod's init container port is free to reuse", pod: []string{"init:TCP//8001"}, existing: []string{"TCP//8001"}},
		{name: "an existing pod's init container port is released", pod: []string{"TCP//8001"}, existing: []string{"init:TCP//8001"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bothWays(t, func(t *testing.T, withoutPre bool) {
				node := fxNodeInfo(t, fxNode("n1", 0), nbPorts("existing", tc.existing...))
				got := nbVerdicts(t, fxPlugin{name: NodePortsName}, withoutPre, nbPorts("p", tc.pod...), node)
				if got["n1"] != tc.want {
					t.Errorf("verdict %q, want %q", got["n1"], tc.want)
				}
			})
		})
	}
}

// TestNodePortsPreFilterSkip: a pod without host ports (a regular init container's do not count) skips
// NodePorts, as upstream.
func TestNodePortsPreFilterSkip(t *testing.T) {
	for pod, want := range map[*corev1.Pod]bool{
		nbPorts("none"):                    true,
		nbPorts("init", "init:TCP//80"):    true,
		nbPorts("side", "sidecar:UDP//53"): false,
		nbPorts("main", "TCP//80"):         false,
	} {
		fw := fxFramework(t, &fxSource{}, fxPlugin{name: NodePortsName})
		skip, st := fw.RunPreFilterPlugins(t.Context(), framework.NewCycleState(), fxInfo(t, pod), fxSnapshot())
		if !st.IsSuccess() {
			t.Fatal(fxReasons(st))
		}
		if got := skip.Has(NodePortsName); got != want {
			t.Errorf("%s: skipped %v, want %v", pod.Name, got, want)
		}
	}
}

// TestNodePluginsEvents pins which cluster events retry a pod each node plugin rejected.
func TestNodePluginsEvents(t *testing.T) {
	node := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.EventNode, ActionType: a}
	}
	pod := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.EventPod, ActionType: a}
	}
	tests := []struct {
		plugin string
		yes    []framework.ClusterEvent
		no     []framework.ClusterEvent
	}{
		{NodeUnschedulableName, []framework.ClusterEvent{node(framework.Add), node(framework.UpdateNodeTaint)},
			[]framework.ClusterEvent{node(framework.UpdateNodeLabel), pod(framework.Delete)}},
		{NodeNameName, []framework.ClusterEvent{node(framework.Add)},
			[]framework.ClusterEvent{node(framework.UpdateNodeLabel), pod(framework.Delete)}},
		{NodePortsName, []framework.ClusterEvent{node(framework.Add), pod(framework.Delete)},
			[]framework.ClusterEvent{node(framework.UpdateNodeLabel), pod(framework.Add)}},
		{NodeAffinityName, []framework.ClusterEvent{node(framework.Add), node(framework.UpdateNodeLabel)},
			[]framework.ClusterEvent{node(framework.UpdateNodeTaint), pod(framework.Delete)}},
		{TaintTolerationName, []framework.ClusterEvent{node(framework.Add), node(framework.UpdateNodeTaint)},
			[]framework.ClusterEvent{node(framework.UpdateNodeLabel), pod(framework.Delete)}},
		{NodeResourcesFitName, []framework.ClusterEvent{node(framework.Add), node(framework.UpdateNodeAllocatable), pod(framework.Delete), pod(framework.UpdatePodScaleDown)},
			[]framework.ClusterEvent{node(framework.UpdateNodeLabel), node(framework.UpdateNodeTaint), pod(framework.Add)}},
	}
	for _, tc := range tests {
		fw := fxFramework(t, &fxSource{}, fxPlugin{name: tc.plugin})
		for _, ev := range tc.yes {
			if !fw.MayHelp(sets.New(tc.plugin), ev) {
				t.Errorf("%s: %+v does not retry", tc.plugin, ev)
			}
		}
		for _, ev := range tc.no {
			if fw.MayHelp(sets.New(tc.plugin), ev) {
				t.Errorf("%s: %+v retries", tc.plugin, ev)
			}
		}
	}
}
