package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The authorization numbers of the tenancy issue: decision latency at 1,000 teams × 10 clusters × 20 bindings
// and the time until an RBAC change is enforced by a second server process. They come from the main module's
// Go benchmarks (rbac.BenchmarkAuthorize, rbac.BenchmarkSnapshotBuild, kubeapi.BenchmarkRBACPropagation: the
// latter with two stores, watch hubs and caches on one PostgreSQL), run by this harness so the report keeps them
// next to the API numbers of the same machine and run.

// Goals of the issue.
const (
	decisionGoalP99    = 50 * time.Microsecond
	propagationGoalP99 = 100 * time.Millisecond
)

// RBACBench is the outcome of the authorization benchmarks: medians over their -count runs.
type RBACBench struct {
	Runs int
	// DecisionMemo and DecisionCasbin are p50 / p99 of one decision with the role enforcers' memo warm, and
	// with every decision evaluated by Casbin.
	DecisionMemo, DecisionCasbin Percentiles
	// Build is the time to rebuild one cluster's policy after an RBAC change.
	Build time.Duration
	// Propagation is from a binding's write in one process to its enforcement in another.
	Propagation Percentiles
	Err         string `json:",omitempty"`
}

// Percentiles are a p50 and a p99.
type Percentiles struct{ P50, P99 time.Duration }

// runRBACBenchmarks runs the benchmarks in the repository (count times each) and takes the medians.
func runRBACBenchmarks(ctx context.Context, repo string, count int, log *slog.Logger) *RBACBench {
	res := &RBACBench{Runs: count}
	log.Info("running the authorization benchmarks", "count", count)
	decisions, err := goBench(ctx, repo, count, "./rbac/", "BenchmarkAuthorize|BenchmarkSnapshotBuild", "100000x", false)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.DecisionMemo = percentiles(decisions["BenchmarkAuthorize/memo"], "p50-µs", "p99-µs", time.Microsecond)
	res.DecisionCasbin = percentiles(decisions["BenchmarkAuthorize/nomemo"], "p50-µs", "p99-µs", time.Microsecond)
	res.Build = time.Duration(median(decisions["BenchmarkSnapshotBuild"]["ns/op"]))
	prop, err := goBench(ctx, repo, count, "./server/kubeapi/", "BenchmarkRBACPropagation", "200x", true)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.Propagation = percentiles(prop["BenchmarkRBACPropagation"], "p50-ms", "p99-ms", time.Millisecond)
	return res
}

// goBench runs `go test -bench` and returns, per benchmark (without the -N suffix), every value of every metric.
// withPostgres runs it under cmd/testenv (a throwaway PostgreSQL).
func goBench(ctx context.Context, repo string, count int, pkg, pattern, benchtime string, withPostgres bool) (map[string]map[string][]float64, error) {
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-count", strconv.Itoa(count), pkg}
	name, argv := "go", args
	if withPostgres {
		argv = append([]string{"run", "./cmd/testenv", "--", "go"}, args...)
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = repo
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(argv, " "), err, tail(out.String(), 2000))
	}
	res := map[string]map[string][]float64{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		bench := f[0]
		if i := strings.LastIndexByte(bench, '-'); i > 0 {
			bench = bench[:i]
		}
		if res[bench] == nil {
			res[bench] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 { // after the iteration count: value, unit pairs
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				res[bench][f[i+1]] = append(res[bench][f[i+1]], v)
			}
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("go %s printed no benchmark results:\n%s", strings.Join(argv, " "), tail(out.String(), 2000))
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func percentiles(metrics map[string][]float64, p50, p99 string, unit time.Duration) Percentiles {
	return Percentiles{P50: time.Duration(median(metrics[p50]) * float64(unit)), P99: time.Duration(median(metrics[p99]) * float64(unit))}
}

// rbac renders the authorization section.
func (rp apiReporter) rbac() {
	b := rp.res.RBAC
	if b == nil {
		return
	}
	rp.p("## Authorization (RBAC on Casbin)")
	rp.p("")
	rp.p("Go benchmarks of the main module, run by this harness right after the API scenarios, %d times each; medians. "+
		"Decisions: 10,000 clusters (1,000 teams × 10) with the built-in roles and bindings plus 20 bindings of their users each, "+
		"4,096 different requests (users, team groups, verbs, resources, subresources, namespaces) in turn "+
		"(`rbac.BenchmarkAuthorize`). \"Memo warm\" is the steady state: each role's enforcer remembers its answers (its rules never "+
		"change, so they cannot go stale); \"Casbin\" evaluates every decision. Propagation: a RoleBinding written through "+
		"one process (its own store, watch hub and cache) until a second process on the same database allows the request "+
		"(`kubeapi.BenchmarkRBACPropagation`, polling every 100 µs).", b.Runs)
	rp.p("")
	if b.Err != "" {
		rp.p("The benchmarks failed: `%s`", strings.ReplaceAll(tail(b.Err, 400), "\n", " "))
		rp.p("")
		return
	}
	rp.p("| measure | wanted | p50 | p99 | p99 ÷ goal | met |")
	rp.p("| --- | --- | --- | --- | --- | --- |")
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	rp.p("| decision, memo warm | p99 ≤ %s | %s | %s | %s | %s |", fmtDur(decisionGoalP99), fmtMicros(b.DecisionMemo.P50),
		fmtMicros(b.DecisionMemo.P99), fineRatio(float64(b.DecisionMemo.P99), float64(decisionGoalP99)), met(b.DecisionMemo.P99 <= decisionGoalP99))
	rp.p("| decision, every one by Casbin | (shown for comparison) | %s | %s | %s | — |", fmtMicros(b.DecisionCasbin.P50),
		fmtMicros(b.DecisionCasbin.P99), fineRatio(float64(b.DecisionCasbin.P99), float64(decisionGoalP99)))
	rp.p("| RBAC change enforced by a second process | p99 ≤ %s | %s | %s | %s | %s |", fmtDur(propagationGoalP99),
		fmtDur(b.Propagation.P50), fmtDur(b.Propagation.P99), fineRatio(float64(b.Propagation.P99), float64(propagationGoalP99)),
		met(b.Propagation.P99 <= propagationGoalP99))
	rp.p("| rebuilding one cluster's policy after a change | — | %s (mean) | | | |", fmtDur(b.Build))
	rp.p("")
	rp.p("Besides the propagation measured here, every request carries the store revision read with its token and the " +
		"authorizer first brings its RBAC state to that revision, so a change committed before a request began applies to it " +
		"on every process (see docs/design/tenancy.md).")
	rp.p("")
}

// fmtMicros prints a sub-millisecond duration in µs with one decimal.
func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
