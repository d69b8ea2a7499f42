package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiTarget is one server under test.
type apiTarget struct {
	name  string
	cache bool
	db    string // its own PostgreSQL database
	srv   *apiServer
}

// apiRunner holds one API harness run's state. Cleanups run in reverse order whatever happens.
type apiRunner struct {
	cfg      APIConfig
	log      *slog.Logger
	dir      string
	pg       *postgres
	bin      string
	token    string
	targets  []*apiTarget
	res      *APIResults
	cleanups []func()
}

func (r *apiRunner) defer_(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *apiRunner) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// RunAPI builds the server, starts PostgreSQL and one server per target, measures every scenario, writes the
// report and removes everything it started, also when ctx is cancelled (Ctrl-C) or a step fails.
func RunAPI(ctx context.Context, cfg APIConfig) (*APIResults, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "apiperf-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	// PostgreSQL runs as an unprivileged user when we are root; it must be able to reach its data dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &apiRunner{cfg: cfg, log: cfg.Logger, dir: dir, token: newToken(), res: &APIResults{
		Started: time.Now(), Quick: cfg.Quick, Command: cfg.Command, Protocol: map[string]string{}, Shape: APIShape{
			Repetitions: cfg.Repetitions, CreateRate: cfg.CreateRate, CreateDuration: cfg.CreateDuration,
			ListPods: cfg.ListPods, ListRepetitions: cfg.ListRepetitions, Watchers: cfg.Watchers,
			WatchRate: cfg.WatchRate, WatchDuration: cfg.WatchDuration,
		}}}
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

func (r *apiRunner) run(ctx context.Context) error {
	repo := repoRoot()
	r.res.Machine = readMachine(repo, r.dir)
	r.bin = r.cfg.Binary
	if r.bin == "" {
		var err error
		if r.bin, err = buildWheelhouse(ctx, repo, r.dir, r.log); err != nil {
			return err
		}
	}
	r.log.Info("starting PostgreSQL")
	pg, err := startPostgres(ctx, filepath.Join(r.dir, "pg"), nil, r.log)
	if err != nil {
		return err
	}
	r.pg = pg
	r.defer_(pg.Stop)
	r.setup(ctx)
	if len(r.targets) == 0 {
		return fmt.Errorf("no target could be started: %s", r.targetErrors())
	}
	r.res.IdleOther = r.idleOther(ctx)
	for rep := 1; rep <= r.cfg.Repetitions; rep++ {
		for _, t := range r.targets {
			if err := ctx.Err(); err != nil {
				return err
			}
			r.res.Reps = append(r.res.Reps, r.repetition(ctx, t, rep))
		}
	}
	if r.cfg.RBACCount > 0 && ctx.Err() == nil {
		r.res.RBAC = runRBACBenchmarks(ctx, repo, r.cfg.RBACCount, r.log)
	}
	r.res.Finished = time.Now()
	return ctx.Err()
}

// busyOther is the CPU (cores) other processes may use before the harness warns that they disturb it.
const busyOther = 0.2

// idleOther measures for a second what the rest of the machine is doing while the harness and its servers are
// idle, and warns when that is enough to disturb the measurements.
func (r *apiRunner) idleOther(ctx context.Context) float64 {
	settle(ctx)
	ours := func() int64 {
		t := cpuTicks(os.Getpid(), false) + r.pg.procs().ticks()
		for _, tg := range r.targets {
			t += cpuTicks(tg.srv.pid(), false)
		}
		return t
	}
	t0, all0, ours0 := time.Now(), machineBusyTicks(), ours()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	busy := float64(machineBusyTicks()-all0-(ours()-ours0)) / clockTick
	other := max(0, busy/time.Since(t0).Seconds())
	if other > busyOther {
		r.log.Warn("the machine is busy with other work; the numbers will be disturbed", "other-cores", fmt.Sprintf("%.2f", other))
	}
	return other
}

func (r *apiRunner) targetErrors() string {
	var s []string
	for _, t := range r.res.Targets {
		if t.Err != "" {
			s = append(s, t.Name+": "+t.Err)
		}
	}
	return strings.Join(s, "; ")
}

// setup starts and loads every target it can; a target that cannot start is reported, not fatal.
func (r *apiRunner) setup(ctx context.Context) {
	version := "build of the work tree at " + r.res.Machine.Commit
	if r.cfg.Binary != "" {
		version = r.cfg.Binary + " (" + binaryVersion(r.bin) + ")"
	}
	for _, name := range AllAPITargets {
		if !slices.Contains(r.cfg.Targets, name) {
			continue
		}
		t := &apiTarget{name: name, cache: name == APIWheelhouse, db: "api_" + strings.ReplaceAll(name, "-", "_")}
		info := TargetInfo{Name: name}
		if err := r.startTarget(ctx, t); err != nil {
			info.Err = err.Error()
			r.log.Error("target unavailable", "target", name, "err", err)
		} else {
			onOff := map[bool]string{true: "on", false: "off"}[t.cache]
			info.Version = version + " on PostgreSQL " + r.pg.version
			info.Setup = fmt.Sprintf("`wheelhouse server --watch-cache %s --log-level warn`, own database %s on the "+
				"shared PostgreSQL over loopback TCP; client-go (protobuf) over %s with TLS", onOff, t.db, t.srv.proto)
			r.res.Protocol[name] = t.srv.proto
			r.targets = append(r.targets, t)
		}
		r.res.Targets = append(r.res.Targets, info)
	}
}

// startTarget creates the target's database, starts its server and loads what the scenarios need.
func (r *apiRunner) startTarget(ctx context.Context, t *apiTarget) error {
	if _, err := r.pg.admin.Exec(ctx, "CREATE DATABASE "+t.db); err != nil {
		return fmt.Errorf("CREATE DATABASE %s: %w", t.db, err)
	}
	r.log.Info("starting server", "target", t.name)
	srv, err := startAPIServer(ctx, t.name, r.bin, r.pg.srv.TCPURL(t.db), filepath.Join(r.dir, "server-"+t.name), r.token, t.cache)
	if err != nil {
		return err
	}
	t.srv = srv
	r.defer_(srv.Stop)
	if err := r.load(ctx, t); err != nil {
		srv.Stop() // not measured: it should not idle next to the others
		return err
	}
	return nil
}

// load creates the namespaces, the list scenario's pods and the watched ConfigMaps, then refreshes PostgreSQL's
// statistics (as pgbench does after loading, so that plans fit the tables' real sizes) and lists once so that
// the cached target has its pods collection before anything is measured.
func (r *apiRunner) load(ctx context.Context, t *apiTarget) error {
	cs := t.srv.cs
	for _, ns := range []string{nsCreate, nsList, nsWatch} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	t0 := time.Now()
	if err := parallel(ctx, 32, r.cfg.ListPods, func(ctx context.Context, i int) error {
		_, err := cs.CoreV1().Pods(nsList).Create(ctx, perfPod(fmt.Sprintf("list-%06d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("loading %d pods: %w", r.cfg.ListPods, err)
	}
	r.log.Info("loaded pods", "target", t.name, "pods", r.cfg.ListPods, "took", time.Since(t0).Round(time.Millisecond))
	for i := range watchedConfigMaps {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: watchedName(i)}, Data: map[string]string{
			"app.properties": "mode=production\nthreads=8\n", "log.level": "info"}}
		if _, err := cs.CoreV1().ConfigMaps(nsWatch).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create configmap: %w", err)
		}
	}
	if err := r.pg.vacuumAnalyze(ctx, t.db); err != nil {
		return err
	}
	if _, err := cs.CoreV1().Pods(nsList).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("first list: %w", err)
	}
	return nil
}

// settleTime is the pause before each scenario, so that the previous one's tail (closing a thousand watch
// connections, a garbage collection, PostgreSQL writing back) does not land in the next measurement.
const settleTime = 2 * time.Second

func settle(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(settleTime):
	}
}

// repetition runs the three scenarios against one target.
func (r *apiRunner) repetition(ctx context.Context, t *apiTarget, rep int) APIRep {
	out := APIRep{Target: t.name, Rep: rep}
	settle(ctx)
	r.log.Info("creates", "target", t.name, "rep", rep, "rate", r.cfg.CreateRate, "duration", r.cfg.CreateDuration)
	out.Create = r.createScenario(ctx, t, rep)
	c := out.Create
	r.log.Info("creates done", "target", t.name, "rep", rep, "creates/s", int(c.Rate()), "p50", c.P50.Round(time.Microsecond),
		"p99", c.P99.Round(time.Microsecond), "errors", c.Errors, "late", c.Late, "err", c.Err)
	if ctx.Err() != nil {
		return out
	}
	settle(ctx)
	r.log.Info("lists", "target", t.name, "rep", rep, "pods", r.cfg.ListPods)
	out.List = r.listScenario(ctx, t)
	for _, f := range out.List.Forms {
		r.log.Info("list done", "target", t.name, "rep", rep, "form", f.Key, "p50", medianDuration(f.Durations).Round(time.Microsecond),
			"bytes", f.Bytes, "err", f.Err)
	}
	if ctx.Err() != nil {
		return out
	}
	settle(ctx)
	r.log.Info("watch fan-out", "target", t.name, "rep", rep, "watchers", r.cfg.Watchers, "writes/s", r.cfg.WatchRate)
	out.Watch = r.watchScenario(ctx, t, rep)
	w := out.Watch
	r.log.Info("watch done", "target", t.name, "rep", rep, "received", w.Received, "expected", w.Expected,
		"p50", w.P50.Round(time.Microsecond), "p99", w.P99.Round(time.Microsecond), "err", w.Err)
	return out
}

// write saves the raw results and the report's section.
func (r *apiRunner) write() error {
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
	if err := WriteAPIReport(r.cfg.Out, APIReport(r.res)); err != nil {
		return err
	}
	r.log.Info("wrote report section", "path", r.cfg.Out)
	return nil
}
