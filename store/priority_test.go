package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestPriorityWritesGoFirst: with the only writer busy and writes queued behind it, a write under WithPriority
// joins the next batch ahead of them instead of waiting its turn.
func TestPriorityWritesGoFirst(t *testing.T) {
	s := openURL(t, pgtest.NewDatabase(t), func(c *Config) { c.Writers = 1; c.MaxBatch = 4 })
	release := make(chan struct{})
	var held atomic.Bool
	s.hooks.afterBegin = func() {
		if held.CompareAndSwap(false, true) {
			<-release // the first batch holds the writer
		}
	}
	ctx := t.Context()
	create := func(ctx context.Context, name string) int64 {
		o, err := s.Create(ctx, key("c1", "ns", name), []byte("x"))
		if err != nil {
			t.Errorf("create %s: %v", name, err)
		}
		return o.Revision
	}
	const queued = 20
	var wg sync.WaitGroup
	normal := make(chan int64, queued)
	wg.Go(func() { create(ctx, "blocker") })
	waitUntil(t, "the writer busy", func() bool { return held.Load() })
	for i := range queued {
		wg.Go(func() { normal <- create(ctx, fmt.Sprint("w", i)) })
	}
	waitUntil(t, "the queue full", func() bool { return len(s.ops) == cap(s.ops) })
	var urgent int64
	wg.Go(func() { urgent = create(WithPriority(ctx), "lease") })
	waitUntil(t, "the priority write queued", func() bool { return len(s.urgent) == 1 })
	close(release)
	wg.Wait()
	close(normal)
	after := 0
	for rev := range normal {
		if rev > urgent {
			after++
		}
	}
	// The next batch takes the priority write first and then fills up from the queue: every other queued write
	// commits after it.
	if after != queued {
		t.Fatalf("%d of %d writes queued before the priority write committed after it, want all", after, queued)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
