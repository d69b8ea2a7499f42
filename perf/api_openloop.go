package perf

import (
	"context"
	"sync"
	"time"
)

// lateAfter is how far behind its scheduled time a request may start before it counts as late: the harness
// itself fell behind. Timer wake-ups alone are up to about a millisecond late on a busy 2-core machine.
const lateAfter = 5 * time.Millisecond

// openLoop is a fixed-rate schedule of n requests: request i is due at start + i/rate.
type openLoop struct {
	rate     int
	duration time.Duration
}

func (l openLoop) n() int { return int(float64(l.rate) * l.duration.Seconds()) }

// loopStats says how well the schedule was kept.
type loopStats struct {
	// Started is how many requests were started (fewer than n only when ctx ended).
	Started int
	Late    int
	MaxLag  time.Duration
	// Elapsed is from the first due time until the last request returned.
	Elapsed time.Duration
}

// run calls do(i, due) for every request of the schedule, each at its due time. A dispatcher hands each request
// to an idle worker or, when every worker is busy, to a new one, so the pool grows as needed and a slow response
// never holds back the next request: latency measured from due (not from the actual start) then includes any
// queueing, which avoids coordinated omission. It returns when every request has returned.
func (l openLoop) run(ctx context.Context, do func(i int, due time.Time)) loopStats {
	type job struct {
		i   int
		due time.Time
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var st loopStats
	exec := func(j job) {
		lag := time.Since(j.due)
		mu.Lock()
		st.Started++
		if lag > lateAfter {
			st.Late++
		}
		st.MaxLag = max(st.MaxLag, lag)
		mu.Unlock()
		do(j.i, j.due)
	}
	worker := func(first job) {
		defer wg.Done()
		exec(first)
		for j := range jobs {
			exec(j)
		}
	}
	interval := time.Second / time.Duration(l.rate)
	start := time.Now()
	for i := range l.n() {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case jobs <- job{i, due}:
		default:
			wg.Add(1)
			go worker(job{i, due})
		}
	}
	close(jobs)
	wg.Wait()
	st.Elapsed = time.Since(start)
	return st
}
