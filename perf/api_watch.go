package perf

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The watched ConfigMaps and the annotations the writes put on them.
const (
	watchedConfigMaps = 10
	annSent           = "perf.wheelhouse.dev/sent"     // the write's send time, unix nanoseconds
	annRun            = "perf.wheelhouse.dev/run"      // the repetition's token: only its writes count
	annSentinel       = "perf.wheelhouse.dev/sentinel" // the set-up write every watch must deliver first
	// watchOpeners is how many watches are opened at once: enough to open a thousand in seconds without
	// turning set-up into a connection storm.
	watchOpeners = 32
	// drainTimeout is how long deliveries may trail the last write before the missing ones count as lost.
	drainTimeout = 15 * time.Second
	// setupTimeout bounds opening every watch and seeing the sentinel on all of them.
	setupTimeout = 3 * time.Minute
)

func watchedName(i int) string { return fmt.Sprintf("cm-%d", i) }

// fanWatcher is one watch and what it received.
type fanWatcher struct {
	w     watch.Interface
	ready chan struct{} // closed when the sentinel arrived
	// lat are delivery latencies of this repetition's writes; written only by the watcher's goroutine and read
	// after it ended.
	lat    []time.Duration
	closed atomic.Bool // the stream ended on its own (not by Stop)
	err    string
}

// fanout is one repetition's watchers and counters.
type fanout struct {
	token    string
	received atomic.Int64
	watchers []*fanWatcher
	wg       sync.WaitGroup
	stopping atomic.Bool
}

// watchScenario opens Watchers watches of the ConfigMaps in nsWatch, makes sure each is established (each must
// deliver a sentinel write), then updates the ConfigMaps on an open-loop schedule of WatchRate writes/s, each
// carrying its send time, and measures delivery to every watcher. Each watch is a separate client-go watch
// request from resourceVersion of a list, as every informer does.
func (r *apiRunner) watchScenario(ctx context.Context, t *apiTarget, rep int) FanoutResult {
	res := FanoutResult{Watchers: r.cfg.Watchers}
	cms := t.srv.cs.CoreV1().ConfigMaps(nsWatch)
	f := &fanout{token: fmt.Sprintf("rep%d-%d", rep, time.Now().UnixNano())}
	defer f.stop()
	t0 := time.Now()
	if err := f.open(ctx, t.srv.cs, r.cfg.Watchers); err != nil {
		res.Err = err.Error()
		return res
	}
	if err := f.awaitSentinel(ctx, cms); err != nil {
		res.Err = err.Error()
		return res
	}
	res.Setup = time.Since(t0)
	r.log.Info("watches established", "target", t.name, "watchers", r.cfg.Watchers, "setup", res.Setup.Round(time.Millisecond))

	m := newAPIMeter(t.srv.pid(), r.pg.procs())
	f.write(ctx, cms, openLoop{rate: r.cfg.WatchRate, duration: r.cfg.WatchDuration}, &res)
	res.Expected = res.Writes * r.cfg.Watchers
	f.drain(ctx, int64(res.Expected))
	res.CPU = m.cores()
	res.ServerRSS = t.srv.rss() // with the watches still open
	f.stop()
	f.collect(&res)
	if err := t.srv.alive(); err != nil {
		res.Err = err.Error()
	}
	return res
}

// write patches the watched ConfigMaps on loop's schedule, each patch carrying its scheduled send time (a write
// started late counts its lateness as delivery latency), and records the writes in res.
func (f *fanout) write(ctx context.Context, cms corev1client.ConfigMapInterface, loop openLoop, res *FanoutResult) {
	lat := make([]time.Duration, loop.n())
	ok := make([]bool, loop.n())
	var errs errCount
	st := loop.run(ctx, func(i int, due time.Time) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q,%q:null}}}`,
			annSent, strconv.FormatInt(due.UnixNano(), 10), annRun, f.token, annSentinel)
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		if _, err := cms.Patch(rctx, watchedName(i%watchedConfigMaps), types.MergePatchType, []byte(patch),
			metav1.PatchOptions{}); err != nil {
			errs.add(err)
			return
		}
		lat[i], ok[i] = time.Since(due), true
	})
	var good []time.Duration
	for i, d := range lat {
		if ok[i] {
			good = append(good, d)
		}
	}
	res.Writes, res.WriteErrors, res.FirstErr = len(good), errs.n, errs.first
	res.Rate = float64(res.Writes) / st.Elapsed.Seconds()
	res.WriteP50, res.WriteP99 = percentile(good, 50), percentile(good, 99)
}

// collect merges the watchers' latencies into res, once they have stopped.
func (f *fanout) collect(res *FanoutResult) {
	var all []time.Duration
	for _, w := range f.watchers {
		all = append(all, w.lat...)
		if w.closed.Load() {
			res.ClosedEarly++
			if res.FirstErr == "" && w.err != "" {
				res.FirstErr = w.err
			}
		}
	}
	res.Received = len(all)
	res.P50, res.P99, res.Max = percentile(all, 50), percentile(all, 99), percentile(all, 100)
}

// open lists the ConfigMaps for a resourceVersion and opens n watches from it, watchOpeners at a time.
func (f *fanout) open(ctx context.Context, cs *kubernetes.Clientset, n int) error {
	list, err := cs.CoreV1().ConfigMaps(nsWatch).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("watch set-up: list: %w", err)
	}
	rv := list.ResourceVersion
	timeout := int64(setupTimeout.Seconds() + drainTimeout.Seconds() + 600) // outlives the scenario
	f.watchers = make([]*fanWatcher, n)
	var errs errCount
	sem := make(chan struct{}, watchOpeners)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w, err := cs.CoreV1().ConfigMaps(nsWatch).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout})
			if err != nil {
				errs.add(err)
				return
			}
			fw := &fanWatcher{w: w, ready: make(chan struct{})}
			f.watchers[i] = fw
			f.wg.Add(1)
			go f.receive(fw)
		}()
	}
	wg.Wait()
	if errs.n > 0 {
		return fmt.Errorf("watch set-up: %d of %d watches failed to open, first: %s", errs.n, n, errs.first)
	}
	return nil
}

// receive records every event of one watch until it ends. The receive time is taken as soon as client-go hands
// over the decoded event.
func (f *fanout) receive(w *fanWatcher) {
	defer f.wg.Done()
	for ev := range w.w.ResultChan() {
		now := time.Now()
		if ev.Type == watch.Error {
			if w.err == "" {
				w.err = fmt.Sprintf("watch ERROR event: %v", ev.Object)
			}
			continue
		}
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		a := cm.Annotations
		switch {
		case a[annSentinel] == f.token:
			select {
			case <-w.ready:
			default:
				close(w.ready)
			}
		case a[annRun] == f.token:
			if ns, err := strconv.ParseInt(a[annSent], 10, 64); err == nil {
				w.lat = append(w.lat, now.Sub(time.Unix(0, ns)))
				f.received.Add(1)
			}
		}
	}
	if !f.stopping.Load() {
		w.closed.Store(true)
		if w.err == "" {
			w.err = "watch stream ended early"
		}
	}
}

// awaitSentinel writes the sentinel and waits until every watch has delivered it: then every watch request has
// been served and its stream is live, so no measured write races a watch still being set up.
func (f *fanout) awaitSentinel(ctx context.Context, cms corev1client.ConfigMapInterface) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:null,%q:null}}}`, annSentinel, f.token, annSent, annRun)
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := cms.Patch(pctx, watchedName(0), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("watch set-up: sentinel write: %w", err)
	}
	deadline := time.NewTimer(setupTimeout)
	defer deadline.Stop()
	for i, w := range f.watchers {
		select {
		case <-w.ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			n := 0
			for _, w := range f.watchers[i:] {
				select {
				case <-w.ready:
				default:
					n++
				}
			}
			return fmt.Errorf("watch set-up: %d of %d watches did not deliver the sentinel write within %s", n,
				len(f.watchers), setupTimeout)
		}
	}
	return nil
}

// drain waits until want deliveries arrived, or drainTimeout passed without reaching it.
func (f *fanout) drain(ctx context.Context, want int64) {
	deadline := time.Now().Add(drainTimeout)
	for f.received.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends every watch and waits for the receivers.
func (f *fanout) stop() {
	if f.stopping.Swap(true) {
		return
	}
	for _, w := range f.watchers {
		if w != nil {
			w.w.Stop()
		}
	}
	f.wg.Wait()
}
