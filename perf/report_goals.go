package perf

import (
	"fmt"
	"strings"
	"time"
)

// Goals from the store issue.
const (
	goalWatchP99  = 10 * time.Millisecond
	goalList100k  = time.Second
	goalListSize  = 100_000
	goalWriters   = 16
	refEtcdCreate = 3550 // creates/s at 16 writers, measured on this machine kind before the harness existed
	refKineCreate = 900
)

// goals states each goal from the issue, whether it is met, and for those not met what the diagnostics say
// limits it.
func (rp reporter) goals() {
	rp.p("## Goals")
	rp.p("")
	rp.p("| goal | wanted | measured | met |")
	rp.p("| --- | --- | --- | --- |")
	var unmet []string
	if g, ok := rp.writeGoal(); ok {
		rp.p("%s", g.row)
		if !g.met {
			unmet = append(unmet, g.why)
		}
	}
	if g, ok := rp.watchGoal(); ok {
		rp.p("%s", g.row)
		if !g.met {
			unmet = append(unmet, g.why)
		}
	}
	if g, ok := rp.listGoal(); ok {
		rp.p("%s", g.row)
		if !g.met {
			unmet = append(unmet, g.why)
		}
	}
	rp.p("")
	rp.p("Reference from the issue, measured on this kind of machine before this harness existed: etcd ~%s creates/s "+
		"with %d writers, about 4× kine's ~%s.", fmtInt(refEtcdCreate), goalWriters, fmtInt(refKineCreate))
	if e, ok := rp.point(Etcd, OpCreate, goalWriters); ok {
		rp.p("This run measured etcd at %s/s (%s the reference); the goal is judged against this run's etcd, on the "+
			"same machine at the same time.", fmtInt(e.MedianRate()), ratio(e.MedianRate(), refEtcdCreate))
	}
	rp.p("")
	for _, t := range rp.res.Targets {
		if t.Err != "" {
			rp.p("**%s could not be measured:** %s", t.Name, oneLine(t.Err))
			rp.p("")
		}
	}
	if len(unmet) > 0 {
		rp.p("### Goals not met, and what limits them")
		rp.p("")
		for _, u := range unmet {
			rp.p("- %s", u)
		}
		rp.p("")
	}
	if g, ok := rp.writeGoal(); ok && g.met {
		if wh, ok := rp.point(Wheelhouse, OpCreate, goalWriters); ok {
			if text := rp.limits(wh, OpCreate, goalWriters); text != "" {
				rp.p("### What limits the store's creates at %d writers", goalWriters)
				rp.p("")
				rp.p("%s", text)
				rp.p("")
			}
		}
	}
}

type goal struct {
	row string
	met bool
	why string
}

func (rp reporter) point(target, op string, c int) (WritePoint, bool) {
	for _, p := range rp.res.Writes {
		if p.Target == target && p.Op == op && p.Concurrency == c && len(p.Reps) > 0 {
			return p, true
		}
	}
	return WritePoint{}, false
}

func (rp reporter) writeGoal() (goal, bool) {
	wh, ok := rp.point(Wheelhouse, OpCreate, goalWriters)
	if !ok {
		return goal{}, false
	}
	w := wh.MedianRate()
	measured := fmt.Sprintf("wheelhouse %s/s", fmtInt(w))
	wanted := "≥ etcd (not measured)"
	met := true
	var etcdRate float64
	if e, ok := rp.point(Etcd, OpCreate, goalWriters); ok {
		etcdRate = e.MedianRate()
		wanted = fmt.Sprintf("≥ etcd: %s/s", fmtInt(etcdRate))
		measured += fmt.Sprintf(" = %s etcd", ratio(w, etcdRate))
		met = w >= etcdRate
		if lo, hi := rateRange(wh); lo < maxRate(e) && minRate(e) < hi {
			measured += fmt.Sprintf(" (repetitions overlap: wheelhouse %s–%s, etcd %s–%s/s, so the margin is within "+
				"run-to-run noise)", fmtInt(lo), fmtInt(hi), fmtInt(minRate(e)), fmtInt(maxRate(e)))
		}
	}
	if k, ok := rp.point(Kine, OpCreate, goalWriters); ok && k.MedianRate() > 0 {
		measured += fmt.Sprintf(", %s kine (%s/s)", ratio(w, k.MedianRate()), fmtInt(k.MedianRate()))
	}
	g := goal{met: met, row: fmt.Sprintf("| creates/s, %d writers | %s | %s | %s |", goalWriters, wanted, measured, yes(met))}
	if !met {
		g.why = fmt.Sprintf("**Write throughput**: %s creates/s against etcd's %s/s. %s", fmtInt(w), fmtInt(etcdRate),
			rp.limits(wh, OpCreate, goalWriters))
	}
	return g, true
}

// rateRange is the lowest and highest rate of a point's repetitions.
func rateRange(p WritePoint) (lo, hi float64) {
	for i, r := range p.Reps {
		if i == 0 || r.Rate() < lo {
			lo = r.Rate()
		}
		hi = max(hi, r.Rate())
	}
	return lo, hi
}

func minRate(p WritePoint) float64 { lo, _ := rateRange(p); return lo }
func maxRate(p WritePoint) float64 { _, hi := rateRange(p); return hi }

// limits explains a throughput point from its CPU accounting and diagnostics.
func (rp reporter) limits(p WritePoint, op string, c int) string {
	var parts []string
	rep := p.medianRep()
	busy := -1.0
	if len(rep.CPU) > 0 {
		total := 0.0
		for _, v := range rep.CPU {
			total += v
		}
		busy = total / float64(max(rp.res.Machine.CPUs, 1))
		parts = append(parts, fmt.Sprintf("CPU: %.0f%% of the machine's %d cores were busy (%s)", 100*busy,
			rp.res.Machine.CPUs, cpuList(rep.CPU)))
	}
	d, ok := rp.diagnosis(p.Target, op, c)
	if ok {
		parts = append(parts, fmt.Sprintf("PostgreSQL: the %s database's backends were busy %.1f at a time on average, %s",
			p.Target, d.Busy, waitList(d.Waits, 3)))
		if d.Commits > 0 {
			parts = append(parts, fmt.Sprintf("%.1f operations per commit (%s commits/s), %s of WAL per operation",
				float64(d.Ops)/float64(d.Commits), fmtInt(float64(d.Commits)/d.Elapsed.Seconds()), fmtBytes(d.WALPerOp)))
		}
		if len(d.Statements) > 0 {
			s := d.Statements[0]
			parts = append(parts, fmt.Sprintf("the costliest statement is `%s` (%s calls, %.3f ms mean)",
				trimQuery(s.Query, 60), fmtInt(float64(s.Calls)), s.MeanMS))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	text := "Evidence: " + strings.Join(parts, "; ") + "."
	serial := share(d.Waits, "Lock:transactionid") + share(d.Waits, "idle in transaction")
	if ok && busy >= 0 && busy < 0.9 && serial > 0.3 && d.Commits > 0 {
		text += fmt.Sprintf(" Reading: the machine is not CPU-bound; the write rate is commits/s × operations per commit, "+
			"and commits are serialised on the `wh_meta` row lock (by design). %.0f%% of the busy samples are a writer "+
			"waiting for that lock or a lock holder waiting, idle in its transaction, for the store to send the rest "+
			"of it (the COMMIT after reading the batch's results): the lock is held across a client round trip. "+
			"Larger batches (more writers) or a shorter lock hold raise the rate.", 100*serial)
	}
	return text + " See Diagnostics below."
}

func share(ws []Share, what string) float64 {
	for _, w := range ws {
		if w.What == what {
			return w.Share
		}
	}
	return 0
}

func (rp reporter) diagnosis(target, op string, c int) (Diagnosis, bool) {
	for _, d := range rp.res.Diagnostics {
		if d.Target == target && d.Op == op && d.Concurrency == c {
			return d, true
		}
	}
	return Diagnosis{}, false
}

func (rp reporter) watchResult(target string) (WatchResult, bool) {
	for _, w := range rp.res.Watch {
		if w.Target == target && len(w.ok()) > 0 {
			return w, true
		}
	}
	return WatchResult{}, false
}

// watchSummary is a target's watch latency over its repetitions: medians, and the worst maximum.
type watchSummary struct {
	reps, writes, received    int
	rate                      float64
	p50, p99, max, wp50, wp99 time.Duration
}

func summarize(w WatchResult) watchSummary {
	ok := w.ok()
	s := watchSummary{reps: len(ok)}
	var rates []float64
	for _, r := range ok {
		s.writes += r.Writes
		s.received += r.Received
		s.max = max(s.max, r.Max)
		rates = append(rates, r.Rate)
	}
	s.rate = median(rates)
	s.p50 = w.median(func(r WatchRep) time.Duration { return r.P50 })
	s.p99 = w.median(func(r WatchRep) time.Duration { return r.P99 })
	s.wp50 = w.median(func(r WatchRep) time.Duration { return r.WriteP50 })
	s.wp99 = w.median(func(r WatchRep) time.Duration { return r.WriteP99 })
	return s
}

func (rp reporter) watchGoal() (goal, bool) {
	w, ok := rp.watchResult(Wheelhouse)
	if !ok {
		return goal{}, false
	}
	s := summarize(w)
	met := s.p99 <= goalWatchP99
	measured := fmt.Sprintf("wheelhouse p99 %s (p50 %s)", fmtDur(s.p99), fmtDur(s.p50))
	for _, o := range rp.others() {
		if ow, ok := rp.watchResult(o); ok {
			measured += fmt.Sprintf("; %s p99 %s", o, fmtDur(summarize(ow).p99))
		}
	}
	g := goal{met: met, row: fmt.Sprintf("| watch latency across processes at %s writes/s, p99 (median of %d) | ≤ %s | %s | %s |",
		fmtInt(s.rate), s.reps, fmtDur(goalWatchP99), measured, yes(met))}
	if !met {
		var per []string
		for _, r := range w.ok() {
			per = append(per, fmt.Sprintf("p99 %s with write p99 %s, background: %s", fmtDur(r.P99), fmtDur(r.WriteP99), r.Background))
		}
		g.why = fmt.Sprintf("**Watch latency**: p99 %s. The writes themselves (start to acknowledged commit) took p99 %s, "+
			"so delivery after the commit adds about %s at p99. Each repetition: %s.", fmtDur(s.p99), fmtDur(s.wp99),
			fmtDur(max(s.p99-s.wp99, 0)), strings.Join(per, "; "))
	}
	return g, true
}

func (rp reporter) listResult(target string, n int) (ListResult, bool) {
	for _, l := range rp.res.Lists {
		if l.Target == target && l.Objects == n && l.Err == "" && len(l.Durations) > 0 {
			return l, true
		}
	}
	return ListResult{}, false
}

func (rp reporter) listGoal() (goal, bool) {
	size := goalListSize
	l, ok := rp.listResult(Wheelhouse, size)
	if !ok {
		return goal{}, false
	}
	m := medianDuration(l.Durations)
	met := m <= goalList100k
	measured := "wheelhouse " + fmtDur(m)
	for _, o := range rp.others() {
		if ol, ok := rp.listResult(o, size); ok {
			measured += fmt.Sprintf("; %s %s", o, fmtDur(medianDuration(ol.Durations)))
		}
	}
	g := goal{met: met, row: fmt.Sprintf("| list of %s objects (1 KiB), p50 | ≤ %s | %s | %s |", fmtInt(float64(size)),
		fmtDur(goalList100k), measured, yes(met))}
	if !met {
		g.why = fmt.Sprintf("**List**: %s for %s objects (%s objects/s, %s/s of values).", fmtDur(m), fmtInt(float64(size)),
			fmtInt(float64(size)/m.Seconds()), fmtBytes(float64(size*valueSize)/m.Seconds()))
	}
	return g, true
}
