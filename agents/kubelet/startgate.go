package kubelet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// startGate admits pods' starts — from creating the sandbox until the pod's containers have been started — in
// the order they ask, at most n at once.
//
// Without it every pod bound to a node in a burst starts at the same time, and each step of each start (the
// sandbox with its network, each container's create and start: processes of the runtime, runc, the CNI
// plugins) shares the node's CPUs with all the others: the first pods are as late as the last ones, and all are
// late (make perf-agent: 50 pods at 20/s through containerd on 2 cores, p50 within 15 % of p99). Admitted in
// order, the first pods run while the others wait their turn, and the node works on fewer starts at once.
//
// A start holds its place at most hold: a call that hangs (a runtime or CNI plugin that does not answer) holds
// up the others for that long only. An image pull gives the place up (leave): pulls are waiting on the network,
// not the node's work, and the pod asks again at its next sync.
type startGate struct {
	sem     *semaphore.Weighted // FIFO: waiters are served in the order they came
	hold    time.Duration
	waiting atomic.Int32 // starts in enter, waiting for their place or just given it
}

// defaultStartHold is how long one start holds its place in the gate at most.
const defaultStartHold = 10 * time.Second

func newStartGate(n int, hold time.Duration) *startGate {
	if n <= 0 {
		return nil // no limit
	}
	return &startGate{sem: semaphore.NewWeighted(int64(n)), hold: hold}
}

// enter waits for a place (or ctx's end) and returns the function that gives it up; calling that function more
// than once, or after hold has run out, is harmless. A nil gate admits at once.
func (g *startGate) enter(ctx context.Context) (leave func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	g.waiting.Add(1)
	err = g.sem.Acquire(ctx, 1)
	g.waiting.Add(-1)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	release := func() { once.Do(func() { g.sem.Release(1) }) }
	// Real time, as the relist: the gate protects the node's CPUs, whatever the clock of the pod manager's tests.
	t := time.AfterFunc(g.hold, release)
	return func() {
		t.Stop()
		release()
	}, nil
}
