package perf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"
)

// pageVariant is one pods page URL the page scenario times.
type pageVariant struct {
	key, label, query string
}

// pageVariants: the first page in name order, the first page sorted by a computed column (every pod's Status
// cell is computed, then sorted), and the first page of a label filter matching a tenth of the pods.
var pageVariants = []pageVariant{
	{key: "page1", label: "first page, name order", query: ""},
	{key: "sorted", label: "first page sorted by Status", query: "&sort=Status"},
	{key: "filtered", label: "first page of app=web-7 (a tenth of the pods)", query: "&label=app%3Dweb-7"},
}

// page runs the page scenario: PagePods pods in one namespace, then every variant fetched PageReps times.
func (r *dashRunner) page(ctx context.Context) *DashPageResult {
	out := &DashPageResult{Pods: r.cfg.PagePods}
	if err := r.pageRun(ctx, out); err != nil {
		out.Err = err.Error()
	}
	return out
}

func (r *dashRunner) pageRun(ctx context.Context, out *DashPageResult) error {
	if err := createNamespace(ctx, r.srv.cs, nsBig, r.cfg.Timeout); err != nil {
		return err
	}
	r.log.Info("creating pods", "namespace", nsBig, "pods", r.cfg.PagePods, "workers", r.cfg.CreateWorkers)
	t0 := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 4*r.cfg.Timeout)
	err := loadPods(lctx, r.srv.cs, nsBig, "pod-", r.cfg.PagePods, r.cfg.CreateWorkers)
	cancel()
	out.Load = time.Since(t0)
	if err != nil {
		return fmt.Errorf("create %d pods: %w", r.cfg.PagePods, err)
	}
	r.log.Info("pods created", "pods", r.cfg.PagePods, "took", out.Load.Round(time.Millisecond))
	hc := r.srv.browserClient()
	defer hc.CloseIdleConnections()
	settle(ctx)
	var buf bytes.Buffer
	for _, v := range pageVariants {
		pv := r.timePage(ctx, hc, v, &buf, &out.Proto)
		r.log.Info("pods page", "variant", v.key, "rows", pv.Rows, "median", pv.Median, "p99", pv.P99, "err", pv.Err)
		out.Variants = append(out.Variants, pv)
	}
	out.ServerRSS = r.srv.rss()
	return r.srv.alive()
}

// timePage fetches one variant once untimed (checking it shows rows), then PageReps times, one after the other.
func (r *dashRunner) timePage(ctx context.Context, hc *http.Client, v pageVariant, buf *bytes.Buffer, proto *string) DashPageVariant {
	out := DashPageVariant{Key: v.key, Label: v.label, Query: "?ns=" + nsBig + v.query, Reps: r.cfg.PageReps}
	url := fmt.Sprintf("%s/ui/c/%s/r/pods%s", r.srv.base, clusterID, out.Query)
	if _, _, err := r.getPage(ctx, hc, url, buf, proto); err != nil {
		out.Err = err.Error()
		return out
	}
	out.Rows, out.Bytes = bytes.Count(buf.Bytes(), []byte(`data-testid="row"`)), buf.Len()
	if out.Rows == 0 {
		out.Err = "the page shows no rows"
		return out
	}
	var ttfb []time.Duration
	m := newAPIMeter(r.srv.pid(), r.pg.procs())
	for range r.cfg.PageReps {
		total, first, err := r.getPage(ctx, hc, url, buf, proto)
		if err != nil {
			out.Err = err.Error()
			break
		}
		out.Durations, ttfb = append(out.Durations, total), append(ttfb, first)
	}
	out.CPU = m.cores()
	ds := append([]time.Duration(nil), out.Durations...)
	out.Median, out.P99, out.Max = medianDuration(ds), percentile(ds, 99), percentile(ds, 100)
	out.TTFBMedian, out.TTFBP99 = medianDuration(ttfb), percentile(ttfb, 99)
	return out
}

// getPage GETs url with the session cookie and reads the whole body into buf: the time until the body is read
// and until its first byte.
func (r *dashRunner) getPage(ctx context.Context, hc *http.Client, url string, buf *bytes.Buffer, proto *string) (time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var first time.Time
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Cookie", r.srv.cookieHeader())
	buf.Reset()
	t0 := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(buf, res.Body)
	res.Body.Close()
	total := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	*proto = res.Proto
	return total, first.Sub(t0), nil
}
