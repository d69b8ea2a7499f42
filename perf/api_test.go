package perf

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAPIQuickWheelhouse runs the whole API harness in quick mode against the wheelhouse target (watch cache on):
// it builds the server, starts PostgreSQL and the server, runs every scenario once at toy scale and renders the
// report into a copy of a docs/perf.md-like file. It checks that the results are sane, not how fast they are.
func TestAPIQuickWheelhouse(t *testing.T) {
	out := filepath.Join(t.TempDir(), "perf.md")
	const before = "# Store report\n\nkept as is\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := QuickAPIConfig(APIConfig{Targets: []string{APIWheelhouse}, Out: out, Command: "go test ./perf"})
	res, err := RunAPI(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunAPI: %v", err)
	}
	if len(res.Errors) > 0 {
		t.Errorf("errors during the run: %v", res.Errors)
	}
	if len(res.Targets) != 1 || res.Targets[0].Err != "" {
		t.Fatalf("targets: %+v", res.Targets)
	}
	if len(res.Reps) != 1 {
		t.Fatalf("%d repetitions, want 1", len(res.Reps))
	}
	rep := res.Reps[0]
	checkCreates(t, cfg, rep.Create)
	checkLists(t, cfg, rep.List)
	checkFanout(t, cfg, rep.Watch)

	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc), before) {
		t.Errorf("the report changed the file outside its section:\n%.300s", doc)
	}
	for _, want := range []string{apiBegin, "# Kubernetes API performance", "## API goals", "## Create pods",
		"## List", "## Watch fan-out", "## Every repetition (API)", "## Method and caveats (API)", apiEnd} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func checkCreates(t *testing.T, cfg APIConfig, c CreateResult) {
	t.Helper()
	want := int(float64(cfg.CreateRate) * cfg.CreateDuration.Seconds())
	if c.Err != "" || c.Errors != 0 || c.Scheduled != want || c.OK != want {
		t.Errorf("creates: %d scheduled, %d ok, %d errors (%s; %s); want %d ok", c.Scheduled, c.OK, c.Errors, c.FirstErr, c.Err, want)
	}
	if !(0 < c.P50 && c.P50 <= c.P99 && c.P99 <= c.Max) || c.Rate() <= 0 {
		t.Errorf("creates: p50 %v, p99 %v, max %v, %.0f/s; want positive, ordered latencies", c.P50, c.P99, c.Max, c.Rate())
	}
	if c.ServerRSS <= 0 || c.CPU.Server <= 0 {
		t.Errorf("creates: server RSS %d, CPU %+v; want both measured", c.ServerRSS, c.CPU)
	}
}

func checkLists(t *testing.T, cfg APIConfig, l ListScenario) {
	t.Helper()
	if l.Err != "" || len(l.Forms) != len(listForms) {
		t.Fatalf("lists: %d forms (%s), want %d", len(l.Forms), l.Err, len(listForms))
	}
	for _, f := range l.Forms {
		if f.Err != "" || f.Items != cfg.ListPods || len(f.Durations) != cfg.ListRepetitions || f.Bytes <= 0 || f.Pages < 1 {
			t.Errorf("list %s: %d items, %d timed lists, %d bytes, %d pages (%s); want %d items, %d lists",
				f.Key, f.Items, len(f.Durations), f.Bytes, f.Pages, f.Err, cfg.ListPods, cfg.ListRepetitions)
		}
		for _, d := range f.Durations {
			if d <= 0 {
				t.Errorf("list %s: duration %v", f.Key, d)
			}
		}
	}
	if l.ServerRSS <= 0 {
		t.Error("lists: no server RSS")
	}
}

func checkFanout(t *testing.T, cfg APIConfig, w FanoutResult) {
	t.Helper()
	writes := int(float64(cfg.WatchRate) * cfg.WatchDuration.Seconds())
	if w.Err != "" || w.WriteErrors != 0 || w.Writes != writes || w.ClosedEarly != 0 {
		t.Errorf("fan-out: %d writes, %d failed, %d watches closed early (%s; %s); want %d writes", w.Writes,
			w.WriteErrors, w.ClosedEarly, w.FirstErr, w.Err, writes)
	}
	if w.Expected != writes*cfg.Watchers || w.Received != w.Expected {
		t.Errorf("fan-out: received %d of %d deliveries, want every write at every one of %d watchers", w.Received,
			w.Expected, cfg.Watchers)
	}
	if !(0 < w.P50 && w.P50 <= w.P99 && w.P99 <= w.Max) || w.Setup <= 0 || w.Max > time.Minute {
		t.Errorf("fan-out: p50 %v, p99 %v, max %v, set-up %v; want positive, ordered latencies", w.P50, w.P99, w.Max, w.Setup)
	}
}

func TestSpliceAPISection(t *testing.T) {
	const section = "# API\n\nnumbers\n"
	block := apiBegin + "\n# API\n\nnumbers\n" + apiEnd + "\n"
	tests := []struct{ name, doc, want string }{
		{"empty file", "", block},
		{"no block", "# Store\n", "# Store\n\n" + block},
		{"no final newline", "# Store", "# Store\n\n" + block},
		{"replace", "# Store\n\n" + apiBegin + "\nold\n" + apiEnd + "\n", "# Store\n\n" + block},
		{"keeps what follows", "a\n" + apiBegin + "\nold\n" + apiEnd + "\nb\n", "a\n" + block + "b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spliceAPISection(tt.doc, section); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestWriteStoreReportKeepsAPISection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.md")
	if err := WriteAPIReport(path, "# API\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteStoreReport(path, "# Store v2\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := storeBegin + "\n# Store v2\n" + storeEnd + "\n\n" + apiBegin + "\n# API\n" + apiEnd + "\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := WriteStoreReport(path, "# Store v3\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != strings.Replace(want, "v2", "v3", 1) {
		t.Errorf("second rewrite: got %q", got)
	}
}

func TestContinueToken(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5","continue":"abc"},"rows":[{"cells":[1]}]}`, "abc"},
		{`{"kind":"PodList","items":[{"metadata":{"continue":"no"}}],"metadata":{"continue":"late"}}`, "late"},
		{`{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}`, ""},
	} {
		got, err := continueToken([]byte(tt.body))
		if err != nil || got != tt.want {
			t.Errorf("continueToken(%s) = %q, %v; want %q", tt.body, got, err, tt.want)
		}
	}
	if _, err := continueToken([]byte(`[1]`)); err == nil {
		t.Error("continueToken accepted a JSON array")
	}
}

func TestOpenLoopKeepsSchedule(t *testing.T) {
	// Every request takes far longer than the interval: the pool must grow instead of delaying the schedule.
	l := openLoop{rate: 200, duration: 250 * time.Millisecond}
	var ran atomic.Int64
	st := l.run(t.Context(), func(i int, due time.Time) {
		ran.Add(1)
		time.Sleep(100 * time.Millisecond)
	})
	if st.Started != l.n() || int(ran.Load()) != l.n() {
		t.Fatalf("started %d, ran %d; want %d", st.Started, ran.Load(), l.n())
	}
	if st.Late > l.n()/10 {
		t.Errorf("%d of %d requests started late (max lag %v) although the pool may grow", st.Late, l.n(), st.MaxLag)
	}
	if st.Elapsed < l.duration || st.Elapsed > l.duration+time.Second {
		t.Errorf("elapsed %v, want about %v + 100ms", st.Elapsed, l.duration)
	}
}
