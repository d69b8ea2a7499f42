package perf

import (
	"fmt"
	"strings"
	"time"
)

// The Service proxy's speed goals (issue 8, "Speed").
const (
	fullSyncGoal      = time.Second
	fullSyncGoalSize  = 10_000
	oneChangeGoal     = 50 * time.Millisecond
	clusterIPOverhead = 1.10 // cluster IP p50 / pod IP p50
)

// proxyperf's block of docs/perf.md.
const (
	proxyBegin = "<!-- proxyperf:begin -->"
	proxyEnd   = "<!-- proxyperf:end -->"
)

var proxyBlockMarkers = docBlock{proxyBegin, proxyEnd}

// storeperf keeps every block of allBlocks when it rewrites docs/perf.md; proxyperf's joins them here, beside
// its markers, so that the list in api_doc.go needs no edit.
func init() { allBlocks = append(allBlocks, proxyBlockMarkers) }

// vmNote marks numbers measured in the qemu VM.
const vmNote = "(in the VM, TCG software emulation: slower than real hardware)"

// WriteProxyReport replaces the proxyperf block of the markdown file at path with section (creating the file,
// or appending the block, when needed); the rest of the file is kept.
func WriteProxyReport(path, section string) error { return proxyBlockMarkers.write(path, section) }

// ProxyReport renders proxyperf's block of docs/perf.md (without markers).
func ProxyReport(res *ProxyResults) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## The Service proxy and cluster DNS (proxyperf)")
	p("")
	if res.Quick {
		p("> **Smoke run (--quick)**: toy sizes; these numbers only show that the harness works.")
		p("")
	}
	m := res.Machine
	p("Measured %s on %d × %s, %.0f GiB, %s, kernel %s, %s; commit %s. Load average when the run started: %s. Took %s. Reproduce: `%s`.",
		res.Started.Format("2006-01-02 15:04"), m.CPUs, m.CPUModel, m.MemoryGiB, m.OS, m.Kernel, m.Go, m.Commit,
		orDash(res.LoadAvg), res.Finished.Sub(res.Started).Round(time.Second), res.Command)
	p("")
	for _, e := range res.Errors {
		p("**Run error**: %s", oneLine(e))
		p("")
	}
	proxyGoals(p, res)
	proxySyncReport(p, res)
	proxyChangeReport(p, res)
	proxyConnectReport(p, res)
	proxyDNSReport(p, res.DNS)
	proxyMethod(p, res)
	return b.String()
}

// modeLabel is the mode's name, marked when measured in the VM.
func modeLabel(mode string, inVM bool) string {
	if inVM {
		return mode + " " + vmNote
	}
	return mode
}

// sizeNote says when a measurement's size is not the goal's.
func sizeNote(n int) string {
	if n == fullSyncGoalSize {
		return ""
	}
	return fmt.Sprintf(" (the goal is for %s)", fmtInt(fullSyncGoalSize))
}

func proxyGoals(p func(string, ...any), res *ProxyResults) {
	p("### Proxy goals")
	p("")
	p("| goal | measured median | measured / goal | met |")
	p("|---|---|---|---|")
	for _, mode := range []string{modeNFT, modeIPVS} {
		if s := largestSync(res.Sync, mode); s != nil && s.Err == "" && s.TotalMedian > 0 {
			p("| %s: %s Services × %d endpoints fully synced ≤ %s%s | %s (%s) | %s | %s |", modeLabel(mode, s.InVM),
				fmtInt(float64(s.Services)), s.Endpoints, fmtDur(fullSyncGoal), sizeNote(s.Services), fmtDur(s.TotalMedian),
				syncParts(s.BuildMedian, s.SyncMedian), ratio(float64(s.TotalMedian), float64(fullSyncGoal)), met(s.TotalMedian <= fullSyncGoal, s.InVM))
		}
		for _, c := range res.Change {
			if c.Mode != mode || c.Err != "" || c.TotalP50 == 0 {
				continue
			}
			p("| %s: one endpoint change at %s Services applied ≤ %s%s | %s (%s; p99 %s) | %s | %s |", modeLabel(mode, c.InVM),
				fmtInt(float64(c.Services)), fmtDur(oneChangeGoal), sizeNote(c.Services), fmtDur(c.TotalP50),
				syncParts(c.BuildP50, c.SyncP50), c.p99(c.TotalP99), ratio(float64(c.TotalP50), float64(oneChangeGoal)), met(c.TotalP50 <= oneChangeGoal, c.InVM))
		}
	}
	if res.IPVS != nil && res.IPVS.NotMeasured != "" {
		p("| ipvs: full sync and one endpoint change | not measured: %s | — | — |", oneLine(res.IPVS.NotMeasured))
	}
	for _, c := range res.Connect {
		if c.Err != "" || c.Ratio == 0 {
			continue
		}
		p("| cluster IP overhead ≤ %.0f%% (connect + one round trip, %s): cluster IP p50 / pod IP p50 ≤ %.2f | %.3f (%s vs %s) | %s | %s |",
			100*(clusterIPOverhead-1), othersLabel(c.OtherServices), clusterIPOverhead, c.Ratio, fmtDur(c.ClusterIP.P50),
			fmtDur(c.Direct.P50), ratio(c.Ratio, clusterIPOverhead), yes(c.Ratio <= clusterIPOverhead))
	}
	p("")
	p("Full sync and one change are what one pass of the agent's sync loop does (its wait of --proxy-min-sync-period")
	p("aside): the agent's proxy.Tracker giving the desired state (\"Build\": for a full sync it is fed every object")
	p("first; for a change it takes the slice's update and rebuilds that Service only), plus the backend's Sync; the")
	p("parts are in parentheses. \"nftables\" is the agent's layout, the Services spread over 8 tables; \"nftables, one")
	p("table\" is the same layout in a single table, measured beside it. The goals table shows medians; the tables")
	p("below have the spread.")
	p("")
}

func syncParts(build, sync time.Duration) string {
	if build == 0 {
		return "Sync alone"
	}
	return fmt.Sprintf("Build %s + Sync %s", fmtDur(build), fmtDur(sync))
}

func othersLabel(n int) string {
	if n == 0 {
		return "only that Service programmed"
	}
	return fmt.Sprintf("%s other Services programmed", fmtInt(float64(n)))
}

// largestSync is the mode's full sync of the most Services.
func largestSync(syncs []ProxySyncResult, mode string) *ProxySyncResult {
	var out *ProxySyncResult
	for i, s := range syncs {
		if s.Mode == mode && (out == nil || s.Services > out.Services) {
			out = &syncs[i]
		}
	}
	return out
}

func proxySyncReport(p func(string, ...any), res *ProxyResults) {
	p("### Full sync")
	p("")
	if len(res.Sync) == 0 && res.IPVS == nil {
		p("Not measured.")
		p("")
		return
	}
	p("| mode | Services × endpoints | virtual services | reps | Build median | Sync median (min – max) | Build + Sync median (min – max) | / %s goal | error |",
		fmtDur(fullSyncGoal))
	p("|---|---|---|---|---|---|---|---|---|")
	for _, s := range res.Sync {
		p("| %s | %s × %d | %s | %s | %s | %s (%s – %s) | **%s** (%s – %s) | %s | %s |", modeLabel(s.Mode, s.InVM),
			fmtInt(float64(s.Services)), s.Endpoints, orDash(fmtCount(s.VirtualServices)), samples(len(s.Sync), s.Iterations), durOrDash(s.BuildMedian),
			fmtDur(s.SyncMedian), fmtDur(s.SyncMin), fmtDur(s.SyncMax), fmtDur(s.TotalMedian), fmtDur(s.TotalMin),
			fmtDur(s.TotalMax), ratio(float64(s.TotalMedian), float64(fullSyncGoal)), oneLine(s.Err))
	}
	ipvsLine(p, res.IPVS)
	p("")
	if v := res.IPVS; v != nil && len(v.Lines) > 0 {
		p("The IPVS benchmarks' lines as the guest printed them (`%s`, %s with the boot):", v.Runner, v.Took.Round(time.Second))
		p("")
		p("```")
		for _, l := range v.Lines {
			p("%s", l)
		}
		p("```")
		p("")
	}
}

// ipvsLine says how the IPVS mode was measured, or why not.
func ipvsLine(p func(string, ...any), v *ProxyIPVSResult) {
	switch {
	case v == nil:
	case v.NotMeasured != "":
		p("| ipvs | not measured: %s | | | | | | | |", oneLine(v.NotMeasured))
	case v.Err != "":
		p("| ipvs %s | **error**: %s | | | | | | | |", vmNote, oneLine(v.Err))
	}
}

// samples is a count of samples, and for a benchmark's how many iterations their means are of.
func samples(n, iterations int) string {
	if iterations == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%s, %s", plural(n, "benchmark line"), plural(iterations, "iteration"))
}

// met is yes or NO, or for a number measured in the VM, that it does not judge the goal.
func met(ok, inVM bool) string {
	if inVM {
		return "not judged (emulated)"
	}
	return yes(ok)
}

func fmtCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmtInt(float64(n))
}

func durOrDash(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmtDur(d)
}

func proxyChangeReport(p func(string, ...any), res *ProxyResults) {
	p("### One endpoint change")
	p("")
	if len(res.Change) == 0 {
		p("Not measured.")
		p("")
		return
	}
	p("| mode | Services × endpoints | changes | Sync p50 | Sync p99 (max) | Build p50 | Build p99 | **Build + Sync p50** | Build + Sync p99 | / %s goal | error |",
		fmtDur(oneChangeGoal))
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range res.Change {
		p("| %s | %s × %d | %s | %s | %s (%s) | %s | %s | **%s** | %s | %s | %s |", modeLabel(c.Mode, c.InVM),
			fmtInt(float64(c.Services)), c.Endpoints, samples(len(c.Syncs), c.Iterations), fmtDur(c.SyncP50), c.p99(c.SyncP99), fmtDur(c.SyncMax),
			durOrDash(c.BuildP50), durOrDash(c.BuildP99), fmtDur(c.TotalP50), c.p99(c.TotalP99),
			ratio(float64(c.TotalP50), float64(oneChangeGoal)), oneLine(c.Err))
	}
	p("")
	if modes := changeModes(res.Change); modes[modeIPVS] {
		p("The IPVS rows come from Go benchmark lines: each sample is the mean of one benchmark run's iterations, so")
		p("their percentiles are of means, and Build is not in them (the benchmark syncs a ready proxy.State).")
		p("")
	}
}

// p99 is d, or a dash when it is the only sample of a benchmark (a mean: no percentile).
func (c ProxyChangeResult) p99(d time.Duration) string {
	if c.Iterations > 0 && len(c.Syncs) < 2 {
		return "—"
	}
	return fmtDur(d)
}

func changeModes(cs []ProxyChangeResult) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.Mode] = true
	}
	return out
}

func proxyConnectReport(p func(string, ...any), res *ProxyResults) {
	p("### Connection setup through a cluster IP (nftables)")
	p("")
	if len(res.Connect) == 0 {
		p("Not measured.")
		p("")
		return
	}
	p("| node's table | pairs | pod IP p50 | pod IP p99 | cluster IP p50 | cluster IP p99 | **cluster IP / pod IP (p50)** | p99 ratio | errors (pod IP / cluster IP) |")
	p("|---|---|---|---|---|---|---|---|---|")
	for _, c := range res.Connect {
		if c.Err != "" && c.Ratio == 0 {
			p("| %s | **error**: %s | | | | | | | |", othersLabel(c.OtherServices), oneLine(c.Err))
			continue
		}
		p("| %s | %s | %s | %s | %s | %s | **%.3f** | %s | %d / %d%s |", othersLabel(c.OtherServices), fmtInt(float64(c.Samples)),
			fmtDur(c.Direct.P50), fmtDur(c.Direct.P99), fmtDur(c.ClusterIP.P50), fmtDur(c.ClusterIP.P99), c.Ratio,
			ratio(float64(c.ClusterIP.P99), float64(c.Direct.P99)), c.Direct.Errors, c.ClusterIP.Errors,
			errSuffix(firstNonEmpty(c.Err, c.Direct.FirstErr, c.ClusterIP.FirstErr)))
	}
	p("")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func proxyDNSReport(p func(string, ...any), d *ProxyDNSResult) {
	p("### Cluster DNS queries/s")
	p("")
	if d == nil {
		p("Not measured.")
		p("")
		return
	}
	if d.Err != "" {
		p("**Error**: %s", oneLine(d.Err))
		p("")
	}
	p("One agents/dns Server on 127.0.0.1 answering from an Index of %s Services (%s of them headless, each with",
		fmtInt(float64(d.Services)), fmtInt(float64(d.Headless)))
	p("an EndpointSlice of %d ready endpoints; the others have one too). Each row is %s of UDP queries from", d.Endpoints, fmtDur(d.Duration))
	p("the given number of senders, each with one query outstanding. The load generator runs in the same process")
	p("and shares the machine's %d CPUs with the server: the CPU column is both together.", d.CPUs)
	p("")
	p("| query | senders | queries/s | p50 | p99 | harness CPU (cores) | errors |")
	p("|---|---|---|---|---|---|---|")
	for _, r := range d.Runs {
		p("| %s | %d | **%s** | %s | %s | %.2f | %d%s |", r.Kind, r.Senders, fmtInt(r.QPS), fmtDur(r.P50), fmtDur(r.P99),
			r.CPU, r.Errors, errSuffix(r.FirstErr))
	}
	p("")
}

func proxyMethod(p func(string, ...any), res *ProxyResults) {
	sh := res.Shape
	p("### Method and caveats")
	p("")
	p("Everything runs in the harness process (root: it makes network namespaces and programs nftables through")
	p("`agents/proxy/nft`, the backend the agent runs). The synthetic cluster: Services of one TCP port (80 → 8080)")
	p("spread over %d namespaces, each with one EndpointSlice of %d ready endpoints (addresses shared round robin", proxyNamespace, sh.Endpoints)
	p("among %s fake pod IPs); the desired state is the agent's `proxy.Tracker` fed those objects, for one node.", fmtInt(fakeEndpoints))
	p("")
	p("- **Full sync**: per size and layout, %d repetitions, each in a fresh network namespace with a new backend: a", sh.SyncReps)
	p("  Tracker fed every object and asked for the state, then the backend's first `Sync`, which writes each table")
	p("  whole in one netlink transaction (the 8 tables in parallel, two at a time on this machine). The tables are")
	p("  deleted untimed before the namespace is released. A garbage collection runs before each repetition;")
	p("  collections during it are counted.")
	p("- **One endpoint change**: %s Services programmed, then %d times (after one untimed change) the first endpoint", fmtInt(float64(sh.ChangeServices)), sh.ChangeReps)
	p("  of one Service's EndpointSlice (a different Service each time) is replaced by a new address, and the")
	p("  Tracker's update and state plus the backend's `Sync` of the result are timed, as one pass of the agent's sync")
	p("  loop does. Sync finds the changed virtual service, replaces its element in the endpoints map (in its table")
	p("  only, with 8 tables) and drops the previous change's drained endpoint from its record.")
	p("- **IPVS**: this machine's kernel has no IPVS; its numbers, when present, come from the backend's own")
	p("  benchmarks run in the qemu VM of `agents/proxy/ipvs/vmtest` (Debian's kernel, TCG software emulation, so")
	p("  slower than hardware and not comparable with the nftables rows except in shape).")
	p("- **Connection setup**: three namespaces, a node and two pods, each pod on a bridge of the node by a veth")
	p("  (server 10.244.0.2 on wh0, client 10.244.1.2 on wh1, so the node routes between them), the node's table")
	p("  programmed with the Service (cluster IP %v:80 → the server pod's :8080). From the client pod, %s pairs", serviceIP(0), fmtInt(float64(sh.ConnectSamples)))
	p("  of new TCP connections (after %d untimed pairs), each pair one to the pod IP and one to the cluster IP in", connWarmup)
	p("  a random order, each timed from the connect call until the 5-byte answer to a 5-byte request is read; the")
	p("  client closes first. Both targets cross the same veths, bridges and the node's routing and conntrack: the")
	p("  difference is the table's DNAT (the verdict map lookup, the shared chain's endpoints map lookup) and the NATed conntrack")
	p("  entry. Then again with %s other Services in the table (the verdict map's size).", fmtInt(float64(sh.ConnectOthers)))
	p("- **DNS**: senders pre-pack their queries with miekg/dns and check each answer's ID, rcode and answer count")
	p("  from its header; latency is per query from send to that answer. The server logs nothing, as in production.")
	p("")
	p("Timing goals are reported, never asserted. Numbers are comparable within one run only; this is a 2-core")
	p("machine where the harness, its load generators and the kernel's work share the same cores.")
}
