package queue

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(name string, prio int32) (Key, *corev1.Pod) {
	return Key{Cluster: "c1", Namespace: "default", Name: name},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: corev1.PodSpec{Priority: &prio}}
}

func newTestQueue() (*Queue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	return New(Config{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Clock: clk}), clk
}

func mustPop(t *testing.T, q *Queue) *QueuedPod {
	t.Helper()
	if a, _, _ := q.Lens(); a == 0 {
		t.Fatal("active queue is empty")
	}
	qp, ok := q.Pop()
	if !ok {
		t.Fatal("queue closed")
	}
	return qp
}

func TestPriorityThenTime(t *testing.T) {
	q, clk := newTestQueue()
	for i, p := range []int32{0, 100, 0, 50} {
		k, po := pod(fmt.Sprint("p", i), p)
		q.Add(k, po)
		clk.Step(time.Millisecond)
	}
	var got []string
	for range 4 {
		got = append(got, mustPop(t, q).Key.Name)
	}
	if want := "[p1 p3 p0 p2]"; fmt.Sprint(got) != want {
		t.Fatalf("pop order %v, want %s", got, want)
	}
}

func TestBackoffDoublesToMax(t *testing.T) {
	q, clk := newTestQueue()
	k, p := pod("p", 0)
	q.Add(k, p)
	var waits []time.Duration
	for range 6 {
		qp := mustPop(t, q)
		q.Unschedulable(qp, sets.New("X"), true) // errors go through backoff
		start := clk.Now()
		for {
			clk.Step(100 * time.Millisecond)
			q.FlushBackoff()
			if a, _, _ := q.Lens(); a == 1 {
				break
			}
		}
		waits = append(waits, clk.Now().Sub(start).Round(time.Second))
	}
	if want := "[1s 2s 4s 8s 10s 10s]"; fmt.Sprint(waits) != want {
		t.Fatalf("backoffs %v, want %s", waits, want)
	}
}

func TestUnschedulableWaitsForAHelpfulEvent(t *testing.T) {
	q, clk := newTestQueue()
	k, p := pod("p", 0)
	q.Add(k, p)
	qp := mustPop(t, q)
	q.Unschedulable(qp, sets.New("NodeResourcesFit"), false)
	clk.Step(time.Minute)
	q.FlushBackoff()
	if a, b, u := q.Lens(); a != 0 || b != 0 || u != 1 {
		t.Fatalf("after a minute without events: active %d backoff %d unschedulable %d, want parked", a, b, u)
	}
	// An event that cannot help (its rejector does not care), and one in another cluster, leave it parked.
	q.MoveOnEvent("c1", func(qp *QueuedPod) bool { return !qp.Rejectors.Has("NodeResourcesFit") })
	q.MoveOnEvent("c2", func(*QueuedPod) bool { return true })
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("an unhelpful event (or another cluster's) moved the pod")
	}
	q.MoveOnEvent("c1", func(*QueuedPod) bool { return true })
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatalf("a helpful event after the backoff: active %d unschedulable %d, want active", a, u)
	}
	// Parked pods are retried after MaxUnschedulable (5 min) anyway.
	qp = mustPop(t, q)
	q.Unschedulable(qp, sets.New("NodeResourcesFit"), false)
	clk.Step(5 * time.Minute)
	q.FlushUnschedulable()
	if a, _, _ := q.Lens(); a != 1 {
		t.Fatal("a pod parked for 5 minutes was not retried")
	}
}

func TestEventDuringAttemptSendsToBackoff(t *testing.T) {
	q, clk := newTestQueue()
	k, p := pod("p", 0)
	q.Add(k, p)
	qp := mustPop(t, q)
	q.MoveOnEvent("c1", func(*QueuedPod) bool { return true }) // e.g. a node joined while the pod was being tried
	q.Unschedulable(qp, sets.New("NodeResourcesFit"), false)
	if _, b, u := q.Lens(); b != 1 || u != 0 {
		t.Fatalf("backoff %d unschedulable %d: an event during the attempt must not be lost", b, u)
	}
	clk.Step(time.Second)
	q.FlushBackoff()
	if a, _, _ := q.Lens(); a != 1 {
		t.Fatal("not active after its backoff")
	}
}

// TestQueueJam: a thousand pods that cannot fit never delay a pod that can.
func TestQueueJam(t *testing.T) {
	q, clk := newTestQueue()
	for i := range 1000 {
		k, p := pod(fmt.Sprint("big-", i), 10)
		q.Add(k, p)
	}
	for range 1000 {
		q.Unschedulable(mustPop(t, q), sets.New("NodeResourcesFit"), false)
	}
	clk.Step(time.Hour / 20)
	q.FlushBackoff()
	k, p := pod("small", 0)
	q.Add(k, p)
	if got := mustPop(t, q).Key.Name; got != "small" {
		t.Fatalf("popped %s, want the schedulable pod first", got)
	}
}

func TestUpdateAndDelete(t *testing.T) {
	q, _ := newTestQueue()
	k, p := pod("p", 0)
	q.Add(k, p)
	qp := mustPop(t, q)
	q.Unschedulable(qp, sets.New("NodeAffinity"), false)
	// The user fixes the pod (a new generation): it leaves the unschedulable set without an event.
	p2 := p.DeepCopy()
	p2.Generation, p2.ResourceVersion = 2, "2"
	q.Add(k, p2)
	if _, _, u := q.Lens(); u != 0 {
		t.Fatal("an updated pod stayed parked")
	}
	q.Delete(k)
	if a, b, u := q.Lens(); a+b+u != 0 || q.Has(k, p.UID) {
		t.Fatal("a deleted pod is still queued")
	}
	q.Close()
	if _, ok := q.Pop(); ok {
		t.Fatal("Pop on a closed queue returned a pod")
	}
}
