package perf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The dashboard's speed goals (issue 7, docs/design/dashboard.md "Speed"), and the bound the live hub's
// coalescing puts on fragments per region and second.
const (
	writeToDOMGoal = 250 * time.Millisecond
	pageGoal       = 100 * time.Millisecond
	framesBound    = float64(time.Second / coalesceInterval)
)

// dashperf's block of docs/perf.md, kept by storeperf when it rewrites the file as the other blocks are.
const (
	dashBegin = "<!-- dashperf:begin -->"
	dashEnd   = "<!-- dashperf:end -->"
)

var dashBlockMarkers = docBlock{dashBegin, dashEnd}

// WriteDashReport replaces the dashperf block of the markdown file at path with section (creating the file, or
// appending the block, when needed); the rest of the file is kept.
func WriteDashReport(path, section string) error { return dashBlockMarkers.write(path, section) }

// DashReport renders dashperf's block of docs/perf.md (without markers).
func DashReport(res *DashResults) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## The dashboard (dashperf)")
	p("")
	if res.Quick {
		p("> **Smoke run (--quick)**: toy sizes; these numbers only show that the harness works.")
		p("")
	}
	m := res.Machine
	p("Measured %s on %d × %s, %.0f GiB, %s, kernel %s, %s; %s. Load average when the run started: %s. Reproduce: `%s`.",
		res.Started.Format("2006-01-02 15:04"), m.CPUs, m.CPUModel, m.MemoryGiB, m.OS, m.Kernel, m.Go, res.Version,
		orDash(res.LoadAvg), res.Command)
	p("")
	for _, e := range res.Errors {
		p("**Run error**: %s", oneLine(e))
		p("")
	}
	dashGoals(p, res)
	dashLatencyReport(p, res.Latency, res.Shape)
	dashPageReport(p, res.Page, res.Shape)
	dashTabsReport(p, res.Tabs)
	dashHowToRead(p)
	dashMethod(p, res.Shape)
	return b.String()
}

// ordinal is n as "1st", "2nd", "30th".
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// pct is n/of as a percentage.
func pct(n, of int) string {
	if of <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(of))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func dashGoals(p func(string, ...any), res *DashResults) {
	p("### Dashboard goals")
	p("")
	p("| goal | measured | measured / goal | met |")
	p("|---|---|---|---|")
	if l := res.Latency; l != nil && l.Seen > 0 {
		p("| write-to-DOM p99 ≤ %s | %s | %s | %s |", fmtDur(writeToDOMGoal), fmtDur(l.P99),
			ratio(float64(l.P99), float64(writeToDOMGoal)), yes(l.P99 <= writeToDOMGoal))
	}
	if pg := res.Page; pg != nil {
		for _, v := range pg.Variants {
			if v.Err != "" || len(v.Durations) == 0 {
				continue
			}
			p("| pods page at %s pods, %s: p99 ≤ %s | %s (median %s) | %s | %s |", fmtInt(float64(pg.Pods)), v.label(),
				fmtDur(pageGoal), fmtDur(v.P99), fmtDur(v.Median), ratio(float64(v.P99), float64(pageGoal)), yes(v.P99 <= pageGoal))
		}
	}
	if t := res.Tabs; t != nil && t.LatencySamples > 0 {
		p("| %d tabs, %d changes/s: change → fragment p99 ≤ %s (the write-to-DOM goal, at every tab) | %s (median %s; %s of %s creates seen) | %s | %s |",
			t.Connected, t.Rate, fmtDur(writeToDOMGoal), fmtDur(t.LatencyP99), fmtDur(t.LatencyP50), pct(t.LatencySamples, t.LatencyExpected),
			fmtInt(float64(t.LatencyExpected)), ratio(float64(t.LatencyP99), float64(writeToDOMGoal)), yes(t.LatencyP99 <= writeToDOMGoal))
	}
	if t := res.Tabs; t != nil && t.FramesMax > 0 {
		p("| fragments per tab and second ≤ %.0f (the coalescing bound), %d tabs, %d changes/s | %.1f (busiest tab %.1f) | %s | %s |",
			framesBound, t.Connected, t.Rate, t.FramesMedian, t.FramesMax, ratio(t.FramesMax, framesBound), yes(t.FramesMax <= framesBound+0.5))
	}
	p("")
}

// label is the variant's description (the key when the results predate it).
func (v DashPageVariant) label() string {
	if v.Label != "" {
		return v.Label
	}
	return v.Key
}

func dashLatencyReport(p func(string, ...any), l *DashLatencyResult, sh DashShape) {
	p("### Write-to-DOM latency (headless Chromium, %d writes)", sh.LatencySamples)
	p("")
	if l == nil {
		p("Not measured.")
		p("")
		return
	}
	if l.Err != "" {
		p("**Error**: %s", oneLine(l.Err))
		p("")
	}
	p("%s; page visibility `%s`; page clock − harness clock %s (± %s, drift over the run %s), corrected for.",
		orDash(l.Browser), orDash(l.Visibility), fmtSigned(l.ClockOffset), fmtDur(l.ClockRTT/2), fmtSigned(l.ClockDrift))
	p("")
	p("| from → to | p50 | p99 |")
	p("|---|---|---|")
	p("| **create call's start → row in the DOM** | **%s** | **%s** (max %s) |", fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max))
	p("| the create call (start → response) | %s | %s |", fmtDur(l.CreateP50), fmtDur(l.CreateP99))
	p("| create call's start → fragment's message event in the page | %s | %s |", fmtDur(l.FrameP50), fmtDur(l.FrameP99))
	p("| message event → row in the DOM (parse, swap, observer) | %s | %s |", fmtDur(l.DOMP50), fmtDur(l.DOMP99))
	p("")
	p("%d of %d rows seen. %d of them arrived less than %s after the page's previous fragment (the delete of the",
		l.Seen, l.Samples, l.Coalesced, fmtDur(coalesceInterval+10*time.Millisecond))
	p("previous sample's pod): their render waited for the coalescing interval.")
	p("")
}

// fmtSigned is fmtDur with a sign, for offsets.
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return fmtDur(d)
}

func dashPageReport(p func(string, ...any), pg *DashPageResult, sh DashShape) {
	p("### The pods page at %s pods", fmtInt(float64(sh.PagePods)))
	p("")
	if pg == nil {
		p("Not measured.")
		p("")
		return
	}
	if pg.Err != "" {
		p("**Error**: %s", oneLine(pg.Err))
		p("")
	}
	p("%s pods created in %s (%d calls at a time); each page fetched %d times after a warm-up, one at a time over",
		fmtInt(float64(pg.Pods)), fmtDur(pg.Load), sh.CreateWorkers, sh.PageReps)
	p("one %s keep-alive connection with the session cookie. Times are the client's: request start → body read",
		orDash(pg.Proto))
	p("(so they include loopback transfer and TLS), and → first byte. Server RSS afterwards: %s.", fmtBytes(float64(pg.ServerRSS)))
	p("")
	p("| page | rows | HTML | median | p99 | max | first byte median | first byte p99 | server CPU | other CPU | error |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, v := range pg.Variants {
		p("| %s (`%s`) | %d | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |", v.label(), v.Query, v.Rows, fmtBytes(float64(v.Bytes)),
			fmtDur(v.Median), fmtDur(v.P99), fmtDur(v.Max), fmtDur(v.TTFBMedian), fmtDur(v.TTFBP99), v.CPU.Server, v.CPU.Other, oneLine(v.Err))
	}
	p("")
	p("The p99 is the nearest rank: with %d requests, the %s fastest. Other CPU is everything on the machine", sh.PageReps,
		ordinal(int(math.Ceil(0.99*float64(sh.PageReps)))))
	p("but the server, PostgreSQL and the harness while the variant was fetched: the server had that much less of the")
	p("two cores.")
	p("")
}

func dashTabsReport(p func(string, ...any), t *DashTabsResult) {
	if t == nil {
		p("### Connected tabs")
		p("")
		p("Not measured.")
		p("")
		return
	}
	p("### %d tabs, %d pod changes/s", t.Tabs, t.Rate)
	p("")
	if t.Err != "" {
		p("**Error**: %s", oneLine(t.Err))
		p("")
	}
	per := func(before, after int64) string {
		if t.Connected == 0 {
			return "—"
		}
		return fmtBytes(float64(after-before) / float64(t.Connected))
	}
	p("Memory of the server, %d tabs subscribed to the pods list of a namespace of %d pods (%d connected in %s):",
		t.Tabs, t.Pods, t.Connected, fmtDur(t.ConnectTook))
	p("")
	p("| | before | after | per tab |")
	p("|---|---|---|---|")
	p("| RSS | %s | %s | **%s** |", fmtBytes(float64(t.RSSBefore)), fmtBytes(float64(t.RSSAfter)), per(t.RSSBefore, t.RSSAfter))
	p("| Go heap in use after a collection | %s | %s | %s |", fmtBytes(float64(t.HeapBefore)), fmtBytes(float64(t.HeapAfter)),
		per(t.HeapBefore, t.HeapAfter))
	goroutines := "—"
	if t.Connected > 0 {
		goroutines = fmt.Sprintf("%.1f", float64(t.GoroutinesAfter-t.GoroutinesBefore)/float64(t.Connected))
	}
	p("| goroutines | %d | %d | %s |", t.GoroutinesBefore, t.GoroutinesAfter, goroutines)
	p("")
	if t.Creates+t.Deletes == 0 {
		return
	}
	done := float64(t.Creates+t.Deletes) / t.Duration.Seconds()
	p("Churn for %s: %d creates and %d deletes (%.0f changes/s of %d asked; %d skipped, %d failed%s), every tab reading.",
		fmtDur(t.Duration), t.Creates, t.Deletes, done, t.Rate, t.Skipped, t.Failed, errSuffix(t.FirstErr))
	p("")
	p("| server CPU | PostgreSQL CPU | harness CPU (%d clients' reads) | other CPU | server RSS median (max) |", t.Tabs)
	p("|---|---|---|---|---|")
	p("| %.2f | %.2f | %.2f | %.2f | %s (%s) |", t.CPU.Server, t.CPU.Postgres, t.CPU.Harness, t.CPU.Other,
		fmtBytes(float64(t.RSSMedian)), fmtBytes(float64(t.RSSMax)))
	p("")
	p("| per tab and second: fragments, median (busiest) | payload | on the wire | change → fragment p50 | p99 | max | samples |")
	p("|---|---|---|---|---|---|---|")
	p("| %.1f (%.1f) | %s | %s | %s | %s | %s | %s of %s |", t.FramesMedian, t.FramesMax, fmtBytes(t.PayloadMedian),
		fmtBytes(t.WireMedian), fmtDur(t.LatencyP50), fmtDur(t.LatencyP99), fmtDur(t.LatencyMax),
		fmtInt(float64(t.LatencySamples)), fmtInt(float64(t.LatencyExpected)))
	p("")
	if t.WatchSamples > 0 {
		p("One API watch on the namespace during the churn (served by the watch cache the regions render from): create")
		p("start → ADDED p50 %s, p99 %s (%s of %s creates seen).", fmtDur(t.WatchP50), fmtDur(t.WatchP99),
			fmtInt(float64(t.WatchSamples)), fmtInt(float64(t.Creates)))
		p("")
	}
	if t.LatencySamples < t.LatencyExpected {
		p("The tabs and the watch stop 2 s after the churn: a create not seen by then was later still, or its pod came and")
		p("went between two renders of a tab, so when many are missing the percentiles above understate the delay.")
		p("")
	}
	if t.TabErrors > 0 {
		p("**%d tabs ended early**: %s", t.TabErrors, oneLine(t.FirstTabErr))
		p("")
	}
}

func errSuffix(err string) string {
	if err == "" {
		return ""
	}
	return ": " + oneLine(err)
}

func dashHowToRead(p func(string, ...any)) {
	p("### How to read the dashboard numbers")
	p("")
	p("Write-to-DOM latency is what a user watching the pods page waits for a change made elsewhere: the API")
	p("write (its commit to PostgreSQL), the watch cache's event, the live hub's render of the region (at most one")
	p("per 100 ms per region, so a change right after a render waits up to 100 ms), the websocket, and the browser's")
	p("swap; the rows of the table say how it splits. The pods page times are a Go client's, with loopback HTTPS")
	p("included; the first-byte column is closer to the server's own time, since the list is filtered, sorted and")
	p("paged before the first byte is written. Memory per tab is the server's growth divided by the tabs, right")
	p("after they connected (RSS is what the machine pays; the Go heap after a collection is what the tabs hold).")
	p("Under churn every tab's region renders at most 10 times a second, so fragments per tab and second at or")
	p("just under 10 mean coalescing works and the server kept up; fewer with a high change → fragment latency")
	p("means it fell behind. The API watch line tells where: when an ordinary watch of the namespace is as late as")
	p("the tabs, the watch cache itself fell behind (every region renders the cache's current state), not the")
	p("renders. On this 2-core machine the clients run in the harness and compete with the server for the same")
	p("cores (the harness CPU column), as does anything else running (the other CPU column), so the churn numbers")
	p("are those of a machine with less than two cores to give the server.")
	p("")
}

func dashMethod(p func(string, ...any), sh DashShape) {
	p("### Method")
	p("")
	p("One `wheelhouse server` (built from the work tree, `--log-level warn`) on a private PostgreSQL, signed in as")
	p("its bootstrap admin. Every pod the harness creates is apiperf's realistic pod with `app=web-<i mod 10>` and")
	p("`schedulerName: %s`: no scheduler takes it, so it stays Pending without scheduling attempts, events or", dashScheduler)
	p("status writes, and only the dashboard's work is measured. **Write-to-DOM**: headless Chromium (the flags of")
	p("`web/browsertest`) signs in with the form and opens `/ui/c/default/r/pods?ns=%s&size=50` (%d pods); a script", nsLatency, sh.LatencyPods)
	p("installed before the page's own records when each row is first added to the DOM (a MutationObserver) and when")
	p("each live fragment arrives (a listener on the page's WebSocket), in `performance.timeOrigin + performance.now()`,")
	p("whose offset to the harness's clock is measured over DevTools (fastest of 20 round trips). %d times, after a", sh.LatencySamples)
	p("random pause of %s–%s, a pod whose name sorts first is created through client-go and timed from just", fmtDur(sh.GapMin), fmtDur(sh.GapMax))
	p("before its create call until its row is in the DOM; then the previous one is deleted and its row awaited gone.")
	p("**Pods page**: %s pods created in namespace `%s`; each page fetched %d times (every pod is Pending, so the",
		fmtInt(float64(sh.PagePods)), nsBig, sh.PageReps)
	p("Status sort compares equal cells: its cost is computing every pod's cells). **Tabs**: %d websocket clients", sh.Tabs)
	p("(gorilla/websocket, the session cookie and the server's Origin, permessage-deflate as browsers offer) subscribe")
	p("to the list region of namespace `%s` (%d pods) as the pods page does; the server's RSS (median of three", nsChurn, sh.ChurnPods)
	p("one-second samples) and its Go heap after a forced collection and goroutines (its profiler on loopback) are")
	p("read before they connect and after each had its first fragment. Then for %s, %d changes/s on an open-loop", fmtDur(sh.ChurnDuration), sh.ChurnRate)
	p("schedule alternately create a pod whose name sorts first and delete the oldest of those (%d live at a time, at", churnBacklog)
	p("most %d calls in flight); each tab counts its fragments and bytes and notes when a fragment first names each new", churnInFlight)
	p("pod (change → fragment, from the create call's start). CPU is cores averaged over the window (server,")
	p("PostgreSQL with its backends, the harness, everything else). Timing goals are reported, never asserted.")
}
