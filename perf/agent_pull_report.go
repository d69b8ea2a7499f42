package perf

import (
	"fmt"
	"time"
)

// pullGoal is issue 22's goal for the agent's pull of an absent image: at most this many times `ctr images
// pull`'s time for an image of the same shape (p50s). The start after the pull has issue 9's goal
// (containerdStartupGoal).
const pullGoal = 1.1

// pullSummary is the pull measurement's percentiles over its samples without an error of their own.
type pullSummary struct {
	ctr, pull, pullTotal, criPull, running, beforePull, afterPull pullDurations
	// ctrCores and agentCores are the median busy cores while ctr pulled and while the agent's pod started.
	ctrCores, agentCores float64
}

// pullDurations is one measure's samples: their count and nearest-rank percentiles.
type pullDurations struct {
	n             int
	p50, p99, max time.Duration
}

func pullPercentiles(ds []time.Duration) pullDurations {
	return pullDurations{n: len(ds), p50: percentile(ds, 50), p99: percentile(ds, 99), max: percentile(ds, 100)}
}

func (ps *AgentPulls) summary() pullSummary {
	var ctr, pull, total, cri, running, before, after []time.Duration
	var ctrCores, agentCores []float64
	for _, s := range ps.Samples {
		if s.CtrErr == "" && s.Ctr > 0 {
			ctr, ctrCores = append(ctr, s.Ctr), append(ctrCores, s.CtrCores)
		}
		if s.Err != "" || s.Running <= 0 || s.Pull <= 0 {
			continue
		}
		pull, total, running = append(pull, s.Pull), append(total, s.PullTotal), append(running, s.Running)
		agentCores = append(agentCores, s.AgentCores)
		if s.CRIPull > 0 {
			cri, before = append(cri, s.CRIPull), append(before, s.BeforePull)
		}
		if s.AfterPull > 0 {
			after = append(after, s.AfterPull)
		}
	}
	return pullSummary{ctr: pullPercentiles(ctr), pull: pullPercentiles(pull), pullTotal: pullPercentiles(total), criPull: pullPercentiles(cri),
		running: pullPercentiles(running), beforePull: pullPercentiles(before), afterPull: pullPercentiles(after), ctrCores: median(ctrCores), agentCores: median(agentCores)}
}

// agentPullsReport renders the pull measurement: the goals, the percentiles side by side with ctr's, and every
// sample.
func agentPullsReport(p func(string, ...any), res *AgentResults) {
	ps := res.Pulls
	p("### Pulling and starting a pod whose image is not on the node (containerd, %d pods one at a time)", res.Shape.Pulls)
	p("")
	if ps == nil {
		p("Not measured.")
		p("")
		return
	}
	if ps.Err != "" {
		p("**Error**: %s", oneLine(ps.Err))
		p("")
	}
	s := ps.summary()
	pullGoals(p, s)
	if s.ctr.n == 0 && s.pull.n == 0 {
		return
	}
	pullSideBySide(p, res, s)
	pullSamples(p, ps)
}

// pullGoals marks issue 22's goal (the agent's pull against ctr's) and issue 9's for the start after the pull,
// as the other harnesses mark theirs, and says where the pull's time goes when the first is missed.
func pullGoals(p func(string, ...any), s pullSummary) {
	p("| goal | measured | measured / goal | met |")
	p("|---|---|---|---|")
	goal := fmt.Sprintf("the agent's pull p50 ≤ %.1f× `ctr images pull` p50 (issue 22)", pullGoal)
	if s.pull.n == 0 || s.ctr.n == 0 {
		p("| %s | not measured | — | — |", goal)
	} else {
		r := float64(s.pull.p50) / float64(s.ctr.p50)
		p("| %s | %.2f× (agent %s, ctr %s) | %s | %s |", goal, r, fmtDur(s.pull.p50), fmtDur(s.ctr.p50),
			ratio(r, pullGoal), yes(r <= pullGoal))
	}
	goal = fmt.Sprintf("start after the pull p99 ≤ %s (issue 9's, as with the image present)", fmtDur(containerdStartupGoal))
	if s.afterPull.n == 0 {
		p("| %s | not measured | — | — |", goal)
	} else {
		p("| %s | p99 %s (p50 %s) | %s | %s |", goal, fmtDur(s.afterPull.p99), fmtDur(s.afterPull.p50),
			ratio(float64(s.afterPull.p99), float64(containerdStartupGoal)), yes(s.afterPull.p99 <= containerdStartupGoal))
	}
	p("")
	if s.pull.n == 0 || s.ctr.n == 0 || float64(s.pull.p50) <= pullGoal*float64(s.ctr.p50) || s.criPull.n == 0 {
		return
	}
	cri := float64(s.criPull.p50) / float64(s.ctr.p50)
	p("**Where the pull's time goes**: containerd answers the agent's PullImage in %s (p50, its log), %.2f× ctr's", fmtDur(s.criPull.p50), cri)
	if cri > pullGoal {
		p("pull: the gap is inside containerd's CRI pull, and the agent adds %s over it.", fmtDur(s.pull.p50-s.criPull.p50))
	} else {
		p("pull: containerd's CRI pull is within the goal, and the agent adds %s over it.", fmtDur(s.pull.p50-s.criPull.p50))
	}
	p("")
}

// pullSideBySide shows ctr's and the agent's percentiles, and what the start after the pull compares with.
func pullSideBySide(p func(string, ...any), res *AgentResults, s pullSummary) {
	ps := res.Pulls
	p("One image is %d layers of %s of random bytes (%s as pushed, gzip)", ps.Layers, fmtBytes(float64(ps.LayerBytes)),
		fmtBytes(float64(ps.ImageBytes)))
	p("on the podserver image (%s, on the node before anything is timed); every pull is of an image of its own.", fmtBytes(float64(ps.BaseBytes)))
	if t := throughput(ps.ImageBytes, s); t != "" {
		p("%s", t)
	}
	p("")
	p("| measure | samples | p50 | p99 | max |")
	p("|---|---|---|---|---|")
	row := func(name string, d pullDurations) {
		if d.n == 0 {
			p("| %s | 0 | — | — | — |", name)
			return
		}
		p("| %s | %d | %s | %s | %s |", name, d.n, fmtDur(d.p50), fmtDur(d.p99), fmtDur(d.max))
	}
	row("**`ctr images pull`** (the floor: fetch and unpack)", s.ctr)
	row("**the agent's pull** (its Pulled event: \"in X\")", s.pull)
	row("the agent's pull with the wait for a pull slot (\"including waiting\")", s.pullTotal)
	row("containerd's CRI PullImage for the agent (its log)", s.criPull)
	row("the agent's pod: create → Running", s.running)
	row("the agent's pod: create → its PullImage call (the sandbox first, as kubelet)", s.beforePull)
	row("**the agent's pod: start after the pull** (PullImage's answer → Running)", s.afterPull)
	p("")
	cores := max(res.Machine.CPUs, 1)
	p("The machine's busy cores (of %d, medians): %.2f while ctr pulled, %.2f from the agent's create to Running.", cores, s.ctrCores, s.agentCores)
	if rt := res.Runtimes; rt != nil {
		if ctd := rt.summary(runtimeContainerd); ctd.reps > 0 {
			p("For comparison, one pod alone with its image present starts in %s (the runtime comparison's median).", fmtDur(ctd.lone))
		}
	}
	p("")
}

// throughput says how fast the p50 pulls moved an image.
func throughput(bytes int64, s pullSummary) string {
	if bytes <= 0 || s.ctr.p50 <= 0 || s.pull.p50 <= 0 {
		return ""
	}
	rate := func(d time.Duration) string { return fmtBytes(float64(bytes)/d.Seconds()) + "/s" }
	return fmt.Sprintf("At the p50s that is %s for ctr and %s for the agent.", rate(s.ctr.p50), rate(s.pull.p50))
}

// pullSamples lists every sample.
func pullSamples(p func(string, ...any), ps *AgentPulls) {
	p("| # | ctr pull | agent's pull | with waiting | containerd's PullImage | create → Running | before the pull | after the pull | busy cores: ctr / agent | error |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range ps.Samples {
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %.2f / %.2f | %s |", s.I, fmtDur(s.Ctr), fmtDur(s.Pull), fmtDur(s.PullTotal),
			fmtDur(s.CRIPull), fmtDur(s.Running), fmtDur(s.BeforePull), fmtDur(s.AfterPull), s.CtrCores, s.AgentCores,
			oneLine(bothErrs(s.CtrErr, s.Err)))
	}
	p("")
}

// bothErrs joins two error messages, either of which may be "".
func bothErrs(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// agentPullsMethod is the pull measurement's part of the method.
func agentPullsMethod(p func(string, ...any), res *AgentResults) {
	ps := res.Pulls
	if ps == nil {
		return
	}
	p("**Pulls**: a registry (Debian's `docker-registry`, TLS from a CA of its own, anonymous) listens on the host's")
	p("side of the bridge. The podserver image is pushed as the base, and per sample two images of the base with %d", ps.Layers)
	p("layers of %s of random bytes each (a seed of their own: nothing shared but the base), one for the agent and", fmtBytes(float64(ps.LayerBytes)))
	p("one for ctr; building and pushing them, containerd's start and an untimed ctr pull of the base took %s.", fmtDur(ps.Prepare))
	p("One more agent, `--runtime containerd --registries registries.yaml` (the registry's CA, k3s's format), runs in")
	p("a network namespace of its own with containerd as in the runtime comparison, whose CRI plugin's registry")
	p("`config_path` is the hosts directory the agent renders from that file. Per sample, one at a time: `sync`;")
	p("`ctr images pull` of the sample's ctr image, run in the agent's network namespace against the same containerd")
	p("(namespace `k8s.io`, its default snapshotter, the agent's hosts directory; ctr's defaults otherwise: it fetches")
	p("every layer at once and unpacks them once all are fetched, and its progress display polls every 100 ms, where")
	p("the CRI plugin fetches 3 at a time and unpacks each as it arrives), timed from its start to its exit;")
	p("`sync`; a pod pinned to the agent's node with the sample's agent image, `imagePullPolicy: IfNotPresent`, timed")
	p("from its create call until an informer shows it Running. The agent's pull is its Pulled event's \"in X\"")
	p("(the CRI PullImage call as the agent times it: fetch and unpack), containerd's from its log; the time before")
	p("the pull is from the create call until containerd logs the PullImage call, the start after the pull from its")
	p("answer until the informer shows the pod Running (containerd's log and the harness share the machine's clock).")
	p("The pod is then deleted and its sandbox awaited gone. With %d samples the nearest-rank p99 is the slowest.", len(ps.Samples))
}
