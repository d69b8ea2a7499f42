package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

func nominee(t *testing.T, name string, priority int32) *framework.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{Priority: &priority}})
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

// TestDisplaceNominated: a new nomination to a node displaces the lower-priority pods nominated there, keeps the
// others, and leaves other nodes alone.
func TestDisplaceNominated(t *testing.T) {
	c := newClusterCache("c1")
	c.setNominated(nominee(t, "low", 10), "n1")
	c.setNominated(nominee(t, "equal", 100), "n1")
	c.setNominated(nominee(t, "high", 1000), "n1")
	c.setNominated(nominee(t, "elsewhere", 1), "n2")
	got := c.displaceNominated("n1", 100)
	if len(got) != 1 || got[0].Name != "low" {
		t.Fatalf("displaced %v, want [low]", got)
	}
	var left []string
	for _, p := range c.nominated["n1"] {
		left = append(left, p.Info.Pod.Name)
	}
	if len(left) != 2 || left[0] != "equal" || left[1] != "high" || len(c.nominated["n2"]) != 1 {
		t.Fatalf("nominated after: n1 %v, n2 %d", left, len(c.nominated["n2"]))
	}
	if got := c.displaceNominated("n1", 5000); len(got) != 2 || len(c.nominated["n1"]) != 0 {
		t.Fatalf("displacing everything: %d displaced, %d left", len(got), len(c.nominated["n1"]))
	}
	if _, ok := c.nominated["n1"]; ok {
		t.Fatal("an empty nomination list is kept")
	}
}

// TestNominationsMoveAndClear: a pod is nominated to one node at a time; a new nomination moves it, clearing
// removes it wherever it is (and twice is harmless), a displaced pod is forgotten.
func TestNominationsMoveAndClear(t *testing.T) {
	c := newClusterCache("c1")
	a, b := nominee(t, "a", 10), nominee(t, "b", 10)
	c.setNominated(a, "n1")
	c.setNominated(b, "n1")
	c.setNominated(a, "n2")
	names := func(node string) (out []string) {
		for _, p := range c.nominated[node] {
			out = append(out, p.Info.Pod.Name)
		}
		return out
	}
	if got, want := fmt.Sprint(names("n1"), names("n2")), "[b] [a]"; got != want {
		t.Fatalf("after moving a: n1 n2 = %s, want %s", got, want)
	}
	c.clearNominated("b")
	c.clearNominated("b")
	if _, ok := c.nominated["n1"]; ok || c.nominatedTo["b"] != "" {
		t.Fatalf("b cleared, yet n1 holds %v (b to %q)", names("n1"), c.nominatedTo["b"])
	}
	if got := c.displaceNominated("n2", 100); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("displaced %v, want [a]", got)
	}
	if len(c.nominated) != 0 || len(c.nominatedTo) != 0 {
		t.Fatalf("after displacing a: nominated %v, nominatedTo %v; want both empty", c.nominated, c.nominatedTo)
	}
	c.setNominated(a, "n3") // a displaced pod can be nominated again
	if got := names("n3"); len(got) != 1 || c.nominatedTo["a"] != "n3" {
		t.Fatalf("a nominated again: n3 %v, nominatedTo %q", got, c.nominatedTo["a"])
	}
}

// TestNominatedNodeFirst: a pod nominated to a node that fits it goes there although another node scores
// better; one nominated to a node that no longer fits, or to no known node, is placed by the ordinary search.
func TestNominatedNodeFirst(t *testing.T) {
	sim, err := NewSimulator(nil)
	if err != nil {
		t.Fatal(err)
	}
	small := benchNode(0) // 4 CPU
	big := benchNode(1)
	big.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	sim.AddNode(small)
	sim.AddNode(big)
	place := func(i int, nominated string, cpu string) string {
		t.Helper()
		p := benchPod(i)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		p.Status.NominatedNodeName = nominated
		node, msg, err := sim.Schedule(t.Context(), p)
		if err != nil || node == "" {
			t.Fatalf("pod %d: %q %q %v", i, node, msg, err)
		}
		return node
	}
	if got := place(0, "", "1"); got != big.Name {
		t.Fatalf("without a nomination the pod went to %s, want the emptier %s", got, big.Name)
	}
	if got := place(1, small.Name, "1"); got != small.Name {
		t.Fatalf("nominated to %s, the pod went to %s", small.Name, got)
	}
	if got := place(2, small.Name, "8"); got != big.Name {
		t.Fatalf("nominated to %s, where it does not fit, the pod went to %s, want %s", small.Name, got, big.Name)
	}
	if got := place(3, "gone", "1"); got != big.Name {
		t.Fatalf("nominated to an unknown node, the pod went to %s, want %s", got, big.Name)
	}
}
