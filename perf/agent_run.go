package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// agentRunner holds one agentperf run's state. Cleanups run in reverse order whatever happens.
type agentRunner struct {
	cfg      AgentConfig
	log      *slog.Logger
	dir      string
	bin      string
	token    string
	pg       *postgres
	srv      *apiServer
	agents   []*child
	nodes    []string // the real agents' node names
	res      *AgentResults
	cleanups []func()
}

func (r *agentRunner) defer_(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *agentRunner) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// RunAgent builds the binary, starts PostgreSQL, the server and the agents, measures pod startup latency on
// real agents, one agent's memory, and the server under hollow nodes, writes the report and removes everything
// it started, also when ctx is cancelled or a step fails. Needs root (network namespaces, the process runtime).
func RunAgent(ctx context.Context, cfg AgentConfig) (*AgentResults, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "agentperf-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil { // PostgreSQL runs unprivileged and must reach its data dir
		os.RemoveAll(dir)
		return nil, err
	}
	r := &agentRunner{cfg: cfg, log: cfg.Logger, dir: dir, token: newToken(), res: &AgentResults{Started: time.Now(),
		Quick: cfg.Quick, Command: cfg.Command, Shape: AgentShape{StartupPods: cfg.StartupPods, RealAgents: cfg.RealAgents,
			CreateRate: cfg.CreateRate, Repetitions: cfg.Repetitions, RSSPods: cfg.RSSPods, HollowNodes: cfg.HollowNodes,
			HollowPodsPerNode: cfg.HollowPodsPerNode, HollowReps: cfg.HollowReps, Steady: cfg.Steady}}}
	if !cfg.KeepTemp {
		r.defer_(func() { os.RemoveAll(dir) })
	} else {
		r.log.Info("keeping temp dir", "dir", dir)
	}
	defer r.cleanup()
	if err := r.run(ctx); err != nil {
		r.res.Errors = append(r.res.Errors, err.Error())
		_ = r.write()
		return r.res, err
	}
	return r.res, r.write()
}

func (r *agentRunner) run(ctx context.Context) error {
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
	teardown, err := setupNetns(r.cfg.RealAgents)
	r.defer_(teardown)
	if err != nil {
		return err
	}
	r.log.Info("starting PostgreSQL")
	if r.pg, err = startPostgres(ctx, filepath.Join(r.dir, "pg"), nil, r.log); err != nil {
		return err
	}
	r.defer_(r.pg.Stop)
	if r.srv, err = startServerAt(ctx, r.bin, perfHostIP, r.pg.srv.TCPURL(dbWheelhouse), filepath.Join(r.dir, "server"), r.token); err != nil {
		return err
	}
	r.defer_(r.srv.Stop)
	if err := r.startRealAgents(ctx); err != nil {
		return err
	}
	for rep := 1; rep <= r.cfg.Repetitions && ctx.Err() == nil; rep++ {
		st := r.startupRep(ctx, rep)
		r.log.Info("startup", "rep", rep, "running", st.Running, "p50", st.P50, "p99", st.P99, "err", st.Err)
		r.res.Startup = append(r.res.Startup, st)
	}
	if r.cfg.RSSPods > 0 && ctx.Err() == nil {
		r.res.RSS = r.agentRSS(ctx)
		r.log.Info("agent memory", "idle", fmtBytes(float64(r.res.RSS.IdleRSS)), "with-pods", fmtBytes(float64(r.res.RSS.RSS)), "err", r.res.RSS.Err)
	}
	r.stopRealAgents()
	if r.cfg.HollowNodes > 0 && ctx.Err() == nil {
		r.hollow(ctx)
	}
	r.res.Finished = time.Now()
	return ctx.Err()
}

// startRealAgents joins RealAgents agents, each in its namespace, and waits until their nodes are Ready and
// their pod networks up (a first pod on each one runs).
func (r *agentRunner) startRealAgents(ctx context.Context) error {
	jt, err := r.srv.joinToken(ctx, clusterID, r.cfg.RealAgents)
	if err != nil {
		return err
	}
	for i := range r.cfg.RealAgents {
		name := "perf-agent-" + strconv.Itoa(i)
		dir := filepath.Join(r.dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		a, err := startAgent(name, r.bin, perfNetns(i), filepath.Join(dir, "agent.log"), "--server", r.srv.base,
			"--token", jt, "--node-name", name, "--data-dir", dir, "--log-level", "warn")
		if err != nil {
			return err
		}
		r.agents = append(r.agents, a)
		r.nodes = append(r.nodes, name)
	}
	r.defer_(r.stopRealAgents)
	r.log.Info("waiting for the real agents", "count", len(r.nodes))
	cs := r.srv.cs
	if err := waitFor(ctx, 2*time.Minute, "real agents' nodes Ready", func() bool {
		return readyNodes(ctx, cs) == len(r.nodes)
	}); err != nil {
		return r.agentError(err)
	}
	if err := createNamespace(ctx, cs, "warmup", time.Minute); err != nil {
		return err
	}
	pt, err := newPodTimer(ctx, cs, "warmup")
	if err != nil {
		return err
	}
	defer pt.Stop()
	for _, n := range r.nodes {
		if _, err := cs.CoreV1().Pods("warmup").Create(ctx, sleepPod("first-"+n, n), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "a first pod Running on every agent", func() bool {
		running, _, _ := pt.counts()
		return running == len(r.nodes)
	}); err != nil {
		return r.agentError(err)
	}
	return deleteAll(ctx, cs, "warmup", pt, r.cfg.Timeout)
}

// agentError adds the end of every agent's log to err.
func (r *agentRunner) agentError(err error) error {
	for _, a := range r.agents {
		err = fmt.Errorf("%w\n--- %s (exited: %v):\n%s", err, a.name, a.exited(), a.logTail())
	}
	return err
}

// stopRealAgents stops the agents (pods were deleted before) and kills any shim left behind.
func (r *agentRunner) stopRealAgents() {
	for _, a := range r.agents {
		a.Stop(15 * time.Second)
	}
	r.agents = nil
	if n := killShims(r.bin); n > 0 {
		r.log.Warn("killed leftover container shims", "count", n)
	}
	for _, n := range r.nodes {
		// The process runtime keeps its sandboxes' namespaces under a shared mount of its own.
		_ = syscall.Unmount(filepath.Join(r.dir, n, "runtime", "netns"), syscall.MNT_DETACH)
	}
}

// readyNodes counts the Ready nodes.
func readyNodes(ctx context.Context, cs kubernetes.Interface) int {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return -1
	}
	n := 0
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// deleteAll deletes every pod of ns and waits until the timer has seen them go.
func deleteAll(ctx context.Context, cs kubernetes.Interface, ns string, pt *podTimer, timeout time.Duration) error {
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete the pods of %s: %w", ns, err)
	}
	return waitFor(ctx, timeout, "every pod of "+ns+" gone", func() bool {
		_, live, _ := pt.counts()
		return live == 0
	})
}

// write saves the raw results and the report's block.
func (r *agentRunner) write() error {
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
	if err := WriteAgentReport(r.cfg.Out, AgentReport(r.res)); err != nil {
		return err
	}
	r.log.Info("wrote report block", "path", r.cfg.Out)
	return nil
}
