package perf

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSchedQuick runs the whole scheduler harness at toy scale (50 nodes, 100 pods, a 100-replica Deployment on
// 10 nodes, one repetition): every case with the algorithm alone and end to end on a private PostgreSQL, which
// the harness starts itself. It checks that the results are well-formed and the report renders into its
// block, not how fast anything is.
func TestSchedQuick(t *testing.T) {
	out := filepath.Join(t.TempDir(), "perf.md")
	const before = "# Store report\n\nkept as is\n\n" + apiBegin + "\n# API\n" + apiEnd + "\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonOut := filepath.Join(t.TempDir(), "sched.json")
	cfg := QuickSchedConfig(SchedConfig{Out: out, JSONOut: jsonOut, Command: "go test ./perf"})
	res, err := RunSched(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunSched: %v", err)
	}
	if got, want := len(res.Algo), len(AllSchedCases); got != want {
		t.Fatalf("%d algorithm runs, want %d", got, want)
	}
	for _, r := range res.Algo {
		checkSchedRun(t, "algorithm", r)
		if r.HeapLive <= 0 || r.Cycles < r.Pods {
			t.Errorf("algorithm %s: live heap %d, %d cycles; want a heap and a cycle per pod at least", r.Case, r.HeapLive, r.Cycles)
		}
		if r.Case == SchedPreemption && (r.Preemptions != r.Pods || r.Victims < r.Preemptions) {
			t.Errorf("algorithm preemption: %d preemptions, %d victims for %d pods; want every pod to preempt", r.Preemptions, r.Victims, r.Pods)
		}
	}
	if got, want := len(res.E2E), len(AllSchedCases); got != want {
		t.Fatalf("%d end-to-end runs, want %d", got, want)
	}
	for _, r := range res.E2E {
		checkSchedRun(t, "end to end", r)
		if r.Confirmed != r.Pods || r.Setup <= 0 || r.FirstBind <= 0 || r.FirstBind > r.Elapsed {
			t.Errorf("end to end %s: %d of %d confirmed bound, setup %v, first binding %v of %v", r.Case, r.Confirmed,
				r.Pods, r.Setup, r.FirstBind, r.Elapsed)
		}
	}
	if len(res.Deploy) != 1 {
		t.Fatalf("%d rollouts, want 1", len(res.Deploy))
	}
	if d := res.Deploy[0]; !d.ok() || d.Created != d.Replicas || d.AllCreated <= 0 || d.AllCreated > d.AllBound ||
		d.BindP50 > d.BindP99 {
		t.Errorf("rollout: %+v; want every pod created, then bound", d)
	}
	checkSchedDoc(t, out, before)

	// The JSON renders the same report again.
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var back SchedResults
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := SchedReport(&back), SchedReport(res); got != want {
		t.Errorf("report from JSON differs from the run's:\n%s\n---\n%s", got, want)
	}
}

func checkSchedRun(t *testing.T, kind string, r SchedRun) {
	t.Helper()
	if !r.ok() || r.Elapsed <= 0 || r.Rate() <= 0 {
		t.Errorf("%s %s: %d of %d placed in %v (%s); want every pod placed", kind, r.Case, r.Scheduled, r.Pods, r.Elapsed, r.Err)
	}
}

func checkSchedDoc(t *testing.T, path, before string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc), before) {
		t.Errorf("the report changed the file outside its section:\n%.300s", doc)
	}
	for _, want := range []string{schedBegin, "# Scheduler performance", "## Scheduler goals and anchors",
		"## Scheduling algorithm alone", "## Scheduling end to end", "## `kubectl apply` of a 100-replica Deployment",
		"## Scheduler memory", "## Every run (scheduler)", "## Method and caveats (scheduler)", schedEnd} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestReportsKeepEachOthersBlocks rewrites docs/perf.md with each harness in turn: none may lose another's part.
func TestReportsKeepEachOthersBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.md")
	api := apiBegin + "\n# API\n" + apiEnd + "\n"
	sched := schedBegin + "\n# Sched\n" + schedEnd + "\n"
	store := func(title string) string { return storeBegin + "\n# " + title + "\n" + storeEnd + "\n" }
	steps := []struct {
		name  string
		write func() error
		want  string
	}{
		{"store first", func() error { return WriteStoreReport(path, "# Store\n") }, store("Store")},
		{"sched appends", func() error { return WriteSchedReport(path, "# Sched\n") }, store("Store") + "\n" + sched},
		{"api appends after sched", func() error { return WriteAPIReport(path, "# API\n") },
			store("Store") + "\n" + sched + "\n" + api},
		{"store replaces its own", func() error { return WriteStoreReport(path, "# Store v2\n") },
			store("Store v2") + "\n" + sched + "\n" + api},
		{"sched replaces its own", func() error { return WriteSchedReport(path, "# Sched v2\n") },
			store("Store v2") + "\n" + strings.Replace(sched, "Sched", "Sched v2", 1) + "\n" + api},
		{"api replaces its own", func() error { return WriteAPIReport(path, "# API v2\n") },
			store("Store v2") + "\n" + strings.Replace(sched, "Sched", "Sched v2", 1) + "\n" + strings.Replace(api, "API", "API v2", 1)},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != s.want {
			t.Fatalf("%s: got\n%q\nwant\n%q", s.name, got, s.want)
		}
	}
}

// TestSchedConfigValidate refuses the workloads that cannot be placed, so that a run never times out on them.
func TestSchedConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SchedConfig
		ok   bool
	}{
		{"defaults", SchedConfig{}, true},
		{"medium", SchedConfig{Nodes: 1000, Pods: 2000, Repetitions: 1}, true},
		{"quick", QuickSchedConfig(SchedConfig{}), true},
		{"unknown case", SchedConfig{AlgoCases: []string{"gang"}}, false},
		{"more pods than 40 a node", SchedConfig{Nodes: 10, Pods: 401}, false},
		{"exactly 40 a node", SchedConfig{Nodes: 10, Pods: 400}, true},
		{"more preemptors than victims", SchedConfig{Nodes: 10, Pods: 40, Preemptors: 41}, false},
		{"five victims of one CPU", SchedConfig{VictimsPerNode: 5}, false},
		{"anti-affinity group wider than the cluster", SchedConfig{Nodes: 5, Pods: 100, Preemptors: 10}, false},
		{"no anti-affinity case", SchedConfig{Nodes: 5, Pods: 100, Preemptors: 10,
			AlgoCases: []string{SchedPlain}, E2ECases: []string{}}, true},
		{"deployment too big", SchedConfig{DeployReplicas: 1000, DeployNodes: 10}, false},
		{"no deployment", SchedConfig{DeployReplicas: -1, DeployNodes: -1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.setDefaults()
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSchedReportAnchors renders made-up results: each case's median shows against its anchors, a failed
// repetition stays out of the medians and is listed, and RunSched's error counts it.
func TestSchedReportAnchors(t *testing.T) {
	run := func(c string, rep int, secs float64, placed int) SchedRun {
		return SchedRun{Case: c, Rep: rep, Pods: 1000, Scheduled: placed, Elapsed: time.Duration(secs * float64(time.Second)),
			FirstBind: 100 * time.Millisecond}
	}
	res := &SchedResults{Machine: Machine{CPUs: 2}, Shape: SchedShape{Nodes: 100, Pods: 1000, Preemptors: 1000, Repetitions: 3},
		E2E: []SchedRun{run(SchedPlain, 1, 2, 1000), run(SchedPlain, 2, 2.5, 1000), run(SchedPlain, 3, 0.1, 10)}}
	res.E2E[2].Err = "timed out"
	md := SchedReport(res)
	for _, want := range []string{
		"| plain | — | 450 | kube-scheduler CI threshold 2024, SchedulingBasic/5000Nodes_10000Pods (issue 5): 270/s | — | 1.67× |",
		"| plain | — | 450 | GKE, sustained in its 130,000-node cluster (issue 5): 1,000/s | — | 0.45× |",
		"≥ 1,000 pods/s on this 2-CPU machine | 450 pods/s = 0.45× the goal | **NO** |",
		"| preemption | — | — | none: upstream sets no threshold at 5,000 nodes | | |",
		"- plain, repetition 3: 10 of 1,000 pods placed; timed out",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if err := res.failed(); !errors.Is(err, ErrSchedRunsFailed) || !strings.Contains(err.Error(), "1 of 3") {
		t.Errorf("failed() = %v, want ErrSchedRunsFailed for 1 of 3", err)
	}
}

// TestWarnLog counts warnings by message, keeps the first in full with its groups, and drops info records.
func TestWarnLog(t *testing.T) {
	h := newWarnLog()
	log := slog.New(h).With("component", "scheduler").WithGroup("g").With("cluster", "c1")
	log.Info("ignored")
	log.Warn("preemption failed", "pod", "default/a")
	log.Warn("preemption failed", "pod", "default/b")
	log.Error("bind failed", "err", "boom")
	got := h.warnings()
	want := []SchedWarning{
		{Level: "WARN", Msg: "preemption failed", Count: 2, First: "preemption failed component=scheduler g.cluster=c1 g.pod=default/a"},
		{Level: "ERROR", Msg: "bind failed", Count: 1, First: "bind failed component=scheduler g.cluster=c1 g.err=boom"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
