package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// system is one target as the phases see it.
type system struct {
	name string
	t    target
	// serverPID is the target's server process; 0 for wheelhouse, whose store runs in the harness.
	serverPID int
	pgBacked  bool
	database  string // PostgreSQL database of a pgBacked target
	watchKind string
	watchURL  string
}

func (s *system) watcherSpec(mode string, watches int) watcherSpec {
	return watcherSpec{Kind: s.watchKind, URL: s.watchURL, Mode: mode, Watches: watches}
}

// runner holds one run's state. Cleanups run in reverse order whatever happens.
type runner struct {
	cfg      Config
	log      *slog.Logger
	dir      string
	pg       *postgres
	systems  []*system
	res      *Results
	cleanups []func()
}

func (r *runner) path(name string) string { return filepath.Join(r.dir, name) }

func (r *runner) defer_(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *runner) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// Run starts PostgreSQL, etcd and kine, measures every target, writes the report and removes everything it
// started, also when ctx is cancelled (Ctrl-C) or a step fails.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.WatcherCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("perf: own executable: %w", err)
		}
		cfg.WatcherCommand = []string{exe, "watcher"}
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "storeperf-")
	if err != nil {
		return nil, fmt.Errorf("perf: temp dir: %w", err)
	}
	// PostgreSQL runs as an unprivileged user when we are root; it must be able to reach its data dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("perf: %w", err)
	}
	r := &runner{cfg: cfg, log: cfg.Logger, dir: dir,
		res: &Results{Started: time.Now(), Quick: cfg.Quick, Command: cfg.Command,
			PointDuration: cfg.PointDuration, Repetitions: cfg.Repetitions, WatchDuration: cfg.WatchDuration}}
	if !cfg.KeepTemp {
		r.defer_(func() { os.RemoveAll(dir) })
	} else {
		r.log.Info("keeping temp dir", "dir", dir)
	}
	defer r.cleanup()
	if err := r.run(ctx); err != nil {
		return r.res, err
	}
	return r.res, r.write()
}

func (r *runner) run(ctx context.Context) error {
	r.res.Machine = readMachine(repoRoot(), r.dir)
	r.setup(ctx)
	if len(r.systems) == 0 {
		return fmt.Errorf("perf: no target could be started: %v", r.res.Targets)
	}
	phases := []struct {
		name string
		f    func(context.Context)
	}{
		{"warm-up", r.warmUp},
		{"throughput", r.throughput},
		{"diagnostics", r.diagnostics},
		{"watch latency", r.watchPhase},
		{"list and memory", func(ctx context.Context) {
			for _, sys := range r.systems {
				r.listPhase(ctx, sys)
			}
		}},
	}
	for _, p := range phases {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.log.Info("phase", "name", p.name)
		p.f(ctx)
	}
	r.res.Finished = time.Now()
	return ctx.Err()
}

// setup starts every target it can; a target that cannot start is reported, not fatal.
func (r *runner) setup(ctx context.Context) {
	needPG := slices.Contains(r.cfg.Targets, Wheelhouse) || slices.Contains(r.cfg.Targets, Kine)
	var pgErr error
	if needPG {
		r.log.Info("starting PostgreSQL")
		r.pg, pgErr = startPostgres(ctx, r.path("pg"), r.cfg.PGSettings, r.log)
		if pgErr == nil {
			r.defer_(r.pg.Stop)
		}
	}
	for _, name := range AllTargets {
		if !slices.Contains(r.cfg.Targets, name) {
			continue
		}
		info := TargetInfo{Name: name}
		var sys *system
		var err error
		switch {
		case name != Etcd && pgErr != nil:
			err = pgErr
		case name == Wheelhouse:
			sys, err = r.setupWheelhouse(ctx, &info)
		case name == Etcd:
			sys, err = r.setupEtcd(ctx, &info)
		case name == Kine:
			sys, err = r.setupKine(ctx, &info)
		}
		if err != nil {
			info.Err = err.Error()
			r.log.Error("target unavailable", "target", name, "err", err)
		} else {
			r.systems = append(r.systems, sys)
		}
		r.res.Targets = append(r.res.Targets, info)
	}
}

func (r *runner) setupWheelhouse(ctx context.Context, info *TargetInfo) (*system, error) {
	url := r.pg.srv.TCPURL(dbWheelhouse)
	s, err := openStore(ctx, url, r.log)
	if err != nil {
		return nil, err
	}
	t := &storeTarget{s: s}
	r.defer_(func() { t.Close() })
	info.Version = "store at " + r.res.Machine.Commit + " on PostgreSQL " + r.pg.version
	info.Setup = "in-process store.Store (defaults: 16 connections, 2 batch writers, batches of up to 256; compaction off), " +
		"PostgreSQL over loopback TCP, database " + dbWheelhouse
	return &system{name: Wheelhouse, t: t, pgBacked: true, database: dbWheelhouse, watchKind: kindStore, watchURL: url}, nil
}

func (r *runner) setupEtcd(ctx context.Context, info *TargetInfo) (*system, error) {
	bin, err := findEtcd(ctx, r.cfg.InstallEtcd, r.path("etcd-install.log"), r.log)
	if err != nil {
		return nil, err
	}
	info.Version = etcdVersion(bin)
	dir := r.path("etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r.log.Info("starting etcd", "bin", bin, "version", info.Version)
	srv, err := startEtcd(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	r.defer_(srv.Stop)
	info.Setup = "single member, loopback " + srv.endpoint + ", WAL fsync on every commit (default), quota 8 GiB, no compaction"
	return r.etcdSystem(ctx, Etcd, srv)
}

func (r *runner) setupKine(ctx context.Context, info *TargetInfo) (*system, error) {
	bin, err := findKine(ctx, filepath.Join(r.cfg.CacheDir, "bin"), r.path("kine-install.log"), r.log)
	if err != nil {
		return nil, err
	}
	info.Version = kineVersion + " on PostgreSQL " + r.pg.version
	r.log.Info("starting kine", "bin", bin)
	srv, err := startKine(ctx, bin, r.pg.kineEndpoint(), r.dir)
	if err != nil {
		return nil, err
	}
	r.defer_(srv.Stop)
	info.Setup = "kine defaults, listening on " + srv.endpoint + ", same PostgreSQL over loopback TCP, database " + dbKine
	sys, err := r.etcdSystem(ctx, Kine, srv)
	if sys != nil {
		sys.pgBacked, sys.database = true, dbKine
	}
	return sys, err
}

func (r *runner) etcdSystem(ctx context.Context, name string, srv *server) (*system, error) {
	cli, err := dialEtcd(ctx, srv.endpoint)
	if err != nil {
		return nil, err
	}
	t := &etcdTarget{cli: cli}
	r.defer_(func() { t.Close() })
	return &system{name: name, t: t, serverPID: srv.proc.pid(), watchKind: kindEtcd, watchURL: srv.endpoint}, nil
}

// warmUp writes for a second with 16 writers on every target, so connection pools, caches and JIT-free
// first-use costs are paid before anything is measured.
func (r *runner) warmUp(ctx context.Context) {
	for _, sys := range r.systems {
		l := writeLoad{t: sys.t, op: OpCreate, concurrency: 16, duration: time.Second, point: "warm"}
		rep := l.run(ctx)
		r.log.Info("warm-up", "target", sys.name, "creates/s", int(rep.Rate()), "failed", rep.Failed)
		r.vacuum(ctx, sys)
	}
}

// vacuum runs VACUUM ANALYZE on a PostgreSQL-backed target's database after it was loaded. Without it the
// first minutes of a fresh database run on plans made for empty tables (see docs/perf.md, Method).
func (r *runner) vacuum(ctx context.Context, sys *system) {
	if !sys.pgBacked || r.pg == nil {
		return
	}
	if err := r.pg.vacuumAnalyze(ctx, sys.database); err != nil {
		r.fail("%s: %v", sys.name, err)
	}
}

// throughput measures every (operation, concurrency) point, interleaving the targets within each repetition
// so that drift on the machine (checkpoints, autovacuum, page cache) spreads over all of them.
func (r *runner) throughput(ctx context.Context) {
	maxC := slices.Max(r.cfg.Concurrency)
	for _, op := range []string{OpCreate, OpUpdate} {
		owned := map[string]*ownedKeys{}
		if op == OpUpdate {
			for _, sys := range r.systems {
				o, err := prepareOwned(ctx, sys.t, maxC, r.cfg.KeysPerWriter, "cas")
				if err != nil {
					r.fail("%s: %v", sys.name, err)
					continue
				}
				owned[sys.name] = o
			}
		}
		for _, c := range r.cfg.Concurrency {
			points := map[string]*WritePoint{}
			for _, sys := range r.systems {
				points[sys.name] = &WritePoint{Target: sys.name, Op: op, Concurrency: c}
			}
			for rep := range r.cfg.Repetitions {
				for _, sys := range r.systems {
					if op == OpUpdate && owned[sys.name] == nil {
						continue
					}
					l := writeLoad{t: sys.t, op: op, concurrency: c, duration: r.cfg.PointDuration,
						point: fmt.Sprintf("%s-c%d-r%d", op, c, rep), owned: owned[sys.name]}
					bg := r.watchBackground(ctx)
					m := r.newCPUMeter(sys)
					wr := l.run(ctx)
					wr.CPU = m.cores()
					wr.Background = bg.done(ctx)
					r.log.Info("point", "target", sys.name, "op", op, "writers", c, "rep", rep+1,
						"ops/s", int(wr.Rate()), "p99", wr.P99.Round(time.Microsecond), "failed", wr.Failed)
					points[sys.name].Reps = append(points[sys.name].Reps, wr)
					if ctx.Err() != nil {
						return
					}
				}
			}
			for _, sys := range r.systems {
				r.res.Writes = append(r.res.Writes, *points[sys.name])
			}
		}
	}
}

// watchPhase measures watch latency, the targets interleaved within each repetition.
func (r *runner) watchPhase(ctx context.Context) {
	for _, sys := range r.systems {
		r.vacuum(ctx, sys)
	}
	results := make([]WatchResult, len(r.systems))
	for rep := range r.cfg.Repetitions {
		for i, sys := range r.systems {
			results[i].Target = sys.name
			wr := r.watchLatency(ctx, sys, rep)
			r.log.Info("watch latency", "target", sys.name, "rep", rep+1, "writes/s", int(wr.Rate),
				"p50", wr.P50.Round(time.Microsecond), "p99", wr.P99.Round(time.Microsecond), "err", wr.Err)
			results[i].Reps = append(results[i].Reps, wr)
			if ctx.Err() != nil {
				break
			}
		}
	}
	r.res.Watch = results
}

// diagnostics reruns every throughput point of the PostgreSQL-backed targets once, unmeasured, with
// statement statistics and wait-event sampling.
func (r *runner) diagnostics(ctx context.Context) {
	if r.cfg.NoDiagnose || r.pg == nil {
		return
	}
	maxC := slices.Max(r.cfg.Concurrency)
	for _, sys := range r.systems {
		if !sys.pgBacked {
			continue
		}
		for _, op := range []string{OpCreate, OpUpdate} {
			var owned *ownedKeys
			if op == OpUpdate {
				var err error
				if owned, err = prepareOwned(ctx, sys.t, maxC, r.cfg.KeysPerWriter, "diag"); err != nil {
					r.fail("%s diagnostics: %v", sys.name, err)
					continue
				}
			}
			for _, c := range r.cfg.Concurrency {
				l := writeLoad{t: sys.t, op: op, concurrency: c, duration: r.cfg.PointDuration,
					point: fmt.Sprintf("diag-%s-c%d", op, c), owned: owned}
				d, err := r.diagnose(ctx, sys, l)
				if err != nil {
					r.fail("%s diagnostics %s×%d: %v", sys.name, op, c, err)
					continue
				}
				r.log.Info("diagnosed", "target", sys.name, "op", op, "writers", c, "ops/s", int(d.Rate))
				r.res.Diagnostics = append(r.res.Diagnostics, d)
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
}

func (r *runner) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.log.Error("measurement failed", "err", msg)
	r.res.Errors = append(r.res.Errors, msg)
}

// write saves the report and, if asked, the raw results.
func (r *runner) write() error {
	if r.cfg.JSONOut != "" {
		b, err := json.MarshalIndent(r.res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(r.cfg.JSONOut), 0o755); err != nil {
			return fmt.Errorf("perf: %w", err)
		}
		if err := os.WriteFile(r.cfg.JSONOut, b, 0o644); err != nil {
			return fmt.Errorf("perf: %w", err)
		}
	}
	if r.cfg.Out == "" {
		return nil
	}
	if err := WriteStoreReport(r.cfg.Out, Report(r.res)); err != nil {
		return fmt.Errorf("perf: %w", err)
	}
	r.log.Info("wrote report", "path", r.cfg.Out)
	return nil
}

// repoRoot is the wheelhouse repository: the parent of this module's directory, found from the working
// directory (the harness runs from perf/ or the repository root).
func repoRoot() string {
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "store", "doc.go")); err == nil {
			return d
		}
	}
	return wd
}
