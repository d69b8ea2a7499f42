package perf

import (
	"fmt"
	"strings"
	"time"
)

// Pod startup latency targets: Kubernetes' SLO (sig-scalability, stateless pods, image pulls excluded) and ours.
const (
	startupSLO  = 5 * time.Second
	startupGoal = time.Second
)

// AgentReport renders agentperf's block of docs/perf.md (without markers).
func AgentReport(res *AgentResults) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## The node agent (agentperf)")
	p("")
	if res.Quick {
		p("> **Smoke run (--quick)**: toy sizes; these numbers only show that the harness works.")
		p("")
	}
	m := res.Machine
	p("Measured %s on %d × %s, %.0f GiB, %s, kernel %s, %s; %s. Reproduce: `%s`.", res.Started.Format("2006-01-02"),
		m.CPUs, m.CPUModel, m.MemoryGiB, m.OS, m.Kernel, m.Go, res.Version, res.Command)
	if m.PageTouch > 0 && m.ExecTrue > 0 {
		p("")
		p("This machine: a fresh page's first touch takes %s, running `/bin/true` %s (medians; typical hardware: well", fmtDur(m.PageTouch), fmtDur(m.ExecTrue))
		p("under 1 µs and 1 ms). Pod startup is process creation and memory growth in the agent, the runtime and the")
		p("server, so runs on machines where these differ are not comparable.")
	}
	p("")
	for _, e := range res.Errors {
		p("**Run error**: %s", oneLine(e))
		p("")
	}
	agentStartupReport(p, res)
	agentRSSReport(p, res)
	agentRuntimesReport(p, res)
	agentPullsReport(p, res)
	agentHollowReport(p, res)
	p("### Method")
	p("")
	p("One `wheelhouse server` (built from the work tree, `--log-level warn`, every controller and the scheduler in")
	p("process) on a private PostgreSQL. **Startup**: %d real agents (process runtime), each in a network namespace", res.Shape.RealAgents)
	p("of its own on a host bridge (they share the host's mounts and cgroups), join with one join token and run a")
	p("first pod each before anything is timed; per repetition %d pods of one `sleep 3600` container (10m CPU,", res.Shape.StartupPods)
	p("16 MiB requested) are created at %d/s (open loop) in a fresh namespace and scheduled by the server; each", res.Shape.CreateRate)
	p("is timed from the start of its create call until an informer shows it Running with its container started")
	p("(bound: until it shows spec.nodeName); then they are deleted together and timed until the last is gone.")
	p("The process runtime pulls no images, as the upstream SLO excludes pulls. **Memory**: %d pods bound to the", res.Shape.RSSPods)
	p("first agent; its RSS is the median of one-second samples over %s of steady state; each container also has", res.Shape.Steady)
	p("a shim process (the same binary), counted apart by PSS.")
	agentRuntimesMethod(p, res)
	agentPullsMethod(p, res)
	p("**Hollow**: the real agents are stopped, a cluster")
	p("`%s` (pod CIDR %s) is created and one `wheelhouse agent --hollow %d` joins with one token;", hollowCluster, hollowPodCIDR, res.Shape.HollowNodes)
	p("each hollow node registers, renews its Lease every 10 s, posts status and runs its pods on the in-memory")
	p("runtime (containers Running at once, probes pass). A Deployment of %d × %d replicas is created; each pod is", res.Shape.HollowNodes, res.Shape.HollowPodsPerNode)
	p("timed from its first sighting to Running. CPU is cores averaged over %s of steady state (idle: nodes only;", res.Shape.Steady)
	p("loaded: every pod Running), RSS the median of one-second samples. Timing goals are reported, never asserted.")
	return b.String()
}

func agentStartupReport(p func(string, ...any), res *AgentResults) {
	p("### Pod startup latency (%d real agents, %d pods per repetition)", res.Shape.RealAgents, res.Shape.StartupPods)
	p("")
	if len(res.Startup) == 0 {
		p("Not measured.")
		p("")
		return
	}
	p("| rep | running | p50 | p99 | max | bound p50 | bound p99 | delete all | error |")
	p("|---|---|---|---|---|---|---|---|---|")
	var p50s, p99s []time.Duration
	for _, s := range res.Startup {
		p("| %d | %d/%d | %s | %s | %s | %s | %s | %s | %s |", s.Rep, s.Running, s.Pods, fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.Max),
			fmtDur(s.BindP50), fmtDur(s.BindP99), fmtDur(s.Delete), oneLine(s.Err))
		if s.Err == "" {
			p50s, p99s = append(p50s, s.P50), append(p99s, s.P99)
		}
	}
	p("")
	if len(p99s) > 0 {
		p99 := medianDuration(p99s)
		p("Median of the repetitions: p50 **%s**, p99 **%s**. Kubernetes' SLO p99 ≤ %s: %s. Our goal p99 ≤ %s: %s.",
			fmtDur(medianDuration(p50s)), fmtDur(p99), fmtDur(startupSLO), yes(p99 <= startupSLO), fmtDur(startupGoal), yes(p99 <= startupGoal))
		p("")
	}
}

func agentRSSReport(p func(string, ...any), res *AgentResults) {
	p("### One agent's memory")
	p("")
	m := res.RSS
	if m == nil {
		p("Not measured.")
		p("")
		return
	}
	if m.Err != "" {
		p("**Error**: %s", oneLine(m.Err))
		p("")
	}
	perPod := "—" // the idle agent had not returned memory from earlier scenarios
	if m.Running > 0 && m.RSS > m.IdleRSS {
		perPod = fmtBytes(float64(m.RSS-m.IdleRSS) / float64(m.Running))
	}
	perShim := 0.0
	if m.Shims > 0 {
		perShim = float64(m.ShimPSS) / float64(m.Shims)
	}
	p("| pods running | agent RSS idle | agent RSS with pods | per pod | agent CPU (cores) | shims | shims' PSS | per shim |")
	p("|---|---|---|---|---|---|---|---|")
	p("| %d/%d | %s | %s | %s | %.3f | %d | %s | %s |", m.Running, m.Pods, fmtBytes(float64(m.IdleRSS)), fmtBytes(float64(m.RSS)),
		perPod, m.Cores, m.Shims, fmtBytes(float64(m.ShimPSS)), fmtBytes(perShim))
	p("")
}

func agentHollowReport(p func(string, ...any), res *AgentResults) {
	p("### The server under hollow nodes (%d nodes × %d pods)", res.Shape.HollowNodes, res.Shape.HollowPodsPerNode)
	p("")
	if len(res.Hollow) == 0 {
		p("Not measured.")
		p("")
		return
	}
	p("| rep | nodes Ready after | pods Running | all Running after | pods/s | pod p50 | pod p99 | error |")
	p("|---|---|---|---|---|---|---|---|")
	for _, h := range res.Hollow {
		rate := 0.0
		if h.AllRunning > 0 {
			rate = float64(h.Running) / h.AllRunning.Seconds()
		}
		p("| %d | %s | %d/%d | %s | %s | %s | %s | %s |", h.Rep, fmtDur(h.NodesReady), h.Running, h.Pods, fmtDur(h.AllRunning),
			fmtInt(rate), fmtDur(h.P50), fmtDur(h.P99), oneLine(h.Err))
	}
	p("")
	p("| state | server CPU | server RSS | PostgreSQL CPU | hollow agent CPU | hollow agent RSS | other CPU |")
	p("|---|---|---|---|---|---|---|")
	row := func(name string, u AgentUsage) {
		p("| %s | %.2f | %s | %.2f | %.2f | %s | %.2f |", name, u.ServerCores, fmtBytes(float64(u.ServerRSS)), u.PostgresCores,
			u.HollowCores, fmtBytes(float64(u.HollowRSS)), u.OtherCores)
	}
	row("idle (heartbeats only)", res.Hollow[0].Idle)
	for _, h := range res.Hollow {
		if h.Loaded.ServerRSS > 0 {
			row(fmt.Sprintf("rep %d, every pod Running", h.Rep), h.Loaded)
		}
	}
	p("")
}
