// Package queue is the scheduler's pod queue: an active heap (priority, then time queued), a backoff heap
// (per-pod exponential backoff, initial 1 s doubling to 10 s by default) and an unschedulable set. A pod the
// scheduler could not place waits in the unschedulable set until a cluster event in its own cluster could help
// (the plugins that rejected it say which events can; see framework.EnqueueExtensions), then goes through
// backoff to active; so a pile of pods that cannot fit never crowds out pods that can (the seed's "queue
// jam"), and an impossible pod does not loop hot. Pods parked for longer than MaxUnschedulable are retried anyway.
package queue

import (
	"container/heap"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"
)

// Key names a pod in a cluster.
type Key struct{ Cluster, Namespace, Name string }

// QueuedPod is a pod waiting to be scheduled.
type QueuedPod struct {
	Key Key
	Pod *corev1.Pod
	// Timestamp is when the pod was last added to active (the tie breaker after priority).
	Timestamp time.Time
	// InitialAttempt is when the pod was first queued.
	InitialAttempt time.Time
	// Attempts counts scheduling attempts (the backoff grows with them).
	Attempts int
	// Rejectors are the plugins that rejected the pod in its last attempt (they decide which events move it).
	Rejectors sets.Set[string]
	// cycle is the scheduling cycle in which the pod was popped.
	cycle       int64
	lastAttempt time.Time
	priority    int32
	backoff     time.Time
	index       int
	where       place
}

type place int

const (
	nowhere place = iota
	inActive
	inBackoff
	inUnschedulable
	inFlight
)

// Config sets the queue's timing.
type Config struct {
	InitialBackoff, MaxBackoff time.Duration
	// MaxUnschedulable is how long a pod stays parked without any helpful event before it is retried anyway.
	MaxUnschedulable time.Duration
	Clock            clock.WithTicker
}

// Queue is the scheduling queue for pods of every cluster.
type Queue struct {
	cfg           Config
	mu            sync.Mutex
	cond          *sync.Cond
	active        podHeap
	backoff       podHeap
	unschedulable map[Key]*QueuedPod
	all           map[Key]*QueuedPod
	// cycle counts pops; moveCycle is the cycle of the last move request: a pod that fails in a cycle during
	// which an event arrived goes to backoff rather than waiting for another event.
	cycle, moveCycle int64
	closed           bool
}

// New makes a queue.
func New(cfg Config) *Queue {
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.InitialBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.InitialBackoff)
	}
	if cfg.MaxUnschedulable <= 0 {
		cfg.MaxUnschedulable = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	q := &Queue{cfg: cfg, unschedulable: map[Key]*QueuedPod{}, all: map[Key]*QueuedPod{}}
	q.active.less = func(a, b *QueuedPod) bool {
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.Timestamp.Before(b.Timestamp)
	}
	q.backoff.less = func(a, b *QueuedPod) bool { return a.backoff.Before(b.backoff) }
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Run moves pods whose backoff has ended to active (every 100 ms of the clock) and retries pods parked too
// long (every 30 s), until ctx ends; then it closes the queue.
func (q *Queue) Run(ctx context.Context) {
	tick := q.cfg.Clock.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastFlush := q.cfg.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-tick.C():
		}
		q.FlushBackoff()
		if now := q.cfg.Clock.Now(); now.Sub(lastFlush) >= 30*time.Second {
			q.FlushUnschedulable()
			lastFlush = now
		}
	}
}

// Close wakes Pop callers, which return false.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Add queues a new pending pod, or updates one already queued (an update may make it schedulable: a pod
// parked as unschedulable whose spec changed goes back to active).
func (q *Queue) Add(k Key, pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.all[k]; ok {
		specChanged := qp.Pod.UID != pod.UID || qp.Pod.Generation != pod.Generation || !sameScheduling(qp.Pod, pod)
		qp.Pod, qp.priority = pod, corev1helpers.PodPriority(pod)
		switch qp.where {
		case inActive:
			heap.Fix(&q.active, qp.index)
		case inUnschedulable:
			if specChanged {
				delete(q.unschedulable, k)
				q.toBackoffOrActive(qp)
			}
		}
		return
	}
	now := q.cfg.Clock.Now()
	qp := &QueuedPod{Key: k, Pod: pod, Timestamp: now, InitialAttempt: now, priority: corev1helpers.PodPriority(pod)}
	q.all[k] = qp
	q.pushActive(qp)
}

// sameScheduling tells whether two versions of a pod ask the same of the scheduler (labels, spec).
func sameScheduling(a, b *corev1.Pod) bool {
	return a.ResourceVersion == b.ResourceVersion || (equalLabels(a.Labels, b.Labels) && a.Generation == b.Generation)
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Delete forgets a pod (deleted, or bound by someone else).
func (q *Queue) Delete(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.all[k]
	if !ok {
		return
	}
	q.remove(qp)
	delete(q.all, k)
}

func (q *Queue) remove(qp *QueuedPod) {
	switch qp.where {
	case inActive:
		heap.Remove(&q.active, qp.index)
	case inBackoff:
		heap.Remove(&q.backoff, qp.index)
	case inUnschedulable:
		delete(q.unschedulable, qp.Key)
	}
	qp.where = nowhere
}

// Pop takes the next pod to schedule, waiting for one; false once the queue is closed.
func (q *Queue) Pop() (*QueuedPod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	qp := heap.Pop(&q.active).(*QueuedPod)
	qp.where = inFlight
	q.cycle++
	qp.cycle = q.cycle
	qp.Attempts++
	return qp, true
}

// Done ends a scheduling attempt that placed the pod (or found it gone): the queue forgets it.
func (q *Queue) Done(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.all[k]; ok && qp.where == inFlight {
		delete(q.all, k)
		qp.where = nowhere
	}
}

// Unschedulable ends a failed attempt: the pod waits for a helpful event (or, if one arrived during its
// attempt, or the failure was an error, goes through backoff).
func (q *Queue) Unschedulable(qp *QueuedPod, rejectors sets.Set[string], isError bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, ok := q.all[qp.Key]
	if !ok || cur != qp || qp.where != inFlight {
		return // deleted or replaced meanwhile
	}
	qp.Rejectors = rejectors
	qp.lastAttempt = q.cfg.Clock.Now()
	if isError || q.moveCycle >= qp.cycle {
		q.pushBackoff(qp)
		return
	}
	qp.where = inUnschedulable
	q.unschedulable[qp.Key] = qp
	qp.backoff = q.backoffUntil(qp)
}

// MoveOnEvent moves the unschedulable pods of cluster that ev may help (mayHelp decides by their rejectors)
// to backoff or active.
func (q *Queue) MoveOnEvent(cluster string, mayHelp func(qp *QueuedPod) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveCycle = q.cycle
	for k, qp := range q.unschedulable {
		if k.Cluster != cluster || !mayHelp(qp) {
			continue
		}
		delete(q.unschedulable, k)
		q.toBackoffOrActive(qp)
	}
}

// FlushBackoff moves pods whose backoff ended to active.
func (q *Queue) FlushBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.cfg.Clock.Now()
	for q.backoff.Len() > 0 && !q.backoff.items[0].backoff.After(now) {
		qp := heap.Pop(&q.backoff).(*QueuedPod)
		q.pushActive(qp)
	}
}

// FlushUnschedulable retries pods parked longer than MaxUnschedulable.
func (q *Queue) FlushUnschedulable() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.cfg.Clock.Now()
	for k, qp := range q.unschedulable {
		if now.Sub(qp.Timestamp) >= q.cfg.MaxUnschedulable {
			delete(q.unschedulable, k)
			q.toBackoffOrActive(qp)
		}
	}
}

func (q *Queue) toBackoffOrActive(qp *QueuedPod) {
	if q.backoffUntil(qp).After(q.cfg.Clock.Now()) {
		q.pushBackoff(qp)
	} else {
		q.pushActive(qp)
	}
}

// backoffUntil is the end of the pod's backoff after its last attempt: InitialBackoff doubling per attempt
// up to MaxBackoff.
func (q *Queue) backoffUntil(qp *QueuedPod) time.Time {
	d := q.cfg.InitialBackoff
	for i := 1; i < qp.Attempts && d < q.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return qp.lastAttempt.Add(min(d, q.cfg.MaxBackoff))
}

func (q *Queue) pushActive(qp *QueuedPod) {
	qp.where = inActive
	if qp.Attempts > 0 {
		qp.Timestamp = q.cfg.Clock.Now()
	}
	heap.Push(&q.active, qp)
	q.cond.Signal()
}

func (q *Queue) pushBackoff(qp *QueuedPod) {
	qp.backoff = q.backoffUntil(qp)
	qp.where = inBackoff
	heap.Push(&q.backoff, qp)
}

// Lens reports how many pods are active, backing off and unschedulable.
func (q *Queue) Lens() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), q.backoff.Len(), len(q.unschedulable)
}

// Has tells whether the queue holds a pod with this UID under k.
func (q *Queue) Has(k Key, uid types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.all[k]
	return ok && qp.Pod.UID == uid
}

type podHeap struct {
	items []*QueuedPod
	less  func(a, b *QueuedPod) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *podHeap) Push(x any) {
	qp := x.(*QueuedPod)
	qp.index = len(h.items)
	h.items = append(h.items, qp)
}
func (h *podHeap) Pop() any {
	n := len(h.items) - 1
	qp := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	return qp
}
