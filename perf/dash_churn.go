package perf

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
)

// churnBacklog is how many churn pods live at once: each change creates the newest or deletes the oldest, so a
// pod lives for churnBacklog creates (400 ms at 50 creates/s), long enough for every tab to see it.
const churnBacklog = 20

// churnInFlight bounds the churn's concurrent API calls; a change over it is skipped (the server did not keep up).
const churnInFlight = 64

// tabs runs the connected-tabs scenario: the server's memory before and after Tabs tabs subscribe to the pods
// list of a namespace of ChurnPods pods, then ChurnRate pod changes/s for ChurnDuration with every tab reading.
func (r *dashRunner) tabs(ctx context.Context) *DashTabsResult {
	out := &DashTabsResult{Tabs: r.cfg.Tabs, Pods: r.cfg.ChurnPods, Rate: r.cfg.ChurnRate, Duration: r.cfg.ChurnDuration}
	if err := r.tabsRun(ctx, out); err != nil {
		out.Err = err.Error()
	}
	return out
}

func (r *dashRunner) tabsRun(ctx context.Context, out *DashTabsResult) error {
	cs := r.srv.cs
	if err := namespaceWithPods(ctx, cs, nsChurn, r.cfg.ChurnPods, r.cfg.CreateWorkers, r.cfg.Timeout); err != nil {
		return err
	}
	ch := newChurn(cs, nsChurn, r.cfg.ChurnRate, r.cfg.ChurnDuration)
	if err := ch.backlog(ctx); err != nil {
		return err
	}
	settle(ctx)
	before, err := r.serverMemory(ctx)
	if err != nil {
		return err
	}
	out.RSSBefore, out.HeapBefore, out.GoroutinesBefore = before.rss, before.HeapInuse, before.Goroutines
	t0 := time.Now()
	tabs, err := r.connectTabs(ctx, ch.log)
	defer closeTabs(tabs)
	out.Connected, out.ConnectTook = len(tabs), time.Since(t0)
	if err != nil {
		return err
	}
	r.log.Info("tabs connected", "tabs", len(tabs), "took", out.ConnectTook.Round(time.Millisecond))
	settle(ctx)
	after, err := r.serverMemory(ctx)
	if err != nil {
		return err
	}
	out.RSSAfter, out.HeapAfter, out.GoroutinesAfter = after.rss, after.HeapInuse, after.Goroutines
	r.log.Info("memory per tab", "rss", fmtBytes(float64(out.RSSAfter-out.RSSBefore)/float64(len(tabs))),
		"heap", fmtBytes(float64(out.HeapAfter-out.HeapBefore)/float64(len(tabs))))
	r.churnWindow(ctx, ch, tabs, out)
	return r.srv.alive()
}

// memReading is the server's RSS and what its profiler says of its Go heap and goroutines.
type memReading struct {
	goMemory
	rss int64
}

// serverMemory reads the server's RSS (median of three one-second samples), then its Go heap after a forced
// collection and its goroutines.
func (r *dashRunner) serverMemory(ctx context.Context) (memReading, error) {
	m := memReading{rss: medianRSS(ctx, r.srv.pid(), 3*time.Second)}
	var err error
	m.goMemory, err = r.srv.memory(ctx)
	return m, err
}

// connectTabs opens Tabs tabs, eight dials at a time, and waits until each has had its first fragment.
func (r *dashRunner) connectTabs(ctx context.Context, log *churnLog) ([]*liveTab, error) {
	tabs := make([]*liveTab, r.cfg.Tabs)
	err := parallel(ctx, 8, r.cfg.Tabs, func(ctx context.Context, i int) error {
		t, err := r.srv.dialTab(ctx, nsChurn, log)
		tabs[i] = t
		return err
	})
	var opened []*liveTab
	for _, t := range tabs {
		if t != nil {
			opened = append(opened, t)
		}
	}
	if err != nil {
		return opened, fmt.Errorf("tab %d of %d: %w", len(opened)+1, r.cfg.Tabs, err)
	}
	deadline := time.After(r.cfg.Timeout)
	for i, t := range opened {
		select {
		case <-t.first:
		case <-t.done:
			return opened, fmt.Errorf("tab %d ended before its first fragment: %v", i, t.err)
		case <-deadline:
			return opened, fmt.Errorf("tab %d: no first fragment within %s", i, r.cfg.Timeout)
		case <-ctx.Done():
			return opened, ctx.Err()
		}
	}
	return opened, nil
}

func closeTabs(tabs []*liveTab) {
	var wg sync.WaitGroup
	for _, t := range tabs {
		wg.Go(t.close)
	}
	wg.Wait()
}

// churnWindow drives the churn for Duration with the CPU meter and RSS sampler running, then waits two seconds
// for the last fragments and sums up the tabs.
func (r *dashRunner) churnWindow(ctx context.Context, ch *churn, tabs []*liveTab, out *DashTabsResult) {
	r.log.Info("churn", "tabs", len(tabs), "rate", ch.rate, "duration", ch.duration)
	type count struct{ frames, payload, wire int64 }
	snap := func() []count {
		c := make([]count, len(tabs))
		for i, t := range tabs {
			c[i] = count{t.frames.Load(), t.payload.Load(), t.wire.Load()}
		}
		return c
	}
	wl, err := startWatchLag(ctx, ch.cs, ch.ns, ch.log)
	if err != nil {
		out.Err = err.Error()
		return
	}
	profiled := make(chan error, 1)
	if r.cfg.ServerProfile != "" {
		go func() { profiled <- r.srv.cpuProfile(ctx, ch.duration, r.cfg.ServerProfile) }()
	} else {
		profiled <- nil
	}
	rss := newRSSSampler(r.srv.pid())
	m := newAPIMeter(r.srv.pid(), r.pg.procs())
	c0, t0 := snap(), time.Now()
	ch.run(ctx)
	c1, el := snap(), time.Since(t0).Seconds()
	out.CPU = m.cores()
	out.RSSMedian, out.RSSMax = rss.stop()
	out.Creates, out.Deletes = int(ch.creates.Load()), int(ch.deletes.Load())
	out.Skipped, out.Failed, out.FirstErr = int(ch.skipped.Load()), int(ch.failed.Load()), ch.firstErr()
	select { // the last creates' fragments
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	var frames, payload, wire []float64
	var lat []time.Duration
	for i, t := range tabs {
		frames = append(frames, float64(c1[i].frames-c0[i].frames)/el)
		payload = append(payload, float64(c1[i].payload-c0[i].payload)/el)
		wire = append(wire, float64(c1[i].wire-c0[i].wire)/el)
		select {
		case <-t.done: // ended before we closed it
			out.TabErrors++
			if out.FirstTabErr == "" && t.err != nil {
				out.FirstTabErr = t.err.Error()
			}
		default:
		}
	}
	closeTabs(tabs) // the readers are done: their latencies can be read
	wlat := wl.stop()
	out.WatchP50, out.WatchP99, out.WatchSamples = percentile(wlat, 50), percentile(wlat, 99), len(wlat)
	if err := <-profiled; err != nil {
		r.log.Warn("server CPU profile", "err", err)
	} else if r.cfg.ServerProfile != "" {
		r.log.Info("wrote the server's CPU profile", "path", r.cfg.ServerProfile)
	}
	for _, t := range tabs {
		lat = append(lat, t.lat...)
	}
	out.FramesMedian, out.FramesMax = median(frames), percentile(frames, 100)
	out.PayloadMedian, out.WireMedian = median(payload), median(wire)
	out.LatencySamples, out.LatencyExpected = len(lat), out.Creates*len(tabs)
	out.LatencyP50, out.LatencyP99, out.LatencyMax = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	r.log.Info("churn done", "creates", out.Creates, "deletes", out.Deletes, "server-cores", fmt.Sprintf("%.2f", out.CPU.Server),
		"frames/tab/s", fmt.Sprintf("%.1f", out.FramesMedian), "p50", out.LatencyP50, "p99", out.LatencyP99,
		"watch-p50", out.WatchP50, "watch-p99", out.WatchP99)
}

// churn alternates creating the newest churn pod and deleting the oldest at rate changes per second.
type churn struct {
	cs       kubernetes.Interface
	ns       string
	rate     int
	duration time.Duration
	log      *churnLog

	mu   sync.Mutex // guards live, next and err
	live []*churnPod
	next int
	err  error

	creates, deletes, skipped, failed atomic.Int64
}

// churnPod is one churn pod; created is set when its create returned, failed when it was refused.
type churnPod struct {
	i               int
	created, failed atomic.Bool
}

func newChurn(cs kubernetes.Interface, ns string, rate int, d time.Duration) *churn {
	// Room for every create of the window and the backlog, with slack for the schedule's rounding.
	n := churnBacklog + int(float64(rate)*d.Seconds()/2) + 16
	return &churn{cs: cs, ns: ns, rate: rate, duration: d, log: newChurnLog(n)}
}

// backlog creates the churnBacklog pods that exist before the window (unmeasured).
func (c *churn) backlog(ctx context.Context) error {
	for range churnBacklog {
		p := c.newPod()
		if p == nil {
			return fmt.Errorf("churn backlog: no room for %d pods", churnBacklog)
		}
		if err := createPod(ctx, c.cs, c.ns, dashPod(churnName(p.i), p.i)); err != nil {
			return fmt.Errorf("churn backlog: %w", err)
		}
		p.created.Store(true)
	}
	return nil
}

// newPod numbers the next pod and queues it as the newest live one; nil when the log has no room left.
func (c *churn) newPod() *churnPod {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next >= len(c.log.starts) {
		return nil
	}
	p := &churnPod{i: c.next}
	c.next++
	c.live = append(c.live, p)
	return p
}

// oldest takes the oldest live pod whose create has returned, or nil.
func (c *churn) oldest() *churnPod {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.live) > 0 && c.live[0].failed.Load() {
		c.live = c.live[1:]
	}
	if len(c.live) == 0 || !c.live[0].created.Load() {
		return nil
	}
	p := c.live[0]
	c.live = c.live[1:]
	return p
}

// run changes pods on an open-loop schedule for the duration: even ticks create, odd ticks delete.
func (c *churn) run(ctx context.Context) {
	sem := make(chan struct{}, churnInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * time.Second / time.Duration(c.rate))
		if at.Sub(start) >= c.duration {
			break
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-time.After(time.Until(at)):
		}
		select {
		case sem <- struct{}{}:
		default:
			c.skipped.Add(1)
			continue
		}
		op := c.createOne
		if k%2 == 1 {
			op = c.deleteOne
		}
		wg.Go(func() {
			defer func() { <-sem }()
			op(ctx)
		})
	}
	wg.Wait()
}

func (c *churn) createOne(ctx context.Context) {
	p := c.newPod()
	if p == nil {
		c.skipped.Add(1)
		return
	}
	c.log.started(p.i, time.Now())
	if err := createPod(ctx, c.cs, c.ns, dashPod(churnName(p.i), p.i)); err != nil {
		p.failed.Store(true)
		c.fail(err)
		return
	}
	p.created.Store(true)
	c.creates.Add(1)
}

func (c *churn) deleteOne(ctx context.Context) {
	p := c.oldest()
	if p == nil {
		c.skipped.Add(1)
		return
	}
	if err := deletePod(ctx, c.cs, c.ns, churnName(p.i)); err != nil {
		c.fail(err)
		return
	}
	c.deletes.Add(1)
}

func (c *churn) fail(err error) {
	c.failed.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *churn) firstErr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return ""
	}
	return c.err.Error()
}
