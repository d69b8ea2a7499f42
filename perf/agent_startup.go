package perf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startupRep creates StartupPods pods at CreateRate in a fresh namespace, lets the scheduler spread them over
// the real agents and times each from its create call to Running; then deletes them all.
func (r *agentRunner) startupRep(ctx context.Context, rep int) AgentStartupRep {
	out := AgentStartupRep{Rep: rep, Pods: r.cfg.StartupPods}
	fail := func(err error) AgentStartupRep { out.Err = err.Error(); return out }
	cs, ns := r.srv.cs, "startup-"+strconv.Itoa(rep)
	pt, err := timedNamespace(ctx, cs, ns)
	if err != nil {
		return fail(err)
	}
	defer pt.Stop()
	settle(ctx)
	starts, errs := createAtRate(ctx, cs, ns, r.cfg.StartupPods, r.cfg.CreateRate, func(i int) *corev1.Pod {
		return sleepPod(fmt.Sprintf("p-%04d", i), "")
	})
	werr := waitFor(ctx, r.cfg.Timeout, "every pod Running", func() bool {
		running, _, _ := pt.counts()
		return running >= len(starts)
	})
	pt.mu.Lock()
	run, bind := latencies(starts, pt.running), latencies(starts, pt.bound)
	pt.mu.Unlock()
	out.Running = len(run)
	out.P50, out.P99, out.Max = percentile(run, 50), percentile(run, 99), percentile(run, 100)
	out.BindP50, out.BindP99 = percentile(bind, 50), percentile(bind, 99)
	if err := errors.Join(append(errs, werr)...); err != nil {
		out.Err = err.Error()
	}
	t0 := time.Now()
	if err := deleteAll(ctx, cs, ns, pt, r.cfg.Timeout); err != nil {
		out.Err = errors.Join(errors.New(out.Err), err).Error()
		return out
	}
	out.Delete = time.Since(t0)
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return out
}

// agentRSS reads the first real agent's memory idle, then with RSSPods pods bound to it, and the memory of the
// runtime's shims; then deletes the pods.
func (r *agentRunner) agentRSS(ctx context.Context) *AgentRSS {
	out := &AgentRSS{Pods: r.cfg.RSSPods}
	fail := func(err error) *AgentRSS { out.Err = err.Error(); return out }
	cs, ns, agent := r.srv.cs, "rss", r.agents[0]
	pt, err := timedNamespace(ctx, cs, ns)
	if err != nil {
		return fail(err)
	}
	defer pt.Stop()
	settle(ctx)
	out.IdleRSS = medianRSS(ctx, agent.pid(), 3*time.Second)
	_, errs := createAtRate(ctx, cs, ns, r.cfg.RSSPods, r.cfg.CreateRate, func(i int) *corev1.Pod {
		return sleepPod(fmt.Sprintf("m-%04d", i), r.nodes[0])
	})
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	if err := waitFor(ctx, r.cfg.Timeout, "every pod Running", func() bool {
		running, _, _ := pt.counts()
		return running == r.cfg.RSSPods
	}); err != nil {
		return fail(err)
	}
	out.Running, _, _ = pt.counts()
	settle(ctx)
	c0, t0 := cpuTicks(agent.pid(), false), time.Now()
	out.RSS = medianRSS(ctx, agent.pid(), r.cfg.Steady)
	out.Cores = float64(cpuTicks(agent.pid(), false)-c0) / clockTick / time.Since(t0).Seconds()
	for _, pid := range shimPIDs(r.bin) {
		out.Shims++
		if n, err := pssBytes(pid); err == nil {
			out.ShimPSS += n
		}
	}
	if err := deleteAll(ctx, cs, ns, pt, r.cfg.Timeout); err != nil {
		return fail(err)
	}
	return out
}

// usage samples CPU and memory for d: the server, PostgreSQL, the hollow agent (pid 0: none) and the rest.
func (r *agentRunner) usage(ctx context.Context, hollowPID int, d time.Duration) AgentUsage {
	srv, pg := r.srv.pid(), r.pg.procs()
	t0, s0, p0, h0, all0 := time.Now(), cpuTicks(srv, false), pg.ticks(), cpuTicks(hollowPID, false), machineBusyTicks()
	var srvRSS, hollowRSS []float64
	for time.Since(t0) < d && ctx.Err() == nil {
		if n, err := rssBytes(srv); err == nil {
			srvRSS = append(srvRSS, float64(n))
		}
		if n, err := rssBytes(hollowPID); err == nil && hollowPID > 0 {
			hollowRSS = append(hollowRSS, float64(n))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	el := time.Since(t0).Seconds()
	u := AgentUsage{ServerRSS: int64(median(srvRSS)), HollowRSS: int64(median(hollowRSS)),
		ServerCores:   float64(cpuTicks(srv, false)-s0) / clockTick / el,
		PostgresCores: float64(pg.ticks()-p0) / clockTick / el}
	if hollowPID > 0 {
		u.HollowCores = float64(cpuTicks(hollowPID, false)-h0) / clockTick / el
	}
	u.OtherCores = max(0, float64(machineBusyTicks()-all0)/clockTick/el-u.ServerCores-u.PostgresCores-u.HollowCores)
	return u
}

// medianRSS is the median of a process's RSS sampled every second for d.
func medianRSS(ctx context.Context, pid int, d time.Duration) int64 {
	var samples []float64
	for t0 := time.Now(); time.Since(t0) < d && ctx.Err() == nil; {
		if n, err := rssBytes(pid); err == nil {
			samples = append(samples, float64(n))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return int64(median(samples))
}
