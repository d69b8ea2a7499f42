package perf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// namespaces spreads the throughput phase's objects like a cluster's pods.
const namespaces = 16

// stuckAfter bounds how long a point may overrun its duration before the harness gives up on it.
const stuckAfter = 60 * time.Second

// writeLoad is one throughput point: Concurrency writers doing Op for Duration against one target.
type writeLoad struct {
	t           target
	op          string
	concurrency int
	duration    time.Duration
	// point makes create keys unique across points and repetitions.
	point string
	// owned holds, for updates, the keys each writer cycles through and their current revisions.
	owned *ownedKeys
}

// ownedKeys gives writer w the keys [w*per, (w+1)*per) so that updates never conflict with each other.
type ownedKeys struct {
	per  int
	keys []objKey
	revs []int64
}

// prepareOwned creates writers*per objects named prefix-N for the update phase (not measured).
func prepareOwned(ctx context.Context, t target, writers, per int, prefix string) (*ownedKeys, error) {
	o := &ownedKeys{per: per, keys: make([]objKey, writers*per), revs: make([]int64, writers*per)}
	value := newValue(time.Now())
	err := parallel(ctx, 16, len(o.keys), func(ctx context.Context, i int) error {
		o.keys[i] = objKey{Resource: resWrites, Namespace: fmt.Sprintf("ns-%02d", i%namespaces), Name: fmt.Sprintf("%s-%06d", prefix, i)}
		rev, err := t.Create(ctx, o.keys[i], value)
		o.revs[i] = rev
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prepare update keys: %w", err)
	}
	return o, nil
}

// run measures one repetition.
func (l writeLoad) run(ctx context.Context) WriteRep {
	ctx, cancel := context.WithTimeout(ctx, l.duration+stuckAfter)
	defer cancel()
	value := newValue(time.Now())
	var (
		mu  sync.Mutex
		rep WriteRep
		all []time.Duration
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(l.duration)
	for w := range l.concurrency {
		wg.Go(func() {
			lat, failed, firstErr := l.worker(ctx, w, deadline, value)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			rep.Failed += failed
			if rep.FirstErr == "" && firstErr != nil {
				rep.FirstErr = firstErr.Error()
			}
		})
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.OK = len(all)
	rep.P50, rep.P99 = percentile(all, 50), percentile(all, 99)
	return rep
}

// worker writes until deadline and returns its successful operations' latencies.
func (l writeLoad) worker(ctx context.Context, w int, deadline time.Time, value []byte) ([]time.Duration, int, error) {
	var (
		lat      []time.Duration
		failed   int
		firstErr error
	)
	for seq := 0; ctx.Err() == nil; seq++ {
		t0 := time.Now()
		if !t0.Before(deadline) {
			break
		}
		err := l.one(ctx, w, seq, value)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			time.Sleep(10 * time.Millisecond) // a failing server must not turn the worker into a busy loop
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, failed, firstErr
}

func (l writeLoad) one(ctx context.Context, w, seq int, value []byte) error {
	switch l.op {
	case OpCreate:
		k := objKey{Resource: resWrites, Namespace: fmt.Sprintf("ns-%02d", w%namespaces), Name: fmt.Sprintf("%s-%d-%d", l.point, w, seq)}
		_, err := l.t.Create(ctx, k, value)
		return err
	case OpUpdate:
		i := w*l.owned.per + seq%l.owned.per
		rev, err := l.t.Update(ctx, l.owned.keys[i], value, l.owned.revs[i])
		if err == nil {
			l.owned.revs[i] = rev
		}
		return err
	}
	return fmt.Errorf("unknown operation %q", l.op)
}

// parallel runs f(i) for i in [0, n) on `workers` goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
