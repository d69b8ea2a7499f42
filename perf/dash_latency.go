package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
)

// Namespaces of the scenarios.
const (
	nsLatency = "lat"
	nsChurn   = "churn"
	nsBig     = "big"
)

// sampleTimeout bounds one write's wait for its row, and the wait for the previous row to go.
const sampleTimeout = 10 * time.Second

// coalesceInterval is the live hub's least time between two renders of a region (web/live's default).
const coalesceInterval = 100 * time.Millisecond

// latency runs the write-to-DOM scenario: the pods page of a namespace of LatencyPods pods in headless
// Chromium, then LatencySamples pods created one at a time, each timed until its row is in the DOM.
func (r *dashRunner) latency(ctx context.Context) *DashLatencyResult {
	out := &DashLatencyResult{Samples: r.cfg.LatencySamples}
	if err := r.latencyRun(ctx, out); err != nil {
		out.Err = err.Error()
	}
	summarizeLatency(out)
	return out
}

func (r *dashRunner) latencyRun(ctx context.Context, out *DashLatencyResult) error {
	cs := r.srv.cs
	if err := namespaceWithPods(ctx, cs, nsLatency, r.cfg.LatencyPods, r.cfg.CreateWorkers, r.cfg.Timeout); err != nil {
		return err
	}
	bin, err := findChromium(r.cfg.Chromium)
	if err != nil {
		return err
	}
	logPath := filepath.Join(r.dir, "chromium.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	r.log.Info("starting the browser", "bin", bin)
	tab, stop, err := startBrowser(bin, filepath.Join(r.dir, "chromium"), logFile)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, quietOutput(tailFile(logPath, 4000)))
	}
	defer stop()
	out.Browser = browserVersion(tab)
	if err := r.openPodsPage(tab, out); err != nil {
		return fmt.Errorf("%w\nend of the browser's output:\n%s", err, quietOutput(tailFile(logPath, 2000)))
	}
	r.log.Info("write-to-DOM latency", "samples", r.cfg.LatencySamples, "browser", out.Browser,
		"clock-offset", out.ClockOffset, "visibility", out.Visibility)
	prev := ""
	for i := range r.cfg.LatencySamples {
		s, err := r.latencySample(ctx, tab, i, out.ClockOffset, prev)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		out.Runs = append(out.Runs, s)
		prev = s.Name
	}
	if prev != "" {
		if err := deletePod(ctx, cs, nsLatency, prev); err != nil {
			return err
		}
	}
	end, _, err := clockOffset(tab, 10)
	out.ClockDrift = end - out.ClockOffset
	return err
}

// openPodsPage installs the probe, signs in, opens the pods page and waits until its live region has had its
// first fragment; then it measures the page's clock offset.
func (r *dashRunner) openPodsPage(tab context.Context, out *DashLatencyResult) error {
	if err := installProbe(tab); err != nil {
		return fmt.Errorf("install the page probe: %w", err)
	}
	ctx, cancel := context.WithTimeout(tab, r.cfg.Timeout)
	defer cancel()
	if err := browserSignIn(ctx, r.srv.base, dashAdmin, r.srv.password); err != nil {
		return err
	}
	url := fmt.Sprintf("%s/ui/c/%s/r/pods?ns=%s&size=50", r.srv.base, clusterID, nsLatency)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	want := min(r.cfg.LatencyPods, 50)
	cond := fmt.Sprintf(`document.documentElement.dataset.live === "on" && window.__dashperf.frames > 0 &&
		document.querySelectorAll('tr[data-testid="row"]').length === %d`, want)
	if err := waitJS(ctx, "the pods page live with its rows", cond, r.cfg.Timeout); err != nil {
		return err
	}
	var err error
	if out.Visibility, err = evalJS[string](ctx, 5*time.Second, "document.visibilityState"); err != nil {
		return err
	}
	out.ClockOffset, out.ClockRTT, err = clockOffset(ctx, 20)
	return err
}

// latencySample pauses a random gap, creates one pod whose name sorts first, waits for its row in the page,
// then deletes the previous sample's pod and waits until its row is gone (so that one extra row at most is
// on the page).
func (r *dashRunner) latencySample(ctx context.Context, tab context.Context, i int, offset time.Duration, prev string) (DashLatencySample, error) {
	s := DashLatencySample{Name: fmt.Sprintf("aaa-lat-%06d", i), Gap: r.gap()}
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(s.Gap):
	}
	t0 := time.Now()
	if err := createPod(ctx, r.srv.cs, nsLatency, dashPod(s.Name, i)); err != nil {
		return s, err
	}
	s.Create = time.Since(t0)
	pt, err := evalJS[pageTimes](tab, sampleTimeout+time.Second,
		fmt.Sprintf("window.__dashperf.wait(%s, %d)", jsString(s.Name), sampleTimeout.Milliseconds()))
	if err != nil {
		return s, fmt.Errorf("waiting for row %s: %w", s.Name, err)
	}
	s.DOM, s.Frame = sinceStart(pt.DOM, t0, offset), sinceStart(pt.Frame, t0, offset)
	if pt.Frame > 0 && pt.Prev > 0 {
		s.SincePrevFrame = time.Duration((pt.Frame - pt.Prev) * 1e6)
	}
	if prev == "" {
		return s, nil
	}
	if err := deletePod(ctx, r.srv.cs, nsLatency, prev); err != nil {
		return s, err
	}
	if _, err := evalJS[bool](tab, sampleTimeout+time.Second,
		fmt.Sprintf("window.__dashperf.gone(%s, %d)", jsString(prev), sampleTimeout.Milliseconds())); err != nil {
		return s, fmt.Errorf("waiting for row %s to go: %w", prev, err)
	}
	return s, nil
}

// gap is a random pause between GapMin and GapMax.
func (r *dashRunner) gap() time.Duration {
	if r.cfg.GapMax <= r.cfg.GapMin {
		return r.cfg.GapMin
	}
	return r.cfg.GapMin + time.Duration(r.rng.Int64N(int64(r.cfg.GapMax-r.cfg.GapMin)))
}

// summarizeLatency fills the percentiles from the samples.
func summarizeLatency(out *DashLatencyResult) {
	var dom, create, frame, part []time.Duration
	out.Seen, out.Coalesced = 0, 0
	for _, s := range out.Runs {
		if s.DOM <= 0 {
			continue
		}
		out.Seen++
		dom, create = append(dom, s.DOM), append(create, s.Create)
		if s.Frame > 0 {
			frame, part = append(frame, s.Frame), append(part, s.DOM-s.Frame)
		}
		if s.SincePrevFrame > 0 && s.SincePrevFrame < coalesceInterval+10*time.Millisecond {
			out.Coalesced++
		}
	}
	out.P50, out.P99, out.Max = percentile(dom, 50), percentile(dom, 99), percentile(dom, 100)
	out.CreateP50, out.CreateP99 = percentile(create, 50), percentile(create, 99)
	out.FrameP50, out.FrameP99 = percentile(frame, 50), percentile(frame, 99)
	out.DOMP50, out.DOMP99 = percentile(part, 50), percentile(part, 99)
}
