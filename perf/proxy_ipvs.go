package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The IPVS backend is measured by its own benchmarks, run inside the qemu VM of agents/proxy/ipvs/vmtest (this
// machine's kernel has no IPVS): the harness runs `go test -bench ^BenchmarkVM$` in that package, which boots the
// VM and runs the package's kernel benchmarks there (BenchmarkFullSync/services=N, BenchmarkOneEndpointChange/
// services=N, as the nft package names them) with the run's -test.benchtime and -test.count, echoing the guest's
// lines. A time-based -benchtime (IPVSBenchtime) boots the VM once: its first iteration takes longer than that;
// inside, each benchmark runs for about that long, so each line is a mean over its iterations. Without such a
// benchmark in the package, the scenario reports why it measured nothing.
const (
	ipvsPackage   = "agents/proxy/ipvs"
	ipvsVMBench   = "BenchmarkVM"
	ipvsFullSync  = "FullSync"
	ipvsOneChange = "OneEndpointChange"
)

// ipvs runs the IPVS backend's benchmarks in the VM, adding what they report to the run's sync and change
// results (mode ipvs, in the VM).
func (r *proxyRunner) ipvs(ctx context.Context) *ProxyIPVSResult {
	dir := filepath.Join(r.repo, ipvsPackage)
	if reason := ipvsMissing(dir); reason != "" {
		r.log.Info("ipvs not measured", "reason", reason)
		return &ProxyIPVSResult{NotMeasured: reason}
	}
	args := []string{"test", "-run", "^$", "-bench", "^" + ipvsVMBench + "$", "-benchtime", r.cfg.IPVSBenchtime.String(), "-count", "1",
		"-timeout", r.cfg.IPVSTimeout.String(), "."}
	out := &ProxyIPVSResult{Runner: "go " + strings.Join(args, " ") + " (in " + ipvsPackage + ")"}
	r.log.Info("running the IPVS benchmarks in the VM", "runner", out.Runner)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.IPVSTimeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	t0 := time.Now()
	b, err := cmd.CombinedOutput()
	out.Took = time.Since(t0)
	sync, change := parseIPVSBench(b, r.cfg.Endpoints)
	out.Lines = benchLines(b)
	r.res.Sync = append(r.res.Sync, sync...)
	if change != nil {
		r.res.Change = append(r.res.Change, *change)
	}
	switch {
	case err != nil:
		out.Err = fmt.Sprintf("%v: %s", err, oneLine(lastLines(b, 5)))
	case len(sync) == 0 && change == nil:
		out.Err = "the benchmark printed no FullSync or OneEndpointChange lines: " + oneLine(lastLines(b, 5))
	}
	return out
}

// ipvsMissing is why the IPVS backend cannot be measured yet ("" when it can).
func ipvsMissing(dir string) string {
	if _, err := os.Stat(dir); err != nil {
		return ipvsPackage + " does not exist yet"
	}
	tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("func "+ipvsVMBench+"(")) {
			return ""
		}
	}
	return ipvsPackage + " has no " + ipvsVMBench + " (a benchmark that runs its kernel benchmarks in the qemu VM) yet"
}

// benchLine is a Go benchmark result line: the name (without the -GOMAXPROCS suffix), iterations, ns/op. It may
// be prefixed (a test log's indentation and file:line).
var benchLine = regexp.MustCompile(`(Benchmark[\w/=.,-]*?)(?:-\d+)?\s+(\d+)\s+(\d+(?:\.\d+)?) ns/op`)

var servicesParam = regexp.MustCompile(`services=(\d+)`)

// parseIPVSBench reads the guest's FullSync and OneEndpointChange lines: each line is one sample (the mean of
// its iterations). The VM's own benchmark line is not a sample, nor are the other benchmarks' lines.
func parseIPVSBench(out []byte, endpoints int) ([]ProxySyncResult, *ProxyChangeResult) {
	bySize := map[int]*ProxySyncResult{}
	var sizes []int
	var change *ProxyChangeResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(m[1], ipvsVMBench) {
			continue
		}
		iters, err1 := strconv.Atoi(m[2])
		ns, err2 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		d := time.Duration(ns)
		n := 0
		if p := servicesParam.FindStringSubmatch(m[1]); p != nil {
			n, _ = strconv.Atoi(p[1])
		}
		switch {
		case strings.Contains(m[1], ipvsFullSync) && n > 0:
			s := bySize[n]
			if s == nil {
				s = &ProxySyncResult{Mode: modeIPVS, InVM: true, Services: n, Endpoints: endpoints}
				bySize[n] = s
				sizes = append(sizes, n)
			}
			s.Sync, s.Iterations = append(s.Sync, d), s.Iterations+iters
		case strings.Contains(m[1], ipvsOneChange):
			if change == nil {
				change = &ProxyChangeResult{Mode: modeIPVS, InVM: true, Services: n, Endpoints: endpoints}
			}
			change.Syncs, change.Iterations = append(change.Syncs, d), change.Iterations+iters
		}
	}
	var syncs []ProxySyncResult
	for _, n := range sizes {
		s := bySize[n]
		s.Reps = len(s.Sync)
		s.summarize()
		syncs = append(syncs, *s)
	}
	if change != nil {
		change.Reps = len(change.Syncs)
		change.summarize()
		if change.Services == 0 {
			change.Services = 10_000 // the nft package's benchmark's size, which the IPVS one is expected to share
		}
	}
	return syncs, change
}

// benchLines are the benchmark result lines of out (but the VM's own), trimmed of any prefix.
func benchLines(out []byte) []string {
	var lines []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if loc := benchLine.FindStringIndex(l); loc != nil && !strings.HasPrefix(l[loc[0]:], ipvsVMBench) {
			lines = append(lines, strings.TrimSpace(l[loc[0]:]))
		}
	}
	return lines
}
