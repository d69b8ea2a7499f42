package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics counts and times requests by route pattern, method and status code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  http.Handler // serves the registry on /metrics
}

// registerMetrics registers the Go, process, build, HTTP and store collectors in cfg.Registry.
func registerMetrics(cfg Config) (*httpMetrics, error) {
	labels := []string{"route", "method", "code"}
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wheelhouse_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wheelhouse_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, labels),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wheelhouse_build_info",
		Help: "Always 1; the labels describe the running binary.",
		ConstLabels: prometheus.Labels{"version": cfg.Version.GitVersion, "commit": cfg.Version.GitCommit,
			"go_version": cfg.Version.GoVersion},
	})
	build.Set(1)
	store := newStoreCollector(cfg.Store, cfg.ReadyTimeout, cfg.Logger)
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build, m.requests, m.duration, store,
	} {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry: cfg.Registry, // counts its own scrapes and errors
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	})
	return m, nil
}

// methods bounds the method label; anything else is counted as OTHER.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (m *httpMetrics) observe(method, route string, code int, elapsed time.Duration) {
	if !methods[method] {
		method = "OTHER"
	}
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(route, method, c).Inc()
	m.duration.WithLabelValues(route, method, c).Observe(elapsed.Seconds())
}

// storeCollector reports the store's current revision at scrape time.
type storeCollector struct {
	store    Store
	timeout  time.Duration
	log      *slog.Logger
	revision *prometheus.Desc
	up       *prometheus.Desc
}

func newStoreCollector(s Store, timeout time.Duration, log *slog.Logger) *storeCollector {
	return &storeCollector{
		store: s, timeout: timeout, log: log,
		revision: prometheus.NewDesc("wheelhouse_store_revision",
			"The store's highest committed revision; absent when the store did not answer.", nil, nil),
		up: prometheus.NewDesc("wheelhouse_store_up",
			"1 when the store answered the scrape's revision query, else 0.", nil, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.revision
	ch <- c.up
}

// Collect queries the store, bounded by the collector's timeout: the Collector interface carries no context.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rev, err := c.store.CurrentRevision(ctx)
	if err != nil {
		c.log.Warn("metrics: store revision unavailable", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.revision, prometheus.GaugeValue, float64(rev))
}
