package perf

import (
	"fmt"
	"slices"
	"time"
)

// agentRuntimesReport renders the runtime comparison: the goal (and, when it is not met, what limits it), the two
// runtimes side by side (medians of the repetitions without an error), every repetition, and containerd's CRI
// calls.
func agentRuntimesReport(p func(string, ...any), res *AgentResults) {
	rt := res.Runtimes
	p("### Runtimes side by side: process and containerd (one agent each, %d pods per repetition)", res.Shape.RuntimePods)
	p("")
	if rt == nil {
		p("Not measured.")
		p("")
		return
	}
	if rt.Err != "" {
		p("**Error**: %s", oneLine(rt.Err))
		p("")
	}
	proc, ctd := rt.summary(runtimeProcess), rt.summary(runtimeContainerd)
	runtimesGoal(p, res, ctd)
	if proc.reps > 0 || ctd.reps > 0 {
		runtimesSideBySide(p, rt, proc, ctd)
	}
	if free := rt.summary(runtimeUnlimited); ctd.reps > 0 && free.reps > 0 {
		runtimesStartLimit(p, ctd, free)
	}
	runtimesReps(p, rt)
	runtimesCRI(p, rt)
}

// runtimesStartLimit compares containerd's agent with its default start limit (twice the CPUs) and without one.
func runtimesStartLimit(p func(string, ...any), limited, free runtimeSummary) {
	p("What the agent's start limit changes (`--max-parallel-pod-starts`: by default twice the CPUs start at once,")
	p("the other pods wait their turn in the order they came), both through containerd, medians of the repetitions:")
	p("")
	p("| | limited (%d) | every pod at once (%d) | limited / at once |", limited.reps, free.reps)
	p("|---|---|---|---|")
	row := func(name string, f func(runtimeSummary) float64, format func(float64) string) {
		a, b := f(limited), f(free)
		p("| %s | %s | %s | %s |", name, format(a), format(b), ratio(a, b))
	}
	dur := func(f func(runtimeSummary) time.Duration) func(runtimeSummary) float64 {
		return func(s runtimeSummary) float64 { return float64(f(s)) }
	}
	show := func(v float64) string { return fmtDur(time.Duration(v)) }
	row("**pod startup p50**", dur(func(s runtimeSummary) time.Duration { return s.p50 }), show)
	row("**pod startup p99**", dur(func(s runtimeSummary) time.Duration { return s.p99 }), show)
	row("first create → last pod Running (the window)", dur(func(s runtimeSummary) time.Duration { return s.window }), show)
	row("RunPodSandbox p50 (containerd's log)", dur(func(s runtimeSummary) time.Duration { return s.sandboxTogether }), show)
	row("the runtime's CPU per pod", runtimeSummary.cpuPerPod, fmtSec)
	p("")
}

// runtimeSummary is one runtime's medians over its repetitions without an error; CPU and PSS per pod.
type runtimeSummary struct {
	reps                                          int
	lone, p50, p99, max, bindP50, window          time.Duration
	delete, sandboxesGone                         time.Duration
	agentCPU, containerdCPU, shimsCPU, machine    float64
	steal                                         float64
	agentIdleRSS, agentPeakRSS, containerdPeakRSS float64
	shims, shimsPSS                               float64
	// sandboxAlone and sandboxTogether are RunPodSandbox's p50 for the pod alone and for the others.
	sandboxAlone, sandboxTogether time.Duration
}

func (rt *AgentRuntimes) summary(runtime string) runtimeSummary {
	var ok []AgentRuntimeRep
	for _, r := range rt.Reps {
		if r.Runtime == runtime && r.Err == "" && r.Running > 0 {
			ok = append(ok, r)
		}
	}
	dur := func(f func(AgentRuntimeRep) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range ok {
			ds = append(ds, f(r))
		}
		return medianDuration(ds)
	}
	num := func(f func(AgentRuntimeRep) float64) float64 {
		var xs []float64
		for _, r := range ok {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	perPod := func(f func(AgentRuntimeRep) float64) float64 {
		return num(func(r AgentRuntimeRep) float64 { return f(r) / float64(r.Running) })
	}
	return runtimeSummary{reps: len(ok),
		lone:              dur(func(r AgentRuntimeRep) time.Duration { return r.Lone }),
		p50:               dur(func(r AgentRuntimeRep) time.Duration { return r.P50 }),
		p99:               dur(func(r AgentRuntimeRep) time.Duration { return r.P99 }),
		max:               dur(func(r AgentRuntimeRep) time.Duration { return r.Max }),
		bindP50:           dur(func(r AgentRuntimeRep) time.Duration { return r.BindP50 }),
		window:            dur(func(r AgentRuntimeRep) time.Duration { return r.Window }),
		delete:            dur(func(r AgentRuntimeRep) time.Duration { return r.Delete }),
		sandboxesGone:     dur(func(r AgentRuntimeRep) time.Duration { return r.SandboxesGone }),
		agentCPU:          perPod(func(r AgentRuntimeRep) float64 { return r.AgentCPU }),
		containerdCPU:     perPod(func(r AgentRuntimeRep) float64 { return r.ContainerdCPU }),
		shimsCPU:          perPod(func(r AgentRuntimeRep) float64 { return r.ShimsCPU }),
		machine:           num(func(r AgentRuntimeRep) float64 { return r.MachineCores }),
		steal:             num(func(r AgentRuntimeRep) float64 { return r.MachineSteal }),
		agentIdleRSS:      num(func(r AgentRuntimeRep) float64 { return float64(r.AgentIdleRSS) }),
		agentPeakRSS:      num(func(r AgentRuntimeRep) float64 { return float64(r.AgentPeakRSS) }),
		containerdPeakRSS: num(func(r AgentRuntimeRep) float64 { return float64(r.ContainerdPeakRSS) }),
		shims:             num(func(r AgentRuntimeRep) float64 { return float64(r.Shims) }),
		shimsPSS:          perPod(func(r AgentRuntimeRep) float64 { return float64(r.ShimsPSS) }),
		sandboxAlone:      dur(func(r AgentRuntimeRep) time.Duration { return callP50(r.LoneCRI, criSandboxCall) }),
		sandboxTogether:   dur(func(r AgentRuntimeRep) time.Duration { return callP50(r.CRI, criSandboxCall) }),
	}
}

// callP50 is the p50 of the named call among calls, 0 if it is not there.
func callP50(calls []AgentCRICall, name string) time.Duration {
	for _, c := range calls {
		if c.Call == name {
			return c.P50
		}
	}
	return 0
}

// cpuPerPod is the CPU seconds per pod of every process of the runtime: agent, containerd, shims.
func (s runtimeSummary) cpuPerPod() float64 { return s.agentCPU + s.containerdCPU + s.shimsCPU }

// runtimesGoal is issue 9's goal as the other harnesses mark theirs (measured, measured / goal, met) and,
// when it is not met, what limits it.
func runtimesGoal(p func(string, ...any), res *AgentResults, ctd runtimeSummary) {
	goal := fmt.Sprintf("containerd: pod startup p99 ≤ %s (images present), %d pods on one node", fmtDur(containerdStartupGoal), res.Runtimes.Pods)
	p("| goal | measured | measured / goal | met |")
	p("|---|---|---|---|")
	if ctd.reps == 0 {
		p("| %s | not measured | — | — |", goal)
		p("")
		return
	}
	met := ctd.p99 <= containerdStartupGoal
	p("| %s | p99 %s (median of %s; p50 %s) | %s | %s |", goal, fmtDur(ctd.p99), plural(ctd.reps, "repetition"),
		fmtDur(ctd.p50), ratio(float64(ctd.p99), float64(containerdStartupGoal)), yes(met))
	p("")
	if !met {
		runtimesLimit(p, res, ctd)
	}
}

// runtimesLimit says what limits containerd's pod startup: the machine's CPU when it was saturated over the
// window (busy and stolen cores at least 90 % of all), else the CRI calls themselves.
func runtimesLimit(p func(string, ...any), res *AgentResults, ctd runtimeSummary) {
	cores := float64(max(res.Machine.CPUs, 1))
	p("**What limits it**: one pod alone on the idle node starts in %s with containerd, so the time is lost while", fmtDur(ctd.lone))
	p("the %d pods start together.", res.Runtimes.Pods)
	if ctd.machine+ctd.steal >= 0.9*cores {
		p("The machine's CPU was saturated over the window: %.2f of its %.0f cores busy, %.2f more taken by the", ctd.machine, cores, ctd.steal)
		p("hypervisor (steal time). With containerd a pod costs %s of CPU (agent %s, containerd with the CNI",
			fmtSec(ctd.cpuPerPod()), fmtSec(ctd.agentCPU))
		p("plugins %s, the shims with runc and the containers' start %s), so at %d pods/s the runtime alone wants",
			fmtSec(ctd.containerdCPU), fmtSec(ctd.shimsCPU), res.Shape.CreateRate)
		p("%.1f cores, beside the server, PostgreSQL and the harness: the pods queue for the CPU, and the last ones",
			ctd.cpuPerPod()*float64(res.Shape.CreateRate))
		p("wait longest.")
	} else {
		p("The machine's CPU was not saturated (%.2f of its %.0f cores busy, %.2f taken by the hypervisor): the time",
			ctd.machine, cores, ctd.steal)
		p("is in containerd's calls (below).")
	}
	if ctd.sandboxAlone > 0 && ctd.sandboxTogether > 0 {
		p("RunPodSandbox's p50 is %s for the pod alone and %s for the pods together.", fmtDur(ctd.sandboxAlone), fmtDur(ctd.sandboxTogether))
	}
	p("")
}

// fmtSec formats CPU seconds.
func fmtSec(sec float64) string { return fmtDur(time.Duration(sec * float64(time.Second))) }

// runtimesSideBySide is the two runtimes' medians and their ratio.
func runtimesSideBySide(p func(string, ...any), rt *AgentRuntimes, proc, ctd runtimeSummary) {
	version := runtimeContainerd
	if rt.ContainerdVersion != "" {
		version = "`" + rt.ContainerdVersion + "`"
	}
	p("| median of the repetitions | process (%d) | containerd (%d, %s) | containerd / process |", proc.reps, ctd.reps, version)
	p("|---|---|---|---|")
	// row prints a measure of both runtimes; containerd's own measures have none for the process runtime.
	row := func(name string, containerdOnly bool, f func(runtimeSummary) float64, format func(float64) string) {
		a, b := f(proc), f(ctd)
		pa, pb, r := unlessNone(proc.reps, format(a)), unlessNone(ctd.reps, format(b)), ratio(b, a)
		if containerdOnly {
			pa, r = "—", "—"
		}
		p("| %s | %s | %s | %s |", name, pa, pb, r)
	}
	d := func(f func(runtimeSummary) time.Duration) func(runtimeSummary) float64 {
		return func(s runtimeSummary) float64 { return float64(f(s)) }
	}
	dur := func(v float64) string { return fmtDur(time.Duration(v)) }
	bytes, count := fmtBytes, fmtInt
	coresOf := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	row("one pod alone on the idle node", false, d(func(s runtimeSummary) time.Duration { return s.lone }), dur)
	row("**pod startup p50**", false, d(func(s runtimeSummary) time.Duration { return s.p50 }), dur)
	row("**pod startup p99**", false, d(func(s runtimeSummary) time.Duration { return s.p99 }), dur)
	row("pod startup max", false, d(func(s runtimeSummary) time.Duration { return s.max }), dur)
	row("create → bound p50 (the scheduler's share)", false, d(func(s runtimeSummary) time.Duration { return s.bindP50 }), dur)
	row("first create → last pod Running (the window)", false, d(func(s runtimeSummary) time.Duration { return s.window }), dur)
	row("agent CPU per pod", false, func(s runtimeSummary) float64 { return s.agentCPU }, fmtSec)
	row("containerd CPU per pod (with the CNI plugins)", true, func(s runtimeSummary) float64 { return s.containerdCPU }, fmtSec)
	row("shims' CPU per pod (with runc, and the containers' start)", false, func(s runtimeSummary) float64 { return s.shimsCPU }, fmtSec)
	row("the runtime's CPU per pod, all of the above", false, runtimeSummary.cpuPerPod, fmtSec)
	row("machine's busy cores over the window (every process)", false, func(s runtimeSummary) float64 { return s.machine }, coresOf)
	row("cores stolen by the hypervisor over the window", false, func(s runtimeSummary) float64 { return s.steal }, coresOf)
	row("agent RSS before the pods", false, func(s runtimeSummary) float64 { return s.agentIdleRSS }, bytes)
	row("agent RSS, peak while they start", false, func(s runtimeSummary) float64 { return s.agentPeakRSS }, bytes)
	row("containerd RSS, peak while they start", true, func(s runtimeSummary) float64 { return s.containerdPeakRSS }, bytes)
	row("shims with every pod Running", false, func(s runtimeSummary) float64 { return s.shims }, count)
	row("shims' PSS per pod", false, func(s runtimeSummary) float64 { return s.shimsPSS }, bytes)
	row("delete all (until the API has none)", false, d(func(s runtimeSummary) time.Duration { return s.delete }), dur)
	row("delete all, until containerd has no sandbox", true, d(func(s runtimeSummary) time.Duration { return s.sandboxesGone }), dur)
	p("")
}

// unlessNone is s, or a dash for a runtime with no repetition to show.
func unlessNone(reps int, s string) string {
	if reps == 0 {
		return "—"
	}
	return s
}

// runtimesReps lists every repetition.
func runtimesReps(p func(string, ...any), rt *AgentRuntimes) {
	if len(rt.Reps) == 0 {
		return
	}
	p("| runtime | rep | one pod alone | running | p50 | p99 | max | bound p50 | window | agent CPU | containerd CPU | shims' CPU | busy cores | stolen | agent RSS peak | containerd RSS peak | shims | shims' PSS | delete all | error |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rt.Reps {
		p("| %s | %d | %s | %d/%d | %s | %s | %s | %s | %s | %.2f s | %.2f s | %.2f s | %.2f | %.2f | %s | %s | %d | %s | %s | %s |", r.Runtime,
			r.Rep, fmtDur(r.Lone), r.Running, r.Pods, fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.Max), fmtDur(r.BindP50),
			fmtDur(r.Window), r.AgentCPU, r.ContainerdCPU, r.ShimsCPU, r.MachineCores, r.MachineSteal, fmtBytes(float64(r.AgentPeakRSS)),
			fmtBytes(float64(r.ContainerdPeakRSS)), r.Shims, fmtBytes(float64(r.ShimsPSS)), fmtDur(r.Delete), oneLine(r.Err))
	}
	p("")
}

// runtimesCRI shows how long containerd took to answer the CRI calls of the pods' start, per repetition: for
// the pod alone and for the others.
func runtimesCRI(p func(string, ...any), rt *AgentRuntimes) {
	if !slices.ContainsFunc(rt.Reps, func(r AgentRuntimeRep) bool { return len(r.CRI)+len(r.LoneCRI) > 0 }) {
		return
	}
	p("Where containerd's time goes: its CRI calls for these pods, from the call to the answer as containerd's log")
	p("times them; the agent makes them one after the other for a pod, concurrently for different pods.")
	p("")
	p("| runtime | rep | pods | CRI call | calls | p50 | p99 | max |")
	p("|---|---|---|---|---|---|---|---|")
	for _, r := range rt.Reps {
		for _, part := range []struct {
			what  string
			calls []AgentCRICall
		}{{"one alone", r.LoneCRI}, {fmt.Sprintf("%d together", r.Pods), r.CRI}} {
			for _, c := range part.calls {
				p("| %s | %d | %s | %s | %d | %s | %s | %s |", r.Runtime, r.Rep, part.what, c.Call, c.Calls, fmtDur(c.P50), fmtDur(c.P99), fmtDur(c.Max))
			}
		}
	}
	p("")
}

// agentRuntimesMethod is the runtime comparison's part of the method.
func agentRuntimesMethod(p func(string, ...any), res *AgentResults) {
	rt := res.Runtimes
	if rt == nil {
		return
	}
	p("**Runtimes**: the startup agents are stopped; three new agents join, `--runtime process`,")
	p("`--runtime containerd`, and `--runtime containerd --max-parallel-pod-starts -1` (every pod starting at once,")
	p("without the agent's start limit), each in a network namespace of its own. containerd (Debian's, with runc and")
	p("the runc v2 shim, in `agents/runtime/cri/containerdtest`'s configuration: overlayfs, cgroupfs, CNI plugins from")
	p("`/usr/lib/cni`) runs in each containerd agent's namespace (one each) and reads the CNI configuration the agent writes;")
	p("the pause and podserver images are built and imported before anything is timed (%s), so no pod pulls", fmtDur(rt.Images))
	p("(`imagePullPolicy: Never`). Each agent runs a first pod before anything is timed. Per repetition, the")
	p("runtimes in turn: one pod alone, then %d pods of one container (process: `sleep 3600`; containerd: the", rt.Pods)
	p("podserver image's `/podserver serve`; the same requests) created at %d/s (open loop), in a fresh namespace,", res.Shape.CreateRate)
	p("with a node selector on the agent's hostname so that the scheduler binds them there. Each pod is timed as in")
	p("the startup scenario: from the start of its create call until an informer shows it Running with its")
	p("container started. With %d pods the nearest-rank p99 is the slowest pod. CPU is user + system time over the", rt.Pods)
	p("window from the first create to the last pod Running: the agent's own; containerd's with the processes it ran")
	p("and reaped (the CNI plugins, the shims' start commands); the shims' with what they reaped (runc) and their")
	p("children (the containers from their first instruction: runc's or the process runtime's init). RSS is the")
	p("highest of samples every 100 ms over that window; the shims' PSS is read once every pod runs. After each")
	p("repetition the pods are deleted and, for containerd, the harness waits until the agent has removed every")
	p("sandbox, so the next one starts on an idle node.")
}
