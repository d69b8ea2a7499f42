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
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// real agents, one agent's memory, the runtimes side by side, pulls of absent images, and the server under hollow
// nodes, writes the report and removes everything it started, also when ctx is cancelled or a step fails. Needs
// root (network namespaces, the process runtime).
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
			CreateRate: cfg.CreateRate, Repetitions: cfg.Repetitions, RSSPods: cfg.RSSPods, RuntimePods: cfg.RuntimePods, Pulls: cfg.Pulls, HollowNodes: cfg.HollowNodes,
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
	netns := r.cfg.RealAgents
	if r.cfg.RuntimePods > 0 {
		netns += 3 // one agent per runtime, and containerd's without the start limit
	}
	if r.cfg.Pulls > 0 {
		netns++ // the pulling agent's
	}
	teardown, err := setupNetns(netns)
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
	if r.cfg.StartupPods > 0 || r.cfg.RSSPods > 0 {
		if err := r.startRealAgents(ctx); err != nil {
			return err
		}
	}
	for rep := 1; rep <= r.cfg.Repetitions && r.cfg.StartupPods > 0 && ctx.Err() == nil; rep++ {
		st := r.startupRep(ctx, rep)
		r.log.Info("startup", "rep", rep, "running", st.Running, "p50", st.P50, "p99", st.P99, "err", st.Err)
		r.res.Startup = append(r.res.Startup, st)
	}
	if r.cfg.RSSPods > 0 && ctx.Err() == nil {
		r.res.RSS = r.agentRSS(ctx)
		r.log.Info("agent memory", "idle", fmtBytes(float64(r.res.RSS.IdleRSS)), "with-pods", fmtBytes(float64(r.res.RSS.RSS)), "err", r.res.RSS.Err)
	}
	r.stopRealAgents()
	if r.cfg.RuntimePods > 0 && ctx.Err() == nil {
		r.res.Runtimes = r.runtimes(ctx)
	}
	if r.cfg.Pulls > 0 && ctx.Err() == nil {
		r.res.Pulls = r.pulls(ctx)
	}
	if r.cfg.HollowNodes > 0 && ctx.Err() == nil {
		r.hollow(ctx)
	}
	r.res.Finished = time.Now()
	return ctx.Err()
}

// realAgent is one real agent to start: its node's name, the network namespace it runs in, the flags that
// choose its runtime (none: the process runtime) and the pods it runs (the warm-up pod and the measured ones).
type realAgent struct {
	node, netns string
	args        []string
	pod         func(name, node string) *corev1.Pod
}

// startRealAgents joins RealAgents process-runtime agents, each in its namespace, and waits until their nodes
// are Ready and their pod networks up.
func (r *agentRunner) startRealAgents(ctx context.Context) error {
	specs := make([]realAgent, r.cfg.RealAgents)
	for i := range specs {
		specs[i] = realAgent{node: "perf-agent-" + strconv.Itoa(i), netns: perfNetns(i), pod: sleepPod}
	}
	_, err := r.startAgents(ctx, specs)
	return err
}

// startAgents joins the agents with one join token and waits until their nodes are Ready and their pod
// networks up (a first pod on each one runs), and returns them in specs' order. They join r.agents and
// r.nodes; stopRealAgents, also run as a cleanup, deletes their pods and stops them.
func (r *agentRunner) startAgents(ctx context.Context, specs []realAgent) ([]*child, error) {
	jt, err := r.srv.joinToken(ctx, clusterID, len(specs))
	if err != nil {
		return nil, err
	}
	r.defer_(r.stopRealAgents)
	var (
		nodes  []string
		agents []*child
	)
	for _, s := range specs {
		dir := filepath.Join(r.dir, s.node)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		args := append([]string{"--server", r.srv.base, "--token", jt, "--node-name", s.node, "--data-dir", dir,
			"--log-level", "warn"}, s.args...)
		a, err := startAgent(s.node, r.bin, s.netns, filepath.Join(dir, "agent.log"), args...)
		if err != nil {
			return nil, err
		}
		r.agents, agents = append(r.agents, a), append(agents, a)
		r.nodes = append(r.nodes, s.node)
		nodes = append(nodes, s.node)
	}
	r.log.Info("waiting for the real agents", "nodes", nodes)
	cs := r.srv.cs
	if err := waitFor(ctx, 2*time.Minute, "real agents' nodes Ready", func() bool {
		return nodesReady(ctx, cs, nodes)
	}); err != nil {
		return nil, r.agentError(err)
	}
	if err := createNamespace(ctx, cs, "warmup", time.Minute); err != nil {
		return nil, err
	}
	pt, err := newPodTimer(ctx, cs, "warmup")
	if err != nil {
		return nil, err
	}
	defer pt.Stop()
	for _, s := range specs {
		if _, err := cs.CoreV1().Pods("warmup").Create(ctx, s.pod("first-"+s.node, s.node), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "a first pod Running on every agent", func() bool {
		running, _, _ := pt.counts()
		return running == len(specs)
	}); err != nil {
		return nil, r.agentError(fmt.Errorf("%w: %s", err, strings.Join(pt.notRunning(len(specs)), "; ")))
	}
	return agents, deleteAll(ctx, cs, "warmup", pt, r.cfg.Timeout)
}

// agentError adds the end of every agent's log to err.
func (r *agentRunner) agentError(err error) error {
	for _, a := range r.agents {
		err = fmt.Errorf("%w\n--- %s (exited: %v):\n%s", err, a.name, a.exited(), a.logTail())
	}
	return err
}

// stopRealAgents deletes what pods are left on the real agents' nodes (none, unless a step failed or the run
// was interrupted: with a context of its own, so also then) and waits until the agents have stopped them; then
// stops the agents and kills any shim left behind.
func (r *agentRunner) stopRealAgents() {
	if len(r.agents) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := deleteNodePods(ctx, r.srv.cs, r.nodes); err != nil {
			r.log.Warn("pods left on the real agents", "err", err)
		}
		cancel()
	}
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
	r.nodes = nil
}

// deleteNodePods deletes every pod bound to one of nodes and waits until they are gone (their agents have
// stopped them), until ctx ends.
func deleteNodePods(ctx context.Context, cs kubernetes.Interface, nodes []string) error {
	left := func() ([]corev1.Pod, error) {
		var pods []corev1.Pod
		for _, n := range nodes {
			list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
			if err != nil {
				return nil, err
			}
			pods = append(pods, list.Items...)
		}
		return pods, nil
	}
	pods, err := left()
	if err != nil || len(pods) == 0 {
		return err
	}
	for _, p := range pods {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return waitFor(ctx, time.Minute, fmt.Sprintf("%d pods gone from %v", len(pods), nodes), func() bool {
		pods, err := left()
		return err == nil && len(pods) == 0
	})
}

// nodesReady says whether every one of the nodes is Ready.
func nodesReady(ctx context.Context, cs kubernetes.Interface, nodes []string) bool {
	for _, name := range nodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !nodeReady(n) {
			return false
		}
	}
	return true
}

// readyNodes counts the Ready nodes.
func readyNodes(ctx context.Context, cs kubernetes.Interface) int {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if nodeReady(&list.Items[i]) {
			n++
		}
	}
	return n
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
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
