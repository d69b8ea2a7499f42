package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/scheduler"
)

// schedRunner holds one scheduler harness run's state. Cleanups run in reverse order whatever happens.
type schedRunner struct {
	cfg      SchedConfig
	log      *slog.Logger
	dir      string
	pg       *postgres
	res      *SchedResults
	cleanups []func()
}

func (r *schedRunner) defer_(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *schedRunner) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// RunSched measures the scheduler: every algorithm-alone case, then (on a private PostgreSQL) every end-to-end
// case and the Deployment rollout, each Repetitions times with the cases interleaved; then it writes the report
// and removes everything it started, also when ctx is cancelled (Ctrl-C) or a step fails.
func RunSched(ctx context.Context, cfg SchedConfig) (*SchedResults, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shape, err := schedShape(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "schedperf-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	// PostgreSQL runs as an unprivileged user when we are root; it must be able to reach its data dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &schedRunner{cfg: cfg, log: cfg.Logger, dir: dir,
		res: &SchedResults{Started: time.Now(), Quick: cfg.Quick, Command: cfg.Command, Shape: shape}}
	if !cfg.KeepTemp {
		r.defer_(func() { os.RemoveAll(dir) })
	} else {
		r.log.Info("keeping temp dir", "dir", dir)
	}
	defer r.cleanup()
	if err := r.run(ctx); err != nil {
		return r.res, err
	}
	if err := r.write(); err != nil {
		return r.res, err
	}
	return r.res, r.res.failed()
}

// ErrSchedRunsFailed is returned by RunSched, after it wrote the report, when a measurement did not place every
// pod; the report and the results say which and why.
var ErrSchedRunsFailed = errors.New("perf: scheduler measurements failed")

// failed wraps ErrSchedRunsFailed with the count of failed measurements, or is nil.
func (res *SchedResults) failed() error {
	n, all := 0, len(res.Algo)+len(res.E2E)+len(res.Deploy)
	for _, r := range slices.Concat(res.Algo, res.E2E) {
		if !r.ok() {
			n++
		}
	}
	for _, d := range res.Deploy {
		if !d.ok() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d (the report lists them)", ErrSchedRunsFailed, n, all)
}

func schedShape(cfg SchedConfig) (SchedShape, error) {
	sh := SchedShape{Nodes: cfg.Nodes, Pods: cfg.Pods, VictimsPerNode: cfg.VictimsPerNode, Preemptors: cfg.Preemptors,
		Repetitions: cfg.Repetitions, AlgoCases: cfg.AlgoCases, E2ECases: cfg.E2ECases, Workers: cfg.Workers}
	if cfg.DeployReplicas > 0 {
		sh.DeployReplicas, sh.DeployNodes = cfg.DeployReplicas, cfg.DeployNodes
	}
	sc, err := scheduler.LoadConfig("")
	if err != nil {
		return sh, fmt.Errorf("perf: the scheduler's default configuration: %w", err)
	}
	sh.Parallelism, sh.PercentageOfNodesToScore = int(*sc.Parallelism), int(*sc.PercentageOfNodesToScore)
	sh.InitialBackoff = time.Duration(*sc.PodInitialBackoffSeconds) * time.Second
	return sh, nil
}

func (r *schedRunner) run(ctx context.Context) error {
	r.res.Machine = readMachine(repoRoot(), r.dir)
	r.res.IdleOther = r.idleOther(ctx)
	for rep := 1; rep <= r.cfg.Repetitions && ctx.Err() == nil; rep++ {
		for _, c := range r.cfg.AlgoCases {
			r.log.Info("algorithm alone", "case", c, "rep", rep, "nodes", r.cfg.Nodes, "pods", r.cfg.measuredPods(c))
			run := algoRun(ctx, &r.cfg, c, rep)
			r.logRun("algorithm alone done", run)
			r.res.Algo = append(r.res.Algo, run)
		}
	}
	if len(r.cfg.E2ECases) > 0 || r.cfg.DeployReplicas > 0 {
		if err := r.startPostgres(ctx); err != nil {
			return err
		}
	}
	for rep := 1; rep <= r.cfg.Repetitions && ctx.Err() == nil; rep++ {
		for _, c := range r.cfg.E2ECases {
			r.log.Info("end to end", "case", c, "rep", rep, "nodes", r.cfg.Nodes, "pods", r.cfg.measuredPods(c))
			run := r.e2eRun(ctx, c, rep)
			r.logRun("end to end done", run)
			r.res.E2E = append(r.res.E2E, run)
		}
	}
	for rep := 1; rep <= r.cfg.Repetitions && r.cfg.DeployReplicas > 0 && ctx.Err() == nil; rep++ {
		r.log.Info("deployment rollout", "rep", rep, "replicas", r.cfg.DeployReplicas, "nodes", r.cfg.DeployNodes)
		d := r.deployRun(ctx, rep)
		r.log.Info("rollout done", "rep", rep, "bound", d.Bound, "all created", d.AllCreated.Round(time.Millisecond),
			"all bound", d.AllBound.Round(time.Millisecond), "err", d.Err)
		r.res.Deploy = append(r.res.Deploy, d)
	}
	r.res.Finished = time.Now()
	return ctx.Err()
}

// settle pauses for cfg.Settle (or until ctx ends).
func (r *schedRunner) settle(ctx context.Context) {
	if r.cfg.Settle <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(r.cfg.Settle):
	}
}

func (r *schedRunner) logRun(msg string, run SchedRun) {
	r.log.Info(msg, "case", run.Case, "rep", run.Rep, "scheduled", run.Scheduled, "elapsed", run.Elapsed.Round(time.Millisecond),
		"pods/s", int(run.Rate()), "err", run.Err)
}

func (r *schedRunner) startPostgres(ctx context.Context) error {
	r.log.Info("starting PostgreSQL")
	pg, err := startPostgres(ctx, filepath.Join(r.dir, "pg"), nil, r.log)
	if err != nil {
		return err
	}
	r.pg = pg
	r.defer_(pg.Stop)
	r.res.Postgres = pg.version
	return nil
}

// idleOther measures for a second what the rest of the machine is doing before anything is measured.
func (r *schedRunner) idleOther(ctx context.Context) float64 {
	m := newSchedMeter(procGroup{})
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	other := m.cores().Other
	if other > busyOther {
		r.log.Warn("the machine is busy with other work; the numbers will be disturbed", "other-cores", fmt.Sprintf("%.2f", other))
	}
	return other
}

// write saves the raw results and the report's section.
func (r *schedRunner) write() error {
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
	if err := WriteSchedReport(r.cfg.Out, SchedReport(r.res)); err != nil {
		return err
	}
	r.log.Info("wrote report section", "path", r.cfg.Out)
	return nil
}
