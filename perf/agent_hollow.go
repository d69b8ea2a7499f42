package perf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hollowCluster is the cluster the hollow nodes join; its pod CIDR (a /10: 16,384 node CIDRs of /24) leaves
// room for every hollow node's spec.podCIDR, which the default /16 (256 nodes) would not.
const (
	hollowCluster = "hollow"
	hollowPodCIDR = "10.128.0.0/10"
)

// hollow runs `wheelhouse agent --hollow HollowNodes` against its own cluster, times the nodes to Ready,
// samples the idle steady state, then per repetition runs a Deployment of HollowNodes × HollowPodsPerNode pods
// to Running and samples the loaded steady state.
func (r *agentRunner) hollow(ctx context.Context) {
	fail := func(err error) {
		r.res.Hollow = append(r.res.Hollow, AgentHollowRep{Rep: 1, Nodes: r.cfg.HollowNodes, Err: err.Error()})
		r.log.Error("hollow scenario", "err", err)
	}
	if err := r.srv.platform(ctx, http.MethodPost, "/teams/default/clusters",
		map[string]string{"id": hollowCluster, "name": hollowCluster, "podCIDR": hollowPodCIDR}, nil); err != nil {
		fail(err)
		return
	}
	cs, err := r.srv.clusterClient(hollowCluster)
	if err != nil {
		fail(err)
		return
	}
	jt, err := r.srv.joinToken(ctx, hollowCluster, r.cfg.HollowNodes)
	if err != nil {
		fail(err)
		return
	}
	dir := filepath.Join(r.dir, "hollow")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fail(err)
		return
	}
	r.log.Info("starting hollow nodes", "count", r.cfg.HollowNodes)
	t0 := time.Now()
	args := []string{"--server", r.srv.base, "--token", jt, "--node-name", "hollow", "--data-dir", dir, "--log-level", "warn",
		"--hollow", strconv.Itoa(r.cfg.HollowNodes)}
	if addr := os.Getenv("PERF_HOLLOW_DEBUG_LISTEN"); addr != "" { // profile the hollow agent: go tool pprof http://<addr>/debug/pprof/profile
		args = append(args, "--debug-listen", addr)
	}
	h, err := startAgent("hollow", r.bin, "", filepath.Join(dir, "agent.log"), args...)
	if err != nil {
		fail(err)
		return
	}
	defer h.Stop(30 * time.Second)
	if err := waitFor(ctx, r.cfg.Timeout, "every hollow node Ready", func() bool {
		return !h.exited() && readyNodes(ctx, cs) == r.cfg.HollowNodes
	}); err != nil {
		fail(fmt.Errorf("%w (exited: %v); end of the hollow agent's log:\n%s", err, h.exited(), h.logTail()))
		return
	}
	ready := time.Since(t0)
	r.log.Info("hollow nodes Ready", "count", r.cfg.HollowNodes, "took", ready.Round(time.Millisecond))
	settle(ctx)
	idle := r.usage(ctx, h.pid(), r.cfg.Steady)
	for rep := 1; rep <= r.cfg.HollowReps && ctx.Err() == nil; rep++ {
		out := AgentHollowRep{Rep: rep, Nodes: r.cfg.HollowNodes, Pods: r.cfg.HollowNodes * r.cfg.HollowPodsPerNode, Idle: idle}
		if rep == 1 {
			out.NodesReady = ready
		}
		if err := r.hollowRep(ctx, h.pid(), &out, rep < r.cfg.HollowReps); err != nil {
			out.Err = err.Error()
		}
		r.log.Info("hollow", "rep", rep, "running", out.Running, "all-running", out.AllRunning.Round(time.Millisecond),
			"server-cores", fmt.Sprintf("%.2f", out.Loaded.ServerCores), "server-rss", fmtBytes(float64(out.Loaded.ServerRSS)), "err", out.Err)
		r.res.Hollow = append(r.res.Hollow, out)
	}
	if h.exited() {
		r.res.Errors = append(r.res.Errors, "the hollow agent exited: "+h.logTail())
	}
}

// hollowRep runs one Deployment of the hollow pods to Running, samples the steady state and, when another
// repetition follows, deletes the namespace and waits until its pods are gone.
func (r *agentRunner) hollowRep(ctx context.Context, hollowPID int, out *AgentHollowRep, clean bool) error {
	cs, err := r.srv.clusterClient(hollowCluster)
	if err != nil {
		return err
	}
	ns := "hollow-" + strconv.Itoa(out.Rep)
	pt, err := timedNamespace(ctx, cs, ns)
	if err != nil {
		return err
	}
	defer pt.Stop()
	t0 := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, sleepDeployment("load", out.Pods), metav1.CreateOptions{}); err != nil {
		return err
	}
	logged := time.Now()
	werr := waitFor(ctx, r.cfg.Timeout, "every hollow pod Running", func() bool {
		running, live, _ := pt.counts()
		if time.Since(logged) >= 10*time.Second {
			r.log.Info("hollow pods", "rep", out.Rep, "created", live, "running", running, "of", out.Pods)
			if live >= out.Pods && running < out.Pods {
				r.log.Info("hollow pods not Running yet", "rep", out.Rep, "oldest", strings.Join(pt.notRunning(3), "; "))
			}
			logged = time.Now()
		}
		return running >= out.Pods
	})
	out.AllRunning = time.Since(t0)
	pt.mu.Lock()
	lat := latencies(pt.added, pt.running)
	pt.mu.Unlock()
	out.Running = len(lat)
	out.P50, out.P99 = percentile(lat, 50), percentile(lat, 99)
	if werr != nil {
		return werr
	}
	settle(ctx)
	out.Loaded = r.usage(ctx, hollowPID, r.cfg.Steady)
	if !clean {
		return nil
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return errors.Join(waitFor(ctx, r.cfg.Timeout, "the hollow pods gone", func() bool {
		_, live, _ := pt.counts()
		return live == 0
	}))
}
