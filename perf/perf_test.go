package perf

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary serve as the harness's watcher process, as `storeperf watcher` does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "watcher" {
		os.Exit(WatcherMain(context.Background(), os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestQuickWheelhouse runs the whole harness in quick mode against the Wheelhouse store only (no etcd, no kine),
// checking that every phase produces results and the report renders. It asserts no timings.
func TestQuickWheelhouse(t *testing.T) {
	out := filepath.Join(t.TempDir(), "perf.md")
	cfg := QuickConfig(Config{
		Targets:        []string{Wheelhouse},
		Concurrency:    []int{1, 16},
		Out:            out,
		Command:        "go test ./perf",
		WatcherCommand: []string{os.Args[0], "watcher"},
	})
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Errors) > 0 {
		t.Errorf("errors during the run: %v", res.Errors)
	}
	if got, want := len(res.Writes), 4; got != want {
		t.Fatalf("%d throughput points, want %d", got, want)
	}
	for _, p := range res.Writes {
		for _, r := range p.Reps {
			if r.OK == 0 || r.Failed != 0 {
				t.Errorf("%s × %d: %d ok, %d failed (%s)", p.Op, p.Concurrency, r.OK, r.Failed, r.FirstErr)
			}
		}
	}
	if len(res.Watch) != 1 || len(res.Watch[0].Reps) != 1 {
		t.Fatalf("watch: %+v; want one repetition", res.Watch)
	}
	if r := res.Watch[0].Reps[0]; r.Err != "" || r.Writes == 0 || r.Received != r.Writes {
		t.Errorf("watch: %+v; want every write delivered to the other process", r)
	}
	if len(res.Lists) != 1 || res.Lists[0].Err != "" || len(res.Lists[0].Durations) != cfg.ListRepetitions {
		t.Errorf("lists: %+v", res.Lists)
	}
	if len(res.Memory) != 1 || res.Memory[0].Err != "" || res.Memory[0].ServerRSS == 0 {
		t.Errorf("memory: %+v", res.Memory)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"## Goals", "## Write throughput", "## Watch latency", "## List", "## Memory", "## Diagnostics"} {
		if !strings.Contains(string(report), section) {
			t.Errorf("report has no %q section", section)
		}
	}
}

func TestValueCarriesStartTime(t *testing.T) {
	start := time.Unix(1_700_000_000, 123456789)
	v := newValue(start)
	if len(v) != valueSize {
		t.Fatalf("value is %d bytes, want %d", len(v), valueSize)
	}
	got, err := valueTime(v)
	if err != nil || !got.Equal(start) {
		t.Fatalf("valueTime = %v, %v; want %v", got, err, start)
	}
	if _, err := valueTime([]byte("nope")); err == nil {
		t.Fatal("valueTime accepted a value without a timestamp")
	}
}

func TestStats(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"median odd", median([]float64{3, 1, 2}), 2},
		{"median even", median([]float64{4, 1, 2, 3}), 2.5},
		{"median none", median(nil), 0},
		{"p50", percentile([]float64{5, 1, 4, 2, 3}, 50), 3},
		{"p99 of 100", percentile(seq(100), 99), 99},
		{"p100", percentile(seq(10), 100), 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestFormat(t *testing.T) {
	got := []string{fmtInt(1234567), fmtInt(12), fmtDur(1500 * time.Microsecond), fmtDur(5 * time.Second),
		ratio(3, 2), ratio(1, 0), fmtBytes(3 << 20)}
	want := []string{"1,234,567", "12", "1.50 ms", "5 s", "1.50×", "—", "3.0 MiB"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formatting (-want +got):\n%s", diff)
	}
}

func TestMachineProbes(t *testing.T) {
	if d := pageTouchProbe(); d <= 0 {
		t.Errorf("page touch probe: %v, want a time", d)
	}
	if d := execProbe(); d <= 0 {
		t.Errorf("exec probe: %v, want a time", d)
	}
}
