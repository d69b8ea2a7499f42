package perf

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/migrations"
	"github.com/wheelhouse-dev/wheelhouse/scheduler"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// schedEnv is one end-to-end run's API: served in process by apitest (clusters c1 and c2, real RBAC) on a fresh
// migrated database of the harness's PostgreSQL, with an admin client of cluster c1. The API and the components
// under test log to warn, which counts their warnings for the report.
type schedEnv struct {
	api   *kubeapi.API
	reg   *resources.Registry
	cs    kubernetes.Interface
	db    string
	warn  warnLog
	log   *slog.Logger
	close func()
}

// perfUser creates the workload; the scheduler and the controllers write as their own identities.
var perfUser = kubeapi.User{Name: "perf", Groups: []string{"system:masters"}}

// openAPI creates and migrates database db, and starts the API on it. close stops the API and drops the
// database.
func (r *schedRunner) openAPI(ctx context.Context, db string) (*schedEnv, error) {
	if _, err := r.pg.admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		return nil, fmt.Errorf("CREATE DATABASE %s: %w", db, err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := r.pg.admin.Exec(dctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			r.log.Warn("cannot drop database", "db", db, "err", err)
		}
	}
	if err := migrate(ctx, r.pg.srv.TCPURL(db)); err != nil {
		drop()
		return nil, err
	}
	warn := newWarnLog()
	log := slog.New(warn)
	api, reg, stop, err := apitest.Start(ctx, r.pg.srv.TCPURL(db), log)
	if err != nil {
		drop()
		return nil, fmt.Errorf("starting the API: %w", err)
	}
	cs, err := kubernetes.NewForConfig(api.LocalConfig("c1", perfUser))
	if err != nil {
		stop()
		drop()
		return nil, err
	}
	return &schedEnv{api: api, reg: reg, cs: cs, db: db, warn: warn, log: log, close: func() { stop(); drop() }}, nil
}

func migrate(ctx context.Context, url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// createNodes creates nodes 0..n-1 and gives each its allocatable resources and Ready condition through the
// status subresource, as a kubelet registering does.
func createNodes(ctx context.Context, cs kubernetes.Interface, n, workers int) error {
	return parallel(ctx, workers, n, func(ctx context.Context, i int) error {
		want := schedNode(i)
		created, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: want.ObjectMeta}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", want.Name, err)
		}
		created.Status = want.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", want.Name, err)
		}
		return nil
	})
}

// createPods creates pod(0)..pod(n-1).
func createPods(ctx context.Context, cs kubernetes.Interface, n, workers int, pod func(int) *corev1.Pod) error {
	return parallel(ctx, workers, n, func(ctx context.Context, i int) error {
		p := pod(i)
		p.UID = "" // the API assigns it
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		return nil
	})
}

// load creates case c's cluster: the nodes, the preemption case's victims (bound at creation), and the pending
// pods to measure.
func (r *schedRunner) load(ctx context.Context, env *schedEnv, c string, pods int) error {
	w := r.cfg.Workers
	if err := createNodes(ctx, env.cs, r.cfg.Nodes, w); err != nil {
		return err
	}
	if c == SchedPreemption {
		per := r.cfg.VictimsPerNode
		if err := createPods(ctx, env.cs, r.cfg.Nodes*per, w, func(i int) *corev1.Pod { return victimPod(i/per, i%per) }); err != nil {
			return err
		}
	}
	if err := createPods(ctx, env.cs, pods, w, func(i int) *corev1.Pod { return schedPod(c, i) }); err != nil {
		return err
	}
	return r.pg.vacuumAnalyze(ctx, env.db)
}

// e2eRun measures case c once end to end: a fresh database and API, the nodes and pending pods created through
// the API, then the scheduler (with the event recorder the server gives it) started and timed until it has
// bound every pod; a final list confirms the bindings are stored.
func (r *schedRunner) e2eRun(ctx context.Context, c string, rep int) SchedRun {
	out := SchedRun{Case: c, Rep: rep, Pods: r.cfg.measuredPods(c)}
	env, err := r.openAPI(ctx, fmt.Sprintf("sched_%s_%d", dbSafe(c), rep))
	if err != nil {
		out.Err = err.Error()
		return out
	}
	defer env.close()
	t0 := time.Now()
	if err := r.load(ctx, env, c, out.Pods); err != nil {
		out.Err = "loading: " + err.Error()
		return out
	}
	out.Setup = time.Since(t0)
	r.log.Info("loaded", "case", c, "rep", rep, "nodes", r.cfg.Nodes, "pods", out.Pods, "took", out.Setup.Round(time.Millisecond))
	r.settle(ctx)
	err = r.schedule(ctx, env, &out)
	out.Warnings = env.warn.warnings()
	if err != nil {
		out.Err = err.Error()
		return out
	}
	if out.Confirmed, err = countBound(ctx, env.cs, schedPod(c, 0).Labels["app"]); err != nil {
		out.Err = "confirming: " + err.Error()
	}
	return out
}

// schedule starts the scheduler on env, waits until it has bound out.Pods pods and stops it, then waits for the
// events it recorded to be written (so that closing the API does not cut them off).
func (r *schedRunner) schedule(ctx context.Context, env *schedEnv, out *SchedRun) error {
	events := controllers.NewEvents(controllers.Deps{API: env.api, Registry: env.reg, Logger: env.log})
	defer events.Close()
	s, err := scheduler.New(scheduler.Deps{API: env.api, Registry: env.reg, Logger: env.log, Recorder: events.For})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	stopProfile, err := r.startProfile(out.Case, out.Rep)
	if err != nil {
		cancel()
		return err
	}
	meter := newSchedMeter(r.pg.procs())
	start := time.Now()
	go func() { defer close(done); s.Run(sctx) }()
	progress := func(n int) {
		r.log.Info("binding", "case", out.Case, "rep", out.Rep, "bound", n, "of", out.Pods, "after", time.Since(start).Round(time.Second))
	}
	out.Elapsed, out.FirstBind, err = waitBound(ctx, start, r.cfg.Timeout, out.Pods, func() int { return int(s.Scheduled.Load()) }, progress)
	out.CPU = meter.cores()
	stopProfile()
	out.Scheduled = int(s.Scheduled.Load())
	cancel()
	<-done
	drainEvents(ctx, env.cs, r.log)
	return err
}

// startProfile starts the CPU profile of one measurement when the configuration asks for it; the returned
// function stops it and closes its file.
func (r *schedRunner) startProfile(c string, rep int) (stop func(), err error) {
	if r.cfg.CPUProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%s-%d", r.cfg.CPUProfile, dbSafe(c), rep))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// drainEvents waits until the number of Events stops growing for a second (at most 30 s). It only delays
// closing the API; a failure to list is logged and ends the wait.
func drainEvents(ctx context.Context, cs kubernetes.Interface, log *slog.Logger) {
	deadline := time.Now().Add(30 * time.Second)
	last, same := -1, 0
	for same < 4 && time.Now().Before(deadline) && ctx.Err() == nil {
		list, err := cs.CoreV1().Events(schedNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			log.Warn("cannot list events; not waiting for the rest to be written", "err", err)
			return
		}
		if n := len(list.Items); n == last {
			same++
		} else {
			last, same = n, 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitBound polls bound() every 5 ms until it reaches want, and returns the time from start until then and
// until the first binding. It reports the count to progress every 10 s.
func waitBound(ctx context.Context, start time.Time, timeout time.Duration, want int, bound func() int, progress func(int)) (all, first time.Duration, err error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	report := time.NewTicker(10 * time.Second)
	defer report.Stop()
	deadline := time.After(timeout)
	for {
		n := bound()
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		if n >= want {
			return time.Since(start), first, nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), first, ctx.Err()
		case <-deadline:
			return time.Since(start), first, fmt.Errorf("%w: %d of %d pods bound after %s", errTimeout, n, want, timeout)
		case <-report.C:
			progress(n)
		case <-tick.C:
		}
	}
}

var errTimeout = errors.New("timed out")

// countBound lists the pods labelled app from the API and counts those with a node.
func countBound(ctx context.Context, cs kubernetes.Interface, app string) (int, error) {
	list, err := cs.CoreV1().Pods(schedNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// dbSafe turns a case name into part of a database name.
func dbSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}
