package plugins

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"pgregory.net/rapid"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// nrRL is a resource list from name, quantity pairs ("cpu", "100m", "memory", "1Gi", ...).
func nrRL(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// nrPod is a pod with one container per request list (nil: a container without requests); no containers at
// all without lists, like upstream's st.MakePod().
func nrPod(name string, reqs ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, r := range reqs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprint("c", i), Resources: corev1.ResourceRequirements{Requests: r}})
	}
	return p
}

// nrInit adds init containers requesting reqs (sidecars when sidecar).
func nrInit(p *corev1.Pod, sidecar bool, reqs ...corev1.ResourceList) *corev1.Pod {
	for _, r := range reqs {
		c := corev1.Container{Name: fmt.Sprint("init", len(p.Spec.InitContainers)), Resources: corev1.ResourceRequirements{Requests: r}}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	return p
}

// nrNode is a node with allocatable kv (pods: 110 unless given).
func nrNode(name string, kv ...string) *corev1.Node {
	n := fxNode(name, 0)
	n.Status.Allocatable = nrRL(kv...)
	return n
}

// nrNodeInfo is a node with pods placed on it (fresh names, so that one pod spec can be placed twice).
func nrNodeInfo(t *testing.T, node *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	t.Helper()
	ni := framework.NewNodeInfo(node)
	for i, p := range pods {
		p = p.DeepCopy()
		p.Name = fmt.Sprintf("%s-%s-%d", node.Name, p.Name, i)
		p.UID = types.UID("uid-" + p.Name)
		p.Spec.NodeName = node.Name
		ni.AddPod(fxInfo(t, p))
	}
	return ni
}

// TestNodeResourcesFitFilter follows upstream's noderesources Fit tests (TestEnoughRequests) on a node with
// 10m CPU, 20 bytes of memory, 32 pods, 5 example.com/aaa, 20 bytes of ephemeral storage and 5 of
// hugepages-2Mi: the pod's effective requests (containers summed, init containers as a maximum, sidecars
// alongside, overhead added) must fit what the node's pods leave; a request larger than the node's
// allocatable is unresolvable (preemption cannot help); ignored resources apply to extended resources only.
func TestNodeResourcesFitFilter(t *testing.T) {
	node := func() *corev1.Node {
		return nrNode("n1", "cpu", "10m", "memory", "20", "pods", "32", "example.com/aaa", "5", "ephemeral-storage", "20", "hugepages-2Mi", "5")
	}
	use := func(cpuMilli, mem int64, kv ...string) corev1.ResourceList {
		return nrRL(append([]string{"cpu", fmt.Sprintf("%dm", cpuMilli), "memory", fmt.Sprint(mem)}, kv...)...)
	}
	ignore := func(resources ...string) runtime.Object {
		return &configv1.NodeResourcesFitArgs{IgnoredResources: resources}
	}
	tests := []struct {
		name     string
		args     runtime.Object
		node     *corev1.Node
		pod      *corev1.Pod
		existing *corev1.Pod
		want     string
	}{{
		name:     "no resources requested always fits",
		pod:      nrPod("p"),
		existing: nrPod("e", use(10, 20)),
	}, {
		name:     "too many resources fails",
		pod:      nrPod("p", use(1, 1)),
		existing: nrPod("e", use(10, 20)),
		want:     "Unschedulable: Insufficient cpu, Insufficient memory",
	}, {
		name:     "too many resources fails due to init container cpu",
		pod:      nrInit(nrPod("p", use(1, 1)), false, use(3, 1)),
		existing: nrPod("e", use(8, 19)),
		want:     "Unschedulable: Insufficient cpu",
	}, {
		name:     "too many resources fails due to highest init container cpu",
		pod:      nrInit(nrPod("p", use(1, 1)), false, use(3, 1), use(2, 1)),
		existing: nrPod("e", use(8, 19)),
		want:     "Unschedulable: Insufficient cpu",
	}, {
		name:     "too many resources fails due to init container memory",
		pod:      nrInit(nrPod("p", use(1, 1)), false, use(1, 3), use(1, 2)),
		existing: nrPod("e", use(9, 19)),
		want:     "Unschedulable: Insufficient memory",
	}, {
		name:     "init containers count as their max, not their sum",
		pod:      nrInit(nrPod("p", use(1, 1)), false, use(1, 1), use(1, 1)),
		existing: nrPod("e", use(9, 19)),
	}, {
		name:     "both resources fit",
		pod:      nrPod("p", use(1, 1)),
		existing: nrPod("e", use(5, 5)),
	}, {
		name:     "one resource memory fits",
		pod:      nrPod("p", use(2, 1)),
		existing: nrPod("e", use(9, 5)),
		want:     "Unschedulable: Insufficient cpu",
	}, {
		name:     "one resource cpu fits",
		pod:      nrPod("p", use(1, 2)),
		existing: nrPod("e", use(5, 19)),
		want:     "Unschedulable: Insufficient memory",
	}, {
		name:     "equal edge case",
		pod:      nrPod("p", use(5, 1)),
		existing: nrPod("e", use(5, 19)),
	}, {
		name:     "equal edge case for init container",
		pod:      nrInit(nrPod("p", use(4, 1)), false, use(5, 1)),
		existing: nrPod("e", use(5, 19)),
	}, {
		name:     "a sidecar runs alongside the containers",
		pod:      nrInit(nrPod("p", use(2, 1)), true, use(1, 1)),
		existing: nrPod("e", use(8, 10)),
		want:     "Unschedulable: Insufficient cpu",
	}, {
		name:     "a regular init container with the same requests fits",
		pod:      nrInit(nrPod("p", use(2, 1)), false, use(1, 1)),
		existing: nrPod("e", use(8, 10)),
	}, {
		name: "overhead is added",
		pod: func() *corev1.Pod {
			p := nrPod("p", use(1, 1))
			p.Spec.Overhead = nrRL("cpu", "1m")
			return p
		}(),
		existing: nrPod("e", use(9, 5)),
		want:     "Unschedulable: Insufficient cpu",
	}, {
		name:     "the same pod without overhead fits",
		pod:      nrPod("p", use(1, 1)),
		existing: nrPod("e", use(9, 5)),
	}, {
		name:     "extended resource fits",
		pod:      nrPod("p", nrRL("example.com/aaa", "1")),
		existing: nrPod("e", use(0, 0)),
	}, {
		name:     "extended resource fits for init container",
		pod:      nrInit(nrPod("p", nil), false, nrRL("example.com/aaa", "1")),
		existing: nrPod("e", use(0, 0)),
	}, {
		name:     "extended resource capacity enforced",
		pod:      nrPod("p", use(1, 1, "example.com/aaa", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient example.com/aaa",
	}, {
		name:     "extended resource allocatable enforced",
		pod:      nrPod("p", use(1, 1, "example.com/aaa", "1")),
		existing: nrPod("e", use(0, 0, "example.com/aaa", "5")),
		want:     "Unschedulable: Insufficient example.com/aaa",
	}, {
		name:     "extended resource allocatable enforced for multiple containers",
		pod:      nrPod("p", use(1, 1, "example.com/aaa", "3"), use(1, 1, "example.com/aaa", "3")),
		existing: nrPod("e", use(0, 0, "example.com/aaa", "2")),
		want:     "UnschedulableAndUnresolvable: Insufficient example.com/aaa",
	}, {
		name:     "extended resource allocatable admits multiple init containers",
		pod:      nrInit(nrPod("p", nil), false, use(1, 1, "example.com/aaa", "3"), use(1, 1, "example.com/aaa", "3")),
		existing: nrPod("e", use(0, 0, "example.com/aaa", "2")),
	}, {
		name:     "extended resource allocatable enforced for multiple init containers",
		pod:      nrInit(nrPod("p", nil), false, use(1, 1, "example.com/aaa", "6"), use(1, 1, "example.com/aaa", "3")),
		existing: nrPod("e", use(0, 0, "example.com/aaa", "2")),
		want:     "UnschedulableAndUnresolvable: Insufficient example.com/aaa",
	}, {
		name:     "extended resource allocatable enforced for unknown resource",
		pod:      nrPod("p", use(1, 1, "example.com/bbb", "1")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient example.com/bbb",
	}, {
		name:     "kubernetes.io resource capacity enforced",
		pod:      nrPod("p", use(1, 1, "kubernetes.io/something", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient kubernetes.io/something",
	}, {
		name:     "subdomain.kubernetes.io resource capacity enforced",
		pod:      nrPod("p", use(1, 1, "subdomain.kubernetes.io/something", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient subdomain.kubernetes.io/something",
	}, {
		name:     "hugepages resource capacity enforced",
		pod:      nrPod("p", use(1, 1, "hugepages-2Mi", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient hugepages-2Mi",
	}, {
		name:     "hugepages resource allocatable enforced for multiple containers",
		pod:      nrPod("p", use(1, 1, "hugepages-2Mi", "3"), use(1, 1, "hugepages-2Mi", "3")),
		existing: nrPod("e", use(0, 0, "hugepages-2Mi", "2")),
		want:     "UnschedulableAndUnresolvable: Insufficient hugepages-2Mi",
	}, {
		name:     "skip checking ignored extended resource",
		args:     ignore("example.com/bbb"),
		pod:      nrPod("p", use(1, 1, "example.com/bbb", "2")),
		existing: nrPod("e", use(0, 0)),
	}, {
		name:     "skip checking ignored extended resource via resource groups",
		args:     &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"example.com"}},
		pod:      nrPod("p", use(1, 1, "example.com/bbb", "2")),
		existing: nrPod("e", use(0, 0)),
	}, {
		name:     "a resource group is the part before the slash",
		args:     &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"example"}},
		pod:      nrPod("p", use(1, 1, "example.com/bbb", "2")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient example.com/bbb",
	}, {
		name:     "hugepages cannot be ignored",
		args:     ignore("hugepages-2Mi"),
		pod:      nrPod("p", use(1, 1, "hugepages-2Mi", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient hugepages-2Mi",
	}, {
		name:     "kubernetes.io resources cannot be ignored",
		args:     ignore("kubernetes.io/something"),
		pod:      nrPod("p", use(1, 1, "kubernetes.io/something", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient kubernetes.io/something",
	}, {
		name:     "nor a kubernetes.io resource group",
		args:     &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"subdomain.kubernetes.io"}},
		pod:      nrPod("p", use(1, 1, "subdomain.kubernetes.io/something", "10")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient subdomain.kubernetes.io/something",
	}, {
		name:     "skip checking resource request with quantity zero",
		pod:      nrPod("p", use(1, 1, "example.com/bbb", "0")),
		existing: nrPod("e", use(0, 0)),
	}, {
		name:     "ephemeral storage beyond allocatable",
		pod:      nrPod("p", nrRL("ephemeral-storage", "25")),
		existing: nrPod("e", use(0, 0)),
		want:     "UnschedulableAndUnresolvable: Insufficient ephemeral-storage",
	}, {
		name:     "ephemeral storage in use",
		pod:      nrPod("p", nrRL("ephemeral-storage", "10")),
		existing: nrPod("e", nrRL("ephemeral-storage", "15")),
		want:     "Unschedulable: Insufficient ephemeral-storage",
	}, {
		name:     "too many pods, with the other reasons",
		node:     nrNode("n1", "cpu", "10m", "memory", "20", "pods", "1"),
		pod:      nrPod("p", use(1, 1)),
		existing: nrPod("e", use(10, 20)),
		want:     "Unschedulable: Too many pods, Insufficient cpu, Insufficient memory",
	}, {
		name:     "too many pods on a node taking none is still resolvable, as upstream",
		node:     nrNode("n1", "cpu", "10m", "memory", "20", "pods", "0"),
		pod:      nrPod("p"),
		existing: nil,
		want:     "Unschedulable: Too many pods",
	}, {
		name:     "reasons in upstream's order",
		node:     nrNode("n1", "cpu", "10m", "memory", "20", "pods", "1", "ephemeral-storage", "20", "example.com/aaa", "5"),
		pod:      nrPod("p", use(1, 1, "ephemeral-storage", "1", "example.com/aaa", "1")),
		existing: nrPod("e", use(10, 20, "ephemeral-storage", "20", "example.com/aaa", "5")),
		want:     "Unschedulable: Too many pods, Insufficient cpu, Insufficient memory, Insufficient ephemeral-storage, Insufficient example.com/aaa",
	}, {
		name:     "one request beyond allocatable makes every reason unresolvable",
		pod:      nrPod("p", use(11, 1)),
		existing: nrPod("e", use(0, 20)),
		want:     "UnschedulableAndUnresolvable: Insufficient cpu, Insufficient memory",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node
			if n == nil {
				n = node()
			}
			var existing []*corev1.Pod
			if tc.existing != nil {
				existing = append(existing, tc.existing)
			}
			got := nbVerdicts(t, fxPlugin{name: NodeResourcesFitName, args: tc.args}, false, tc.pod, nrNodeInfo(t, n, existing...))
			if got["n1"] != tc.want {
				t.Errorf("verdict %q, want %q", got["n1"], tc.want)
			}
		})
	}
}

// nrScoreCase is one case of the fit strategies' and BalancedAllocation's score tests: the pod, the nodes (with
// their pods) and each node's score.
type nrScoreCase struct {
	name      string
	resources []configv1.ResourceSpec // nil: cpu and memory, weight 1
	pod       *corev1.Pod
	nodes     func(t *testing.T) []*framework.NodeInfo
	want      map[string]int64
}

func nrRunScores(t *testing.T, tests []nrScoreCase, plugin func(resources []configv1.ResourceSpec) fxPlugin) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nbScores(t, plugin(tc.resources), false, tc.pod, tc.nodes(t)...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func nrFit(strategy configv1.ScoringStrategyType, shape ...configv1.UtilizationShapePoint) func([]configv1.ResourceSpec) fxPlugin {
	return func(resources []configv1.ResourceSpec) fxPlugin {
		s := &configv1.ScoringStrategy{Type: strategy, Resources: resources}
		if len(shape) > 0 {
			s.RequestedToCapacityRatio = &configv1.RequestedToCapacityRatioParam{Shape: shape}
		}
		return fxPlugin{name: NodeResourcesFitName, args: &configv1.NodeResourcesFitArgs{ScoringStrategy: s}}
	}
}

// nrTwoNodes are nodes n1 and n2 with allocatable kv1 and kv2 and, on each, the pods given.
func nrTwoNodes(kv1, kv2 []string, on1, on2 []*corev1.Pod) func(t *testing.T) []*framework.NodeInfo {
	return func(t *testing.T) []*framework.NodeInfo {
		return []*framework.NodeInfo{nrNodeInfo(t, nrNode("n1", kv1...), on1...), nrNodeInfo(t, nrNode("n2", kv2...), on2...)}
	}
}

func nrCPUMem(cpu, mem string, kv ...string) []string {
	return append([]string{"cpu", cpu, "memory", mem}, kv...)
}

var (
	nrExt         = "example.com/foo"
	nrExtResource = []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: nrExt, Weight: 1}}
	nrMemHeavy    = []configv1.ResourceSpec{{Name: "memory", Weight: 2}, {Name: "cpu", Weight: 1}}
	// nrReq3000 requests 3000m CPU and 5000 bytes of memory in two containers.
	nrReq3000 = nrPod("p", nrRL("cpu", "1000m", "memory", "2000"), nrRL("cpu", "2000m", "memory", "3000"))
)

// TestLeastAllocatedScore follows upstream's least_allocated_test: per resource (allocatable − requested) ×
// 100 / allocatable with the pod placed, 0 beyond allocatable, request-less containers at 100m / 200Mi, a
// weighted average truncated; an extended resource the pod does not request, or the node does not have, is
// left out.
func TestLeastAllocatedScore(t *testing.T) {
	cpu0 := func(cpu string) *corev1.Pod { return nrPod("e", nrRL("cpu", cpu, "memory", "0")) }
	tests := []nrScoreCase{{
		name:  "nothing scheduled, nothing requested",
		pod:   nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 100, "n2": 100},
	}, {
		// n1: cpu (4000-3000)*100/4000 = 25, memory 50: 37; n2: 50, 50: 50
		name:  "nothing scheduled, resources requested, differently sized nodes",
		pod:   nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 37, "n2": 50},
	}, {
		name:  "no resources requested, pods without containers scheduled",
		pod:   nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"), []*corev1.Pod{nrPod("e"), nrPod("e")}, []*corev1.Pod{nrPod("e"), nrPod("e")}),
		want:  map[string]int64{"n1": 100, "n2": 100},
	}, {
		// n1: cpu 40, memory 100: 70; n2: cpu 40, memory 75: 57
		name: "no resources requested, pods scheduled with resources",
		pod:  nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "20000"),
			[]*corev1.Pod{cpu0("3000m"), cpu0("3000m")}, []*corev1.Pod{cpu0("3000m"), nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 70, "n2": 57},
	}, {
		name: "resources requested, pods scheduled with resources",
		pod:  nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "20000"),
			[]*corev1.Pod{cpu0("3000m")}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 57, "n2": 45},
	}, {
		name: "resources requested, pods scheduled with resources, differently sized nodes",
		pod:  nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "50000"),
			[]*corev1.Pod{cpu0("3000m")}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 57, "n2": 60},
	}, {
		// cpu 6000 of 4000: 0
		name: "requested resources exceed node capacity",
		pod:  cpu0("3000m"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"),
			[]*corev1.Pod{cpu0("3000m")}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 50, "n2": 25},
	}, {
		name:  "zero node resources",
		pod:   nrPod("p"),
		nodes: nrTwoNodes(nil, nil, []*corev1.Pod{cpu0("3000m")}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want:  map[string]int64{"n1": 0, "n2": 0},
	}, {
		// n1: (25×1 + 50×2) / 3 = 41
		name:      "different weights on CPU and memory",
		resources: nrMemHeavy,
		pod:       nrReq3000,
		nodes:     nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), nil, nil),
		want:      map[string]int64{"n1": 41, "n2": 50},
	}, {
		name:      "an extended resource the pod does not request is left out",
		resources: nrExtResource,
		pod:       nrReq3000,
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000"), nrCPUMem("6000m", "10000", nrExt, "4"), nil, nil),
		want:      map[string]int64{"n1": 50, "n2": 50},
	}, {
		// extended: n1 (4-2)/4 = 50, n2 (10-2)/10 = 80
		name:      "an extended resource the pod requests counts",
		resources: nrExtResource,
		pod:       nrPod("p", nrRL("cpu", "3000m", "memory", "5000", nrExt, "2")),
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000", nrExt, "4"), nrCPUMem("6000m", "10000", nrExt, "10"), nil, nil),
		want:      map[string]int64{"n1": 50, "n2": 60},
	}, {
		name:      "a node without the resource leaves it out",
		resources: []configv1.ResourceSpec{{Name: nrExt, Weight: 2}, {Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		pod:       nrPod("p", nrRL("cpu", "3000m", "memory", "4000")),
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000"), nrCPUMem("6000m", "10000", nrExt, "4"), nil, nil),
		want:      map[string]int64{"n1": 55, "n2": 55},
	}, {
		// 2 × (100m, 200Mi): cpu (1000-200)/1000 = 80, memory (1000-400)/1000 = 60
		name:  "containers without requests count 100m and 200Mi",
		pod:   nrPod("p", nil),
		nodes: nrTwoNodes(nrCPUMem("1000m", "1000Mi"), nrCPUMem("1000m", "1000Mi"), []*corev1.Pod{nrPod("e", nil)}, nil),
		want:  map[string]int64{"n1": 70, "n2": 85},
	}, {
		// cpu max(500m+500m, 1500m) + 500m overhead = 2000m of 4000m: 50; memory 0: 100
		name: "init containers and overhead count",
		pod: func() *corev1.Pod {
			p := nrInit(nrPod("p", nrRL("cpu", "500m", "memory", "0"), nrRL("cpu", "500m", "memory", "0")), false, nrRL("cpu", "1500m", "memory", "0"))
			p.Spec.Overhead = nrRL("cpu", "500m")
			return p
		}(),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("8000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 75, "n2": 87},
	}, {
		// (100-50)*100/100 though the pod requests none
		name:      "ephemeral storage counts though not requested",
		resources: []configv1.ResourceSpec{{Name: "ephemeral-storage", Weight: 1}},
		pod:       nrPod("p", nrRL("cpu", "1")),
		nodes: nrTwoNodes([]string{"ephemeral-storage", "100"}, []string{"ephemeral-storage", "100"},
			[]*corev1.Pod{nrPod("e", nrRL("ephemeral-storage", "50"))}, nil),
		want: map[string]int64{"n1": 50, "n2": 100},
	}}
	nrRunScores(t, tests, nrFit(configv1.LeastAllocated))
	// LeastAllocated is the default strategy.
	nrRunScores(t, tests[:2], func([]configv1.ResourceSpec) fxPlugin { return fxPlugin{name: NodeResourcesFitName} })
}

// TestMostAllocatedScore follows upstream's most_allocated_test: per resource requested × 100 / allocatable
// with the pod placed, capped at 100, weighted average truncated.
func TestMostAllocatedScore(t *testing.T) {
	cpu0 := func(cpu string) *corev1.Pod { return nrPod("e", nrRL("cpu", cpu, "memory", "0")) }
	tests := []nrScoreCase{{
		name:  "nothing scheduled, nothing requested",
		pod:   nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 0, "n2": 0},
	}, {
		// n1: cpu 75, memory 50: 62
		name:  "nothing scheduled, resources requested, differently sized nodes",
		pod:   nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 62, "n2": 50},
	}, {
		// n1: cpu 60, memory 0: 30; n2: 60, 25: 42
		name: "no resources requested, pods scheduled with resources",
		pod:  nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "20000"),
			[]*corev1.Pod{cpu0("3000m"), cpu0("3000m")}, []*corev1.Pod{cpu0("3000m"), nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 30, "n2": 42},
	}, {
		name: "resources requested, pods scheduled with resources",
		pod:  nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "20000"),
			[]*corev1.Pod{cpu0("3000m")}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 42, "n2": 55},
	}, {
		// n1: cpu 5000/5000 100, memory 90: 95; n2: 50, 9000/9000 100: 75
		name:  "resources requested equal node capacity",
		pod:   nrPod("p", nrRL("cpu", "2000m", "memory", "4000"), nrRL("cpu", "3000m", "memory", "5000")),
		nodes: nrTwoNodes(nrCPUMem("5000m", "10000"), nrCPUMem("10000m", "9000"), nil, nil),
		want:  map[string]int64{"n1": 95, "n2": 75},
	}, {
		// n1: (75×1 + 50×2) / 3 = 58
		name:      "different weights on CPU and memory",
		resources: nrMemHeavy,
		pod:       nrReq3000,
		nodes:     nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), nil, nil),
		want:      map[string]int64{"n1": 58, "n2": 50},
	}, {
		// n1: cpu 300m of 250m capped at 100, memory 600Mi of 1000Mi 60: 80; n2: 40, 20: 30
		name:  "containers without requests count 100m and 200Mi",
		pod:   nrPod("p", nil),
		nodes: nrTwoNodes(nrCPUMem("250m", "1000Mi"), nrCPUMem("250m", "1000Mi"), []*corev1.Pod{nrPod("e", nil), nrPod("e", nil)}, nil),
		want:  map[string]int64{"n1": 80, "n2": 30},
	}, {
		name:      "an extended resource the pod does not request is left out",
		resources: nrExtResource,
		pod:       nrReq3000,
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000"), nrCPUMem("6000m", "10000", nrExt, "4"), nil, nil),
		want:      map[string]int64{"n1": 50, "n2": 50},
	}, {
		// extended: n1 2/4 = 50, n2 2/10 = 20
		name:      "an extended resource the pod requests counts",
		resources: nrExtResource,
		pod:       nrPod("p", nrRL("cpu", "3000m", "memory", "5000", nrExt, "2")),
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000", nrExt, "4"), nrCPUMem("6000m", "10000", nrExt, "10"), nil, nil),
		want:      map[string]int64{"n1": 50, "n2": 40},
	}, {
		name:      "a node without the resource leaves it out",
		resources: []configv1.ResourceSpec{{Name: nrExt, Weight: 2}, {Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		pod:       nrPod("p", nrRL("cpu", "3000m", "memory", "4000")),
		nodes:     nrTwoNodes(nrCPUMem("6000m", "10000"), nrCPUMem("6000m", "10000", nrExt, "4"), nil, nil),
		want:      map[string]int64{"n1": 45, "n2": 45},
	}}
	nrRunScores(t, tests, nrFit(configv1.MostAllocated))
}

// TestRequestedToCapacityRatioScore follows upstream's requested_to_capacity_ratio_test: the shape (scores
// 0..10 scaled by 10) is interpolated at each resource's utilization (capped at 100 %), a resource scoring 0
// does not count towards the weights, and the weighted average is rounded.
func TestRequestedToCapacityRatioScore(t *testing.T) {
	least := []configv1.UtilizationShapePoint{{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}}
	most := []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}
	foo, bar := "intel.com/foo", "intel.com/bar"
	single := []configv1.ResourceSpec{{Name: foo, Weight: 1}}
	multi := []configv1.ResourceSpec{{Name: foo, Weight: 3}, {Name: bar, Weight: 5}}
	cpuMem := func(foo string) []string { return nrCPUMem("4000m", "10000Mi", "intel.com/foo", foo) }
	fooBar := func(f, b string) []string { return nrCPUMem("4000m", "10000Mi", foo, f, bar, b) }
	leastTests := []nrScoreCase{{
		name:  "nothing scheduled, nothing requested",
		pod:   nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"), []*corev1.Pod{nrPod("e"), nrPod("e")}, nil),
		want:  map[string]int64{"n1": 100, "n2": 100},
	}, {
		// n1: cpu 75 % scores 25, memory 50 % 50: 37.5 rounds to 38
		name:  "nothing scheduled, resources requested, differently sized nodes",
		pod:   nrReq3000,
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), []*corev1.Pod{nrPod("e"), nrPod("e")}, nil),
		want:  map[string]int64{"n1": 38, "n2": 50},
	}, {
		name: "no resources requested, pods scheduled with resources",
		pod:  nrPod("p"),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"),
			[]*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}, []*corev1.Pod{nrPod("e", nrRL("cpu", "3000m", "memory", "5000"))}),
		want: map[string]int64{"n1": 38, "n2": 50},
	}}
	nrRunScores(t, leastTests, nrFit(configv1.RequestedToCapacityRatio, least...))

	mostTests := []nrScoreCase{{
		name:      "single extended resource, nothing requested: no resource counts",
		resources: single,
		pod:       nrPod("p"),
		nodes:     nrTwoNodes(cpuMem("8"), cpuMem("4"), nil, nil),
		want:      map[string]int64{"n1": 0, "n2": 0},
	}, {
		// n1: 2/8 = 25 % scores 2.5, truncated to 2 by the shape; n2: 50 % 5
		name:      "single extended resource requested",
		resources: single,
		pod:       nrPod("p", nrRL(foo, "2")),
		nodes:     nrTwoNodes(cpuMem("8"), cpuMem("4"), []*corev1.Pod{nrPod("e")}, nil),
		want:      map[string]int64{"n1": 2, "n2": 5},
	}, {
		name:      "single extended resource requested, on a node using some",
		resources: single,
		pod:       nrPod("p", nrRL(foo, "2")),
		nodes:     nrTwoNodes(cpuMem("8"), cpuMem("4"), nil, []*corev1.Pod{nrPod("e", nrRL(foo, "2"))}),
		want:      map[string]int64{"n1": 2, "n2": 10},
	}, {
		name:      "single extended resource requested, more",
		resources: single,
		pod:       nrPod("p", nrRL(foo, "4")),
		nodes:     nrTwoNodes(cpuMem("8"), cpuMem("4"), nil, nil),
		want:      map[string]int64{"n1": 5, "n2": 10},
	}, {
		name:      "multiple extended resources, nothing requested",
		resources: multi,
		pod:       nrPod("p"),
		nodes:     nrTwoNodes(fooBar("8", "4"), fooBar("4", "8"), nil, nil),
		want:      map[string]int64{"n1": 0, "n2": 0},
	}, {
		// n1: foo 25 % 2, bar 50 % 5: (2×3 + 5×5) / 8 = 3.875 → 4; n2: foo 5, bar 2: 25/8 = 3.125 → 3
		name:      "multiple extended resources requested",
		resources: multi,
		pod:       nrPod("p", nrRL(foo, "2", bar, "2")),
		nodes:     nrTwoNodes(fooBar("8", "4"), fooBar("4", "8"), nil, nil),
		want:      map[string]int64{"n1": 4, "n2": 3},
	}, {
		// n1: foo 4/8 5, bar 4/4 10: 65/8 = 8.125 → 8
		name:      "multiple extended resources requested, on a node using some",
		resources: multi,
		pod:       nrPod("p", nrRL(foo, "2", bar, "2")),
		nodes:     nrTwoNodes(fooBar("8", "4"), fooBar("4", "8"), []*corev1.Pod{nrPod("e", nrRL(foo, "2", bar, "2"))}, nil),
		want:      map[string]int64{"n1": 8, "n2": 3},
	}}
	nrRunScores(t, mostTests, nrFit(configv1.RequestedToCapacityRatio, []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 1}}...))

	tenTests := []nrScoreCase{{
		// cpu 50 % scores 50, memory 0 % scores 0 and is left out of the average: 50, not 25
		name:  "a resource scoring 0 does not count",
		pod:   nrPod("p", nrRL("cpu", "2000m", "memory", "0")),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("8000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 50, "n2": 25},
	}, {
		// cpu 8000m of 4000m counts as 100 %
		name:  "beyond allocatable counts as full",
		pod:   nrPod("p", nrRL("cpu", "8000m", "memory", "5000")),
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("16000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 75, "n2": 50},
	}}
	nrRunScores(t, tenTests, nrFit(configv1.RequestedToCapacityRatio, most...))
}

// TestShapeScore follows upstream's TestBrokenLinearFunction, on shapes already scaled to 0..100 as the
// plugin does: the lower point's score plus the slope part, truncated towards zero (as Go's integer
// division), flat before the first point and after the last.
func TestShapeScore(t *testing.T) {
	shape := func(points ...int32) []configv1.UtilizationShapePoint {
		var out []configv1.UtilizationShapePoint
		for i := 0; i+1 < len(points); i += 2 {
			out = append(out, configv1.UtilizationShapePoint{Utilization: points[i], Score: points[i+1]})
		}
		return out
	}
	tests := []struct {
		shape []configv1.UtilizationShapePoint
		want  map[int64]int64 // utilization: score
	}{
		{shape(10, 1, 90, 9), map[int64]int64{0: 10, 9: 10, 10: 10, 15: 15, 19: 19, 20: 20, 89: 89, 90: 90, 99: 90, 100: 90}},
		{shape(0, 2, 40, 10, 100, 0), map[int64]int64{0: 20, 20: 60, 30: 80, 40: 100, 70: 50, 100: 0}},
		{shape(0, 2, 40, 2, 100, 2), map[int64]int64{0: 20, 20: 20, 40: 20, 70: 20, 100: 20}},
		// falling: 100 + (-100×10)/30 = 100 - 33 = 67 (flooring would give 66)
		{shape(0, 10, 30, 0), map[int64]int64{0: 100, 10: 67, 20: 34, 30: 0, 100: 0}},
		{shape(0, 0, 30, 10), map[int64]int64{10: 33, 20: 66, 29: 96}},
		{shape(50, 5), map[int64]int64{0: 50, 50: 50, 100: 50}},
	}
	for _, tc := range tests {
		got := map[int64]int64{}
		for u := range tc.want {
			got[u] = shapeScore(tc.shape, u)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("shape %v (-want +got):\n%s", tc.shape, diff)
		}
	}
}

// Pods of upstream's balanced_allocation_test.
var (
	nrCPUOnly      = nrPod("cpu-only", nrRL("cpu", "1000m", "memory", "0"), nrRL("cpu", "2000m", "memory", "0"))
	nrCPUAndMemory = nrPod("cpu-mem", nrRL("cpu", "1000m", "memory", "2000"), nrRL("cpu", "2000m", "memory", "3000"))
	nrWithGPU      = nrPod("cpu-mem-gpu", nrRL("cpu", "1000m", "memory", "2000"), nrRL("cpu", "2000m", "memory", "3000", "nvidia.com/gpu", "3"))
	nrGPUResources = []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: "nvidia.com/gpu", Weight: 1}}
)

func nrBalanced(resources []configv1.ResourceSpec) fxPlugin {
	var args runtime.Object
	if resources != nil {
		args = &configv1.NodeResourcesBalancedAllocationArgs{Resources: resources}
	}
	return fxPlugin{name: NodeResourcesBalancedAllocName, args: args}
}

// TestBalancedAllocationScore follows upstream's balanced_allocation_test: 100 × (1 − the standard deviation
// of the requested fractions, each capped at 1), counting actual requests (no 100m / 200Mi defaults); for two
// resources the deviation is |f1 − f2| / 2, as upstream, which rounds differently from the general formula.
func TestBalancedAllocationScore(t *testing.T) {
	tests := []nrScoreCase{{
		// n1: 0.75 and 0.5: 87; n2: 0.5, 0.5: 100
		name:  "nothing scheduled, resources requested, differently sized nodes",
		pod:   nrCPUAndMemory,
		nodes: nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("6000m", "10000"), nil, nil),
		want:  map[string]int64{"n1": 87, "n2": 100},
	}, {
		// n1: 0.6, 0.25: 82; n2: 0.6, 0.5: 95
		name:  "resources requested, pods scheduled with resources",
		pod:   nrCPUAndMemory,
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "20000"), []*corev1.Pod{nrCPUOnly}, []*corev1.Pod{nrCPUAndMemory}),
		want:  map[string]int64{"n1": 82, "n2": 95},
	}, {
		name:  "resources requested, pods scheduled with resources, differently sized nodes",
		pod:   nrCPUAndMemory,
		nodes: nrTwoNodes(nrCPUMem("10000m", "20000"), nrCPUMem("10000m", "50000"), []*corev1.Pod{nrCPUOnly}, []*corev1.Pod{nrCPUAndMemory}),
		want:  map[string]int64{"n1": 82, "n2": 80},
	}, {
		// n1: 1 and 0: 50; n2: 1 and 0.5: 75
		name:  "requested resources at node capacity",
		pod:   nrCPUOnly,
		nodes: nrTwoNodes(nrCPUMem("6000m", "10000"), nrCPUMem("6000m", "10000"), []*corev1.Pod{nrCPUOnly}, []*corev1.Pod{nrCPUAndMemory}),
		want:  map[string]int64{"n1": 50, "n2": 75},
	}, {
		// n1: 0.857, 0.125, 4/8: std 0.2989: 70; n2: 0.857, 0.125, 1/8: std 0.345: 65
		name:      "three resources including a scalar one",
		resources: nrGPUResources,
		pod:       nrPod("p", nrRL("memory", "0", "nvidia.com/gpu", "1")),
		nodes: nrTwoNodes(nrCPUMem("3500m", "40000", "nvidia.com/gpu", "8"), nrCPUMem("3500m", "40000", "nvidia.com/gpu", "8"),
			[]*corev1.Pod{nrWithGPU}, []*corev1.Pod{nrCPUAndMemory}),
		want: map[string]int64{"n1": 70, "n2": 65},
	}, {
		// gpu left out on both: 0.857 and 0.125: 63
		name:      "a scalar resource the pod does not request is left out",
		resources: nrGPUResources,
		pod:       nrCPUAndMemory,
		nodes:     nrTwoNodes(nrCPUMem("3500m", "40000", "nvidia.com/gpu", "8"), nrCPUMem("3500m", "40000"), nil, nil),
		want:      map[string]int64{"n1": 63, "n2": 63},
	}, {
		// 0.8 and 0.1: (1 − 0.7/2) × 100 = 64.99… → 64 (the general formula gives 65)
		name:  "two resources: |f1 − f2| / 2 as upstream",
		pod:   nrPod("p", nrRL("cpu", "800m", "memory", "1Gi")),
		nodes: nrTwoNodes(nrCPUMem("1000m", "10Gi"), nrCPUMem("1000m", "1Gi"), nil, nil),
		want:  map[string]int64{"n1": 64, "n2": 90},
	}, {
		// the request-less pod in place counts nothing: 0.5 and 0.5
		name:  "actual requests, no defaults",
		pod:   nrPod("p", nrRL("cpu", "500m", "memory", "500Mi")),
		nodes: nrTwoNodes(nrCPUMem("1000m", "1000Mi"), nrCPUMem("1000m", "1000Mi"), []*corev1.Pod{nrPod("e", nil)}, nil),
		want:  map[string]int64{"n1": 100, "n2": 100},
	}, {
		// cpu: the containers with the sidecar 400m, the later init container with the sidecar 800m, plus 200m
		// overhead: 1000m; memory 400Mi + 200Mi overhead
		name: "init containers, sidecars and overhead count",
		pod: func() *corev1.Pod {
			p := nrInit(nrPod("p", nrRL("cpu", "200m", "memory", "400Mi")), true, nrRL("cpu", "200m"))
			p = nrInit(p, false, nrRL("cpu", "600m"))
			p.Spec.Overhead = nrRL("cpu", "200m", "memory", "200Mi")
			return p
		}(),
		// n1: 1 and 0.6: 80; n2: 0.5 and 0.6: 95
		nodes: nrTwoNodes(nrCPUMem("1000m", "1000Mi"), nrCPUMem("2000m", "1000Mi"), nil, nil),
		want:  map[string]int64{"n1": 80, "n2": 95},
	}, {
		name:      "three resources, one beyond allocatable capped at 1",
		resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: "ephemeral-storage", Weight: 1}},
		pod:       nrPod("p", nrRL("cpu", "2000m", "memory", "500", "ephemeral-storage", "1000")),
		// n1: 1, 0.5, 1: std 0.2357: 76; n2: 1, 0.5, 0.5: 76
		nodes: nrTwoNodes(nrCPUMem("1000m", "1000", "ephemeral-storage", "1000"), nrCPUMem("1000m", "1000", "ephemeral-storage", "2000"), nil, nil),
		want:  map[string]int64{"n1": 76, "n2": 76},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bothWays(t, func(t *testing.T, withoutPre bool) {
				got := nbScores(t, nrBalanced(tc.resources), withoutPre, tc.pod, tc.nodes(t)...)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("scores (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestBalancedAllocationBestEffort: a pod requesting none of the scored resources skips BalancedAllocation at
// PreScore (upstream kubernetes#129138: best-effort pods would all pile onto the most balanced node); when
// PreScore did not run, Score gives it 0 everywhere.
func TestBalancedAllocationBestEffort(t *testing.T) {
	nodes := func(t *testing.T) []*framework.NodeInfo {
		return nrTwoNodes(nrCPUMem("4000m", "10000"), nrCPUMem("4000m", "10000"), []*corev1.Pod{nrCPUOnly}, nil)(t)
	}
	tests := []struct {
		name      string
		resources []configv1.ResourceSpec
		pod       *corev1.Pod
		skip      bool
	}{
		{name: "no containers", pod: nrPod("p"), skip: true},
		{name: "containers without requests", pod: nrPod("p", nil, nil), skip: true},
		{name: "explicit zero requests", pod: nrPod("p", nrRL("cpu", "0", "memory", "0")), skip: true},
		{name: "only a resource that is not scored", pod: nrPod("p", nrRL("nvidia.com/gpu", "1")), skip: true},
		{name: "a scored scalar resource", resources: nrGPUResources, pod: nrPod("p", nrRL("nvidia.com/gpu", "1"))},
		{name: "only memory", pod: nrPod("p", nrRL("memory", "1"))},
		{name: "only overhead", pod: func() *corev1.Pod { p := nrPod("p", nil); p.Spec.Overhead = nrRL("cpu", "10m"); return p }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plugin := nrBalanced(tc.resources)
			if got := nbPreScoreSkips(t, plugin, tc.pod, nodes(t)...); got != tc.skip {
				t.Fatalf("PreScore skipped %v, want %v", got, tc.skip)
			}
			if !tc.skip {
				return
			}
			for _, withoutPre := range []bool{false, true} {
				if got := nbScores(t, plugin, withoutPre, tc.pod, nodes(t)...); !cmp.Equal(got, map[string]int64{"n1": 0, "n2": 0}) {
					t.Errorf("without PreScore %v: scores %v, want zeros", withoutPre, got)
				}
			}
		})
	}
}

func TestNodeResourcesFitArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    runtime.Object
		wantErr string
	}{
		{name: "nil", args: nil},
		{name: "empty", args: &configv1.NodeResourcesFitArgs{}},
		{name: "MostAllocated", args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.MostAllocated}}},
		{name: "RequestedToCapacityRatio without a shape", wantErr: "scoringStrategy.requestedToCapacityRatio.shape: Required value",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.RequestedToCapacityRatio}}},
		{name: "unknown strategy", wantErr: `scoringStrategy.type: Unsupported value: "Balanced"`,
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: "Balanced"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newNodeResourcesFit(tc.args, &framework.Framework{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestNodeResourcesFitProperty: for any node and pods, the pod fits exactly when one more pod is allowed and
// every resource it requests is within what the node's pods leave; the rejection is unresolvable exactly when
// a request exceeds the node's allocatable outright; and placing a pod that fits keeps every requested
// resource within allocatable. LeastAllocated and MostAllocated of one resource add up to 99 or 100.
func TestNodeResourcesFitProperty(t *testing.T) {
	names := []corev1.ResourceName{"cpu", "memory", "ephemeral-storage", "example.com/gpu"}
	rapid.Check(t, func(rt *rapid.T) {
		drawReqs := func(label string, maxes ...int) corev1.ResourceList {
			out := corev1.ResourceList{}
			for i, name := range names {
				if v := rapid.IntRange(-2, maxes[i]).Draw(rt, label+"/"+string(name)); v >= 0 {
					q := resource.NewQuantity(int64(v), resource.DecimalSI)
					if name == "cpu" {
						q = resource.NewMilliQuantity(int64(v), resource.DecimalSI)
					}
					out[name] = *q
				}
			}
			return out
		}
		alloc := drawReqs("alloc", 4000, 4000, 4000, 8)
		alloc[corev1.ResourcePods] = *resource.NewQuantity(int64(rapid.IntRange(0, 4).Draw(rt, "pods")), resource.DecimalSI)
		node := fxNode("n", 0)
		node.Status.Allocatable = alloc
		ni := framework.NewNodeInfo(node)
		for i := range rapid.IntRange(0, 3).Draw(rt, "existing") {
			ni.AddPod(fxInfo(rt, nrPod(fmt.Sprint("e", i), drawReqs(fmt.Sprint("e", i), 2000, 2000, 2000, 4))))
		}
		pod := fxInfo(rt, nrPod("p", drawReqs("p", 3000, 3000, 3000, 6)))

		fits, unresolvable := len(ni.Pods)+1 <= ni.Allocatable.AllowedPodNumber, false
		for _, name := range names {
			want := pod.Requests.Get(name)
			if want == 0 {
				continue
			}
			if want > ni.Allocatable.Get(name)-ni.Requested.Get(name) {
				fits = false
			}
			if want > ni.Allocatable.Get(name) {
				unresolvable = true
			}
		}
		fit, err := newNodeResourcesFit(nil, &framework.Framework{})
		if err != nil {
			rt.Fatal(err)
		}
		st := fit.(framework.FilterPlugin).Filter(rt.Context(), framework.NewCycleState(), pod, ni)
		if st.IsSuccess() != fits || (!fits && (st.Code() == framework.UnschedulableAndUnresolvable) != unresolvable) {
			rt.Fatalf("Filter %s; want fits %v unresolvable %v (requests %+v, in use %+v, allocatable %+v)",
				fxReasons(st), fits, unresolvable, pod.Requests, ni.Requested, ni.Allocatable)
		}
		if fits {
			after := ni.Clone()
			after.AddPod(pod)
			for _, name := range names {
				if after.Requested.Get(name) > after.Allocatable.Get(name) && pod.Requests.Get(name) > 0 {
					rt.Fatalf("%s: %d requested of %d after placing a pod that fits", name, after.Requested.Get(name), after.Allocatable.Get(name))
				}
			}
		}

		one := []configv1.ResourceSpec{{Name: "cpu", Weight: 1}}
		least, _ := newNodeResourcesFit(&configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated, Resources: one}}, nil)
		most, _ := newNodeResourcesFit(&configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.MostAllocated, Resources: one}}, nil)
		l, _ := least.(framework.ScorePlugin).Score(rt.Context(), framework.NewCycleState(), pod, ni)
		m, _ := most.(framework.ScorePlugin).Score(rt.Context(), framework.NewCycleState(), pod, ni)
		if used := ni.NonZeroRequested.MilliCPU + pod.NonZero.MilliCPU; ni.Allocatable.MilliCPU > 0 && used <= ni.Allocatable.MilliCPU && (l+m < 99 || l+m > 100) {
			rt.Fatalf("LeastAllocated %d + MostAllocated %d for %dm of %dm", l, m, used, ni.Allocatable.MilliCPU)
		}
	})
}
