package framework

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
)

// namedPod is podSpec with its own name and UID.
func namedPod(name string, spec corev1.PodSpec) *corev1.Pod {
	p := podSpec(spec)
	p.Name, p.UID = name, types.UID("uid-"+name)
	return p
}

// withPorts gives a container host ports written "protocol/ip/port" (protocol and ip may be empty).
func withPorts(c corev1.Container, ports ...string) corev1.Container {
	for _, s := range ports {
		f := strings.Split(s, "/")
		port, err := strconv.Atoi(f[2])
		if err != nil {
			panic(s)
		}
		c.Ports = append(c.Ports, corev1.ContainerPort{Protocol: corev1.Protocol(f[0]), HostIP: f[1],
			HostPort: int32(port), ContainerPort: 80})
	}
	return c
}

func mustInfo(t interface {
	Helper()
	Fatal(...any)
}, pod *corev1.Pod) *PodInfo {
	t.Helper()
	pi, err := NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

func testNode(name string, alloc corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

// nodeSums is what a NodeInfo accounts for, in a comparable form.
type nodeSums struct {
	Pods, WithAffinity, WithRequiredAnti []string
	Requested, NonZero                   Resource
	Ports                                HostPorts
}

func sumsOf(n *NodeInfo) nodeSums {
	names := func(pods []*PodInfo) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Pod.Name)
		}
		slices.Sort(out)
		return out
	}
	return nodeSums{Pods: names(n.Pods), WithAffinity: names(n.PodsWithAffinity), WithRequiredAnti: names(n.PodsWithRequiredAntiAffinity),
		Requested: dropZeroScalars(n.Requested), NonZero: dropZeroScalars(n.NonZeroRequested), Ports: portsOrEmpty(n.UsedPorts)}
}

// portsOrEmpty: a node whose pods never held a host port has no map at all.
func portsOrEmpty(h HostPorts) HostPorts {
	if h == nil {
		return HostPorts{}
	}
	return h
}

// dropZeroScalars forgets extended resources summing to zero (a removed pod leaves its key at 0).
func dropZeroScalars(r Resource) Resource {
	r = r.Clone()
	for k, v := range r.Scalar {
		if v == 0 {
			delete(r.Scalar, k)
		}
	}
	if len(r.Scalar) == 0 {
		r.Scalar = nil
	}
	return r
}

// TestNodeInfoAddRemovePod walks one node through adds and removals: requests sum as the filters see them,
// non-zero requests as the scoring strategies do (100m / 200Mi for containers without a request), pods with
// affinity terms are indexed, host ports are held, and removing puts everything back.
func TestNodeInfoAddRemovePod(t *testing.T) {
	affine := func(name string, anti bool) *corev1.Pod {
		term := corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}
		p := namedPod(name, corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1", "memory", "1Gi"))}})
		if anti {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		} else {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term}}}}
		}
		return p
	}
	pods := map[string]*corev1.Pod{
		// 500m and 1Gi requested; the second container counts 100m / 200Mi when scoring.
		"web": namedPod("web", corev1.PodSpec{Containers: []corev1.Container{
			withPorts(ctr("a", rl("cpu", "500m", "memory", "1Gi")), "TCP//8080"), ctr("b", nil)}}),
		// init 2 CPU above the containers' 1; overhead 250m on top; ephemeral storage and a GPU.
		"batch": namedPod("batch", corev1.PodSpec{
			InitContainers: []corev1.Container{withPorts(ctr("i", rl("cpu", "2")), "TCP//9000")},
			Containers:     []corev1.Container{ctr("c", rl("cpu", "1", "ephemeral-storage", "1Gi", "example.com/gpu", "2"))},
			Overhead:       rl("cpu", "250m")}),
		"near":  affine("near", false),
		"guard": affine("guard", true),
	}
	infos := map[string]*PodInfo{}
	for name, p := range pods {
		infos[name] = mustInfo(t, p)
	}
	gpu := map[corev1.ResourceName]int64{"example.com/gpu": 2}
	steps := []struct {
		add, remove string
		wantErr     bool
		want        nodeSums
	}{{
		add: "web",
		want: nodeSums{Pods: []string{"web"},
			Requested: Resource{MilliCPU: 500, Memory: 1024 * mi, AllowedPodNumber: 1},
			NonZero:   Resource{MilliCPU: 600, Memory: 1224 * mi},
			Ports:     HostPorts{{IP: "0.0.0.0", Protocol: "TCP", Port: 8080}: 1}},
	}, {
		add: "batch",
		// batch's init container port is not held (it has exited before the containers start).
		want: nodeSums{Pods: []string{"batch", "web"},
			Requested: Resource{MilliCPU: 2750, Memory: 1024 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 2, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 2850, Memory: 1424 * mi},
			Ports:     HostPorts{{IP: "0.0.0.0", Protocol: "TCP", Port: 8080}: 1}},
	}, {
		add: "near",
		want: nodeSums{Pods: []string{"batch", "near", "web"}, WithAffinity: []string{"near"},
			Requested: Resource{MilliCPU: 3750, Memory: 2048 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 3, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 3850, Memory: 2448 * mi},
			Ports:     HostPorts{{IP: "0.0.0.0", Protocol: "TCP", Port: 8080}: 1}},
	}, {
		add: "guard",
		want: nodeSums{Pods: []string{"batch", "guard", "near", "web"}, WithAffinity: []string{"guard", "near"}, WithRequiredAnti: []string{"guard"},
			Requested: Resource{MilliCPU: 4750, Memory: 3072 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 4, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 4850, Memory: 3472 * mi},
			Ports:     HostPorts{{IP: "0.0.0.0", Protocol: "TCP", Port: 8080}: 1}},
	}, {
		remove: "web",
		want: nodeSums{Pods: []string{"batch", "guard", "near"}, WithAffinity: []string{"guard", "near"}, WithRequiredAnti: []string{"guard"},
			Requested: Resource{MilliCPU: 4250, Memory: 2048 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 3, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 4250, Memory: 2248 * mi},
			Ports:     HostPorts{}},
	}, {
		remove: "web", wantErr: true,
		want: nodeSums{Pods: []string{"batch", "guard", "near"}, WithAffinity: []string{"guard", "near"}, WithRequiredAnti: []string{"guard"},
			Requested: Resource{MilliCPU: 4250, Memory: 2048 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 3, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 4250, Memory: 2248 * mi},
			Ports:     HostPorts{}},
	}, {
		remove: "guard",
		want: nodeSums{Pods: []string{"batch", "near"}, WithAffinity: []string{"near"},
			Requested: Resource{MilliCPU: 3250, Memory: 1024 * mi, EphemeralStorage: 1024 * mi, AllowedPodNumber: 2, Scalar: gpu},
			NonZero:   Resource{MilliCPU: 3250, Memory: 1224 * mi},
			Ports:     HostPorts{}},
	}, {
		remove: "batch",
		want: nodeSums{Pods: []string{"near"}, WithAffinity: []string{"near"},
			Requested: Resource{MilliCPU: 1000, Memory: 1024 * mi, AllowedPodNumber: 1},
			NonZero:   Resource{MilliCPU: 1000, Memory: 1024 * mi},
			Ports:     HostPorts{}},
	}, {
		remove: "near",
		want:   nodeSums{Ports: HostPorts{}},
	}}
	n := NewNodeInfo(testNode("n1", rl("cpu", "8", "memory", "16Gi")))
	for i, s := range steps {
		gen := n.Generation
		var err error
		if s.add != "" {
			n.AddPod(infos[s.add])
		} else {
			err = n.RemovePod(infos[s.remove].Pod.UID)
		}
		if (err != nil) != s.wantErr {
			t.Fatalf("step %d (add %q remove %q): err = %v, want error %v", i, s.add, s.remove, err, s.wantErr)
		}
		if changed := n.Generation != gen; changed == s.wantErr || n.Generation < gen {
			t.Errorf("step %d: generation %d after %d: a change takes a new, higher generation; a failed step none", i, n.Generation, gen)
		}
		if diff := cmp.Diff(s.want, sumsOf(n)); diff != "" {
			t.Errorf("step %d (add %q remove %q) (-want +got):\n%s", i, s.add, s.remove, diff)
		}
	}
}

func TestNodeInfoSetNode(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want Resource
	}{{
		name: "allocatable read, pods defaulting to 110 when not reported",
		node: testNode("n", rl("cpu", "3500m", "memory", "1Gi", "ephemeral-storage", "10Gi", "example.com/gpu", "4", "hugepages-2Mi", "8Mi")),
		want: Resource{MilliCPU: 3500, Memory: 1024 * mi, EphemeralStorage: 10240 * mi, AllowedPodNumber: 110,
			Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 4, "hugepages-2Mi": 8 * mi}},
	}, {
		name: "a reported pod capacity is kept, 0 included",
		node: testNode("n", rl("cpu", "1", "pods", "0")),
		want: Resource{MilliCPU: 1000},
	}, {
		name: "nothing allocatable",
		node: testNode("n", nil),
		want: Resource{AllowedPodNumber: 110},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNodeInfo(tc.node)
			if diff := cmp.Diff(tc.want, n.Allocatable); diff != "" {
				t.Errorf("Allocatable (-want +got):\n%s", diff)
			}
			if n.Name() != "n" || n.Node() != tc.node || n.Generation == 0 {
				t.Errorf("name %q node %p generation %d", n.Name(), n.Node(), n.Generation)
			}
		})
	}
	pods := NewNodeInfo(nil)
	if pods.Name() != "" || pods.Node() != nil || pods.Generation != 0 {
		t.Errorf("NodeInfo without a node: name %q node %v generation %d", pods.Name(), pods.Node(), pods.Generation)
	}
	pods.SetNode(testNode("late", rl("cpu", "2")))
	if pods.Name() != "late" || pods.Allocatable.MilliCPU != 2000 || pods.Generation == 0 {
		t.Errorf("after SetNode: name %q cpu %d generation %d", pods.Name(), pods.Allocatable.MilliCPU, pods.Generation)
	}
}

// TestPodHostPorts: a pod holds its containers' and its sidecars' host ports (regular init containers have
// exited by then, as upstream's GetHostPorts); an empty hostIP is 0.0.0.0 and an empty protocol TCP.
func TestPodHostPorts(t *testing.T) {
	pod := namedPod("p", corev1.PodSpec{
		InitContainers: []corev1.Container{
			withPorts(ctr("init", nil), "TCP//7000"),
			withPorts(sidecar("proxy", nil), "UDP/10.0.0.1/7001"),
		},
		Containers: []corev1.Container{
			withPorts(ctr("a", nil), "//8080", "SCTP/::1/8081"),
			{Name: "b", Ports: []corev1.ContainerPort{{ContainerPort: 9090}}}, // no host port
		},
	})
	want := []HostPort{
		{IP: "10.0.0.1", Protocol: "UDP", Port: 7001},
		{IP: "0.0.0.0", Protocol: "TCP", Port: 8080},
		{IP: "::1", Protocol: "SCTP", Port: 8081},
	}
	if diff := cmp.Diff(want, PodHostPorts(pod)); diff != "" {
		t.Errorf("PodHostPorts (-want +got):\n%s", diff)
	}
	if got := PodHostPorts(namedPod("none", corev1.PodSpec{Containers: []corev1.Container{ctr("c", nil)}})); got != nil {
		t.Errorf("a pod without host ports: %v", got)
	}
}

// TestHostPortsConflicts follows upstream's HostPortInfo.CheckConflict: the same protocol and port clash on
// the same IP, or when either side binds every address (0.0.0.0); different IPs or protocols do not.
func TestHostPortsConflicts(t *testing.T) {
	tests := []struct {
		name string
		used []string // ports held by pods on the node
		want string
		hit  bool
	}{
		{name: "nothing in use", want: "TCP/127.0.0.1/8080"},
		{name: "another port", used: []string{"UDP/127.0.0.1/9090"}, want: "UDP/127.0.0.1/8080"},
		{name: "same UDP port", used: []string{"UDP/127.0.0.1/8080"}, want: "UDP/127.0.0.1/8080", hit: true},
		{name: "same TCP port", used: []string{"TCP/127.0.0.1/8080"}, want: "TCP/127.0.0.1/8080", hit: true},
		{name: "another host IP", used: []string{"TCP/127.0.0.1/8080"}, want: "TCP/127.0.0.2/8080"},
		{name: "another protocol", used: []string{"TCP/127.0.0.1/8080"}, want: "UDP/127.0.0.1/8080"},
		{name: "SCTP and TCP do not clash", used: []string{"SCTP/0.0.0.0/8080"}, want: "TCP/0.0.0.0/8080"},
		{name: "a specific IP against 0.0.0.0 in use", used: []string{"TCP/0.0.0.0/8001"}, want: "TCP/10.0.10.10/8001", hit: true},
		{name: "0.0.0.0 against a specific IP in use", used: []string{"TCP/10.0.10.10/8001"}, want: "TCP/0.0.0.0/8001", hit: true},
		{name: "0.0.0.0 against another protocol on a specific IP", used: []string{"UDP/10.0.10.10/8001"}, want: "TCP/0.0.0.0/8001"},
		{name: "empty host IP is 0.0.0.0", used: []string{"TCP/127.0.0.1/8001"}, want: "TCP//8001", hit: true},
		{name: "empty protocol is TCP", used: []string{"TCP/127.0.0.1/8001"}, want: "/127.0.0.1/8001", hit: true},
		{name: "second of several ports", used: []string{"TCP/0.0.0.0/8001", "UDP/127.0.0.1/8002"}, want: "UDP/127.0.0.1/8002", hit: true},
		{name: "a sidecar's port is held", used: []string{"sidecar:TCP//8080"}, want: "TCP/127.0.0.1/8080", hit: true},
		{name: "an init container's port is not", used: []string{"init:TCP//8080"}, want: "TCP/127.0.0.1/8080"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNodeInfo(testNode("n", nil))
			for i, u := range tc.used {
				spec := corev1.PodSpec{}
				switch kind, port, _ := strings.Cut(u, ":"); {
				case kind == "sidecar":
					spec.InitContainers = []corev1.Container{withPorts(sidecar("s", nil), port)}
				case kind == "init":
					spec.InitContainers = []corev1.Container{withPorts(ctr("i", nil), port)}
				default:
					spec.Containers = []corev1.Container{withPorts(ctr("c", nil), u)}
				}
				n.AddPod(mustInfo(t, namedPod(fmt.Sprint("used", i), spec)))
			}
			want := PodHostPorts(namedPod("p", corev1.PodSpec{Containers: []corev1.Container{withPorts(ctr("c", nil), tc.want)}}))
			if got := n.UsedPorts.Conflicts(want[0]); got != tc.hit {
				t.Errorf("Conflicts(%+v) with %v in use = %v, want %v", want[0], tc.used, got, tc.hit)
			}
		})
	}
}

// TestHostPortsCounted: two pods holding the same port (possible for pods bound by nodeName) keep it held
// until both are gone. Upstream's HostPortInfo is a set and frees the port with the first removal; counting
// is the stricter choice.
func TestHostPortsCounted(t *testing.T) {
	n := NewNodeInfo(testNode("n", nil))
	a := mustInfo(t, namedPod("a", corev1.PodSpec{Containers: []corev1.Container{withPorts(ctr("c", nil), "TCP//80")}}))
	b := mustInfo(t, namedPod("b", corev1.PodSpec{Containers: []corev1.Container{withPorts(ctr("c", nil), "TCP//80")}}))
	port := HostPort{IP: "0.0.0.0", Protocol: "TCP", Port: 80}
	n.AddPod(a)
	n.AddPod(b)
	for _, step := range []struct {
		remove *PodInfo
		held   bool
	}{{a, true}, {b, false}} {
		if err := n.RemovePod(step.remove.Pod.UID); err != nil {
			t.Fatal(err)
		}
		if got := n.UsedPorts.Conflicts(port); got != step.held {
			t.Errorf("after removing %s: port held = %v, want %v", step.remove.Pod.Name, got, step.held)
		}
	}
}

// TestNodeInfoClone: changes to a clone (preemption's what-if) leave the original as it was.
func TestNodeInfoClone(t *testing.T) {
	n := NewNodeInfo(testNode("n", rl("cpu", "4", "example.com/gpu", "2")))
	a := mustInfo(t, namedPod("a", corev1.PodSpec{Containers: []corev1.Container{withPorts(ctr("c", rl("cpu", "1", "example.com/gpu", "1")), "TCP//80")}}))
	n.AddPod(a)
	before := sumsOf(n)
	beforeAlloc := n.Allocatable.Clone()

	c := n.Clone()
	if diff := cmp.Diff(before, sumsOf(c)); diff != "" {
		t.Fatalf("clone differs (-original +clone):\n%s", diff)
	}
	if err := c.RemovePod(a.Pod.UID); err != nil {
		t.Fatal(err)
	}
	c.AddPod(mustInfo(t, namedPod("b", corev1.PodSpec{Containers: []corev1.Container{withPorts(ctr("c", rl("example.com/gpu", "2")), "UDP//53")}})))
	c.Allocatable.Scalar["example.com/gpu"] = 9
	if diff := cmp.Diff(before, sumsOf(n)); diff != "" {
		t.Errorf("original changed by its clone (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeAlloc, n.Allocatable); diff != "" {
		t.Errorf("original allocatable changed by its clone (-before +after):\n%s", diff)
	}
	if c.Generation <= n.Generation {
		t.Errorf("clone generation %d not past the original's %d", c.Generation, n.Generation)
	}
}

func TestSnapshot(t *testing.T) {
	n1, n2 := NewNodeInfo(testNode("n1", nil)), NewNodeInfo(testNode("n2", nil))
	s := NewSnapshot("c1", []*NodeInfo{n1, n2}, func(ns string) labels.Set { return labels.Set{"name": ns} })
	if got, ok := s.Get("n2"); !ok || got != n2 {
		t.Errorf("Get(n2) = %v, %v", got, ok)
	}
	if _, ok := s.Get("n3"); ok {
		t.Error("Get(n3) found a node")
	}
	if got := s.NSLabels("team-a"); got["name"] != "team-a" {
		t.Errorf("NSLabels = %v", got)
	}
	if got := NewSnapshot("c1", nil, nil).NSLabels("x"); got != nil {
		t.Errorf("NSLabels without a source = %v, want nil", got)
	}
}

// TestNodeInfoAddRemoveProperty: whatever pods are added, the sums are the sums of the pods on the node, and
// removing them in any order returns the node to where it started.
func TestNodeInfoAddRemoveProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := NewNodeInfo(testNode("n", rl("cpu", "64", "memory", "256Gi")))
		start := sumsOf(n)
		var infos []*PodInfo
		for i := range rapid.IntRange(0, 8).Draw(rt, "pods") {
			infos = append(infos, mustInfo(rt, drawPod(rt, fmt.Sprint("p", i))))
		}
		for _, pi := range infos {
			gen := n.Generation
			n.AddPod(pi)
			if n.Generation <= gen {
				rt.Fatalf("generation did not grow on AddPod")
			}
			checkSums(rt, n)
		}
		for _, pi := range rapid.Permutation(infos).Draw(rt, "removal order") {
			if err := n.RemovePod(pi.Pod.UID); err != nil {
				rt.Fatalf("RemovePod(%s): %v", pi.Pod.Name, err)
			}
			checkSums(rt, n)
		}
		if diff := cmp.Diff(start, sumsOf(n)); diff != "" {
			rt.Fatalf("after removing every pod (-start +end):\n%s", diff)
		}
	})
}

// drawPod draws a pod of up to three containers, an init container and a sidecar, with or without requests,
// overhead, an extended resource, host ports from a small set (so that pods share some) and affinity terms.
func drawPod(rt *rapid.T, name string) *corev1.Pod {
	reqs := func(label string) corev1.ResourceList {
		if !rapid.Bool().Draw(rt, label+"/requests") {
			return nil
		}
		kv := []string{"cpu", fmt.Sprintf("%dm", rapid.IntRange(0, 4000).Draw(rt, label+"/cpu"))}
		if rapid.Bool().Draw(rt, label+"/memory?") {
			kv = append(kv, "memory", fmt.Sprint(rapid.IntRange(0, 1<<20).Draw(rt, label+"/memory")))
		}
		if rapid.Bool().Draw(rt, label+"/gpu?") {
			kv = append(kv, "example.com/gpu", fmt.Sprint(rapid.IntRange(1, 3).Draw(rt, label+"/gpu")))
		}
		return rl(kv...)
	}
	port := func(c corev1.Container, label string) corev1.Container {
		if rapid.Bool().Draw(rt, label+"/port?") {
			c = withPorts(c, rapid.SampledFrom([]string{"TCP//80", "UDP//53", "TCP/10.0.0.1/80", "/10.0.0.2/443"}).Draw(rt, label+"/port"))
		}
		return c
	}
	spec := corev1.PodSpec{}
	for i := range rapid.IntRange(1, 3).Draw(rt, name+"/containers") {
		label := fmt.Sprintf("%s/c%d", name, i)
		spec.Containers = append(spec.Containers, port(ctr(label, reqs(label)), label))
	}
	if rapid.Bool().Draw(rt, name+"/init?") {
		spec.InitContainers = append(spec.InitContainers, port(ctr("init", reqs(name+"/init")), name+"/init"))
	}
	if rapid.Bool().Draw(rt, name+"/sidecar?") {
		spec.InitContainers = append(spec.InitContainers, port(sidecar("sidecar", reqs(name+"/sidecar")), name+"/sidecar"))
	}
	if rapid.Bool().Draw(rt, name+"/overhead?") {
		spec.Overhead = rl("cpu", "100m", "memory", "64Mi")
	}
	term := corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{}}
	switch rapid.IntRange(0, 2).Draw(rt, name+"/affinity") {
	case 1:
		spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	case 2:
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
	return namedPod(name, spec)
}

// checkSums recomputes the node's sums from its pods.
func checkSums(rt *rapid.T, n *NodeInfo) {
	var want nodeSums
	want.Ports = HostPorts{}
	for _, pi := range n.Pods {
		want.Pods = append(want.Pods, pi.Pod.Name)
		if pi.HasAffinity() {
			want.WithAffinity = append(want.WithAffinity, pi.Pod.Name)
		}
		if len(pi.RequiredAntiAffinityTerms) > 0 {
			want.WithRequiredAnti = append(want.WithRequiredAnti, pi.Pod.Name)
		}
		want.Requested.plus(&pi.Requests, 1)
		want.NonZero.plus(&pi.NonZero, 1)
		for _, p := range PodHostPorts(pi.Pod) {
			want.Ports[p]++
		}
	}
	for _, l := range [][]string{want.Pods, want.WithAffinity, want.WithRequiredAnti} {
		slices.Sort(l)
	}
	want.Requested, want.NonZero = dropZeroScalars(want.Requested), dropZeroScalars(want.NonZero)
	if diff := cmp.Diff(want, sumsOf(n)); diff != "" {
		rt.Fatalf("sums (-recomputed +node):\n%s", diff)
	}
}

// TestGenerationsAreUnique: a clone changed apart from its original never shares a generation with it, so a
// (name, generation) pair names one set of pods (the topology-spread count cache relies on it).
func TestGenerationsAreUnique(t *testing.T) {
	a := NewNodeInfo(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	b := a.Clone()
	pod := func(name string) *PodInfo {
		pi, err := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}})
		if err != nil {
			t.Fatal(err)
		}
		return pi
	}
	a.AddPod(pod("x"))
	b.AddPod(pod("y"))
	if a.Generation == b.Generation {
		t.Fatalf("a clone and its original changed apart share generation %d", a.Generation)
	}
}

func TestNodeInfoUpdatePod(t *testing.T) {
	n := NewNodeInfo(testNode("n", rl("cpu", "8", "memory", "16Gi")))
	pod := namedPod("a", corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: rl("cpu", "1", "memory", "1Gi")}}}})
	pod.Namespace, pod.Labels = "default", map[string]string{"app": "web"}
	n.AddPod(mustInfo(t, pod))
	if err := n.UpdatePod(mustInfo(t, namedPod("stranger", corev1.PodSpec{}))); err == nil {
		t.Fatal("updating a pod that is not on the node: no error")
	}
	steps := []struct {
		name   string
		change func(p *corev1.Pod)
		newSet bool // a pod selector can tell the difference
	}{
		{"status only", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false},
		{"annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "x"} }, false},
		{"bigger request", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("cpu", "2", "memory", "1Gi") }, false},
		{"labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }, true},
		{"deletion", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, true},
	}
	for _, s := range steps {
		gen, setGen := n.Generation, n.PodSetGeneration
		next := n.Pods[0].Pod.DeepCopy()
		s.change(next)
		if err := n.UpdatePod(mustInfo(t, next)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n.Generation <= gen {
			t.Errorf("%s: generation %d after %d, want a new one", s.name, n.Generation, gen)
		}
		if changed := n.PodSetGeneration != setGen; changed != s.newSet {
			t.Errorf("%s: pod set generation changed %v, want %v", s.name, changed, s.newSet)
		}
		if len(n.Pods) != 1 || n.Pods[0].Pod != next {
			t.Errorf("%s: pods %v, want the new state alone", s.name, n.Pods)
		}
	}
	if got := n.Requested.MilliCPU; got != 2000 {
		t.Errorf("requested %dm after the updates, want the last state's 2000m", got)
	}
}
