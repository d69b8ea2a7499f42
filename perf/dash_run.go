package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// dashRunner holds one dashperf run's state. Cleanups run in reverse order whatever happens.
type dashRunner struct {
	cfg      DashConfig
	log      *slog.Logger
	dir      string
	bin      string
	pg       *postgres
	srv      *dashServer
	rng      *rand.Rand // the latency scenario's write spacing; used by one goroutine
	res      *DashResults
	cleanups []func()
}

func (r *dashRunner) defer_(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *dashRunner) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// RunDash builds the binary, starts PostgreSQL and the server, measures the dashboard (write-to-DOM latency in
// headless Chromium, memory per connected tab and many tabs under pod churn, the pods page at many pods),
// writes the report and removes everything it started, also when ctx is cancelled or a step fails. A scenario
// that fails is reported with its error and the others still run; the run then returns ErrDashFailed.
func RunDash(ctx context.Context, cfg DashConfig) (*DashResults, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "dashperf-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil { // PostgreSQL runs unprivileged and must reach its data dir
		os.RemoveAll(dir)
		return nil, err
	}
	r := &dashRunner{cfg: cfg, log: cfg.Logger, dir: dir, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0)),
		res: &DashResults{Started: time.Now(), Quick: cfg.Quick, Command: cfg.Command, LoadAvg: loadAvg(),
			Shape: DashShape{Scenarios: cfg.Scenarios, LatencySamples: cfg.LatencySamples, LatencyPods: cfg.LatencyPods,
				GapMin: cfg.GapMin, GapMax: cfg.GapMax, PagePods: cfg.PagePods, PageReps: cfg.PageReps,
				CreateWorkers: cfg.CreateWorkers, Tabs: cfg.Tabs, ChurnPods: cfg.ChurnPods, ChurnRate: cfg.ChurnRate,
				ChurnDuration: cfg.ChurnDuration, Seed: cfg.Seed}}}
	if !cfg.KeepTemp {
		r.defer_(func() { os.RemoveAll(dir) })
	} else {
		r.log.Info("keeping temp dir", "dir", dir)
	}
	defer r.cleanup()
	err = r.run(ctx)
	r.res.Finished = time.Now()
	if err != nil {
		r.res.Errors = append(r.res.Errors, err.Error())
	}
	if werr := r.write(); werr != nil {
		return r.res, werr
	}
	if err == nil && r.failed() {
		err = ErrDashFailed
	}
	return r.res, err
}

// ErrDashFailed is returned, after the report is written, when a scenario ended with an error.
var ErrDashFailed = errors.New("dashperf: a scenario failed (see the report)")

func (r *dashRunner) failed() bool {
	res := r.res
	return (res.Latency != nil && res.Latency.Err != "") || (res.Tabs != nil && res.Tabs.Err != "") ||
		(res.Page != nil && res.Page.Err != "")
}

func (r *dashRunner) run(ctx context.Context) error {
	repo := repoRoot()
	r.res.Machine = readMachine(repo, r.dir)
	r.bin = r.cfg.Binary
	r.res.Version = "build of the work tree at " + r.res.Machine.Commit
	if r.bin == "" {
		var err error
		if r.bin, err = buildWheelhouse(ctx, repo, r.dir, r.log); err != nil {
			return err
		}
	} else {
		r.res.Version = r.bin + " (" + binaryVersion(r.bin) + ")"
	}
	r.log.Info("starting PostgreSQL")
	var err error
	if r.pg, err = startPostgres(ctx, filepath.Join(r.dir, "pg"), nil, r.log); err != nil {
		return err
	}
	r.defer_(r.pg.Stop)
	if r.srv, err = startDashServer(ctx, r.bin, r.pg.srv.TCPURL(dbWheelhouse), filepath.Join(r.dir, "server")); err != nil {
		return err
	}
	r.defer_(r.srv.Stop)
	hc := r.srv.browserClient() // the session serves the page scenario's client and every websocket tab
	err = r.srv.signIn(ctx, hc)
	hc.CloseIdleConnections()
	if err != nil {
		return err
	}
	if r.cfg.runs(scLatency) && ctx.Err() == nil {
		r.res.Latency = r.latency(ctx)
		r.logScenario("latency", r.res.Latency.Err)
	}
	if r.cfg.runs(scTabs) && ctx.Err() == nil {
		settle(ctx)
		r.res.Tabs = r.tabs(ctx)
		r.logScenario("tabs", r.res.Tabs.Err)
	}
	if r.cfg.runs(scPage) && ctx.Err() == nil {
		settle(ctx)
		r.res.Page = r.page(ctx)
		r.logScenario("page", r.res.Page.Err)
	}
	if err := r.srv.alive(); err != nil {
		return err
	}
	return ctx.Err()
}

func (r *dashRunner) logScenario(name, err string) {
	if err != "" {
		r.log.Error("scenario failed", "scenario", name, "err", err)
	}
}

// loadAvg is /proc/loadavg's first three fields ("" when unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// write saves the raw results and the report's block.
func (r *dashRunner) write() error {
	if r.cfg.JSONOut != "" {
		b, err := json.MarshalIndent(r.res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(r.cfg.JSONOut), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(r.cfg.JSONOut, b, 0o644); err != nil {
			return err
		}
	}
	if r.cfg.Out == "" {
		return nil
	}
	if err := WriteDashReport(r.cfg.Out, DashReport(r.res)); err != nil {
		return err
	}
	r.log.Info("wrote report block", "path", r.cfg.Out)
	return nil
}
