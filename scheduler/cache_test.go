package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		left = append(left, p.Pod.Name)
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
