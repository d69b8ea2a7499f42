package perf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fragment is a live fragment as the server sends it: the region's HTML inside a JSON string (encoding/json
// escapes its quotes and, by default, its angle brackets).
func fragment(t *testing.T, html string) []byte {
	t.Helper()
	msg := struct { // web/live's serverMsg
		T    string `json:"t"`
		ID   string `json:"id,omitempty"`
		Seq  uint64 `json:"seq,omitempty"`
		HTML string `json:"html,omitempty"`
	}{"frag", "r1", 7, html}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), string(fragPrefix)) {
		t.Fatalf("fragment %s does not start with %s: the tabs would not count it", b, fragPrefix)
	}
	return b
}

func fragRow(name string) string {
	return `<tr data-testid="row" data-name="` + name + `" data-namespace="churn"><td><a href="/ui/c/default/r/pods/churn/` +
		name + `">` + name + `</a></td><td>Pending</td></tr>`
}

func TestRowNames(t *testing.T) {
	msg := fragment(t, `<table><tbody>`+fragRow(churnName(3))+fragRow("pod-000001")+`</tbody></table><p data-testid="count">2 pods</p>`)
	var got []string
	rowNames(msg, func(name []byte) { got = append(got, string(name)) })
	if diff := cmp.Diff([]string{"aaa-churn-99999996", "pod-000001"}, got); diff != "" {
		t.Errorf("rowNames (-want +got):\n%s", diff)
	}
	rowNames([]byte(`{"t":"frag","html":"<tr data-name=\"cut`), func(name []byte) { t.Errorf("a cut-off name %q", name) })
}

func TestChurnLogIndex(t *testing.T) {
	l := newChurnLog(10)
	for _, tt := range []struct {
		name   string
		want   int
		wantOK bool
	}{
		{churnName(0), 0, true},
		{churnName(9), 9, true},
		{churnName(10), 0, false}, // beyond the log
		{"pod-000001", 0, false},
		{"aaa-churn-1", 0, false},
		{"aaa-churn-9999999x", 0, false},
	} {
		i, ok := l.index([]byte(tt.name))
		if ok != tt.wantOK || (ok && i != tt.want) {
			t.Errorf("index(%q) = %d, %v; want %d, %v", tt.name, i, ok, tt.want, tt.wantOK)
		}
	}
	if !(churnName(2) < churnName(1) && churnName(1) < "pod-000000") {
		t.Error("newer churn pods must sort first, and before the namespace's other pods")
	}
}

func TestLiveTabNote(t *testing.T) {
	l := newChurnLog(4)
	t0 := time.Unix(1_700_000_000, 0)
	l.started(1, t0)
	l.started(2, t0.Add(10*time.Millisecond))
	tab := &liveTab{churn: l}
	// Pod 0 is unmeasured (the backlog); pods 1 and 2 are seen in the first fragment, pod 1 again in the second.
	tab.note(fragment(t, fragRow(churnName(0))+fragRow(churnName(1))+fragRow(churnName(2))), t0.Add(50*time.Millisecond))
	tab.note(fragment(t, fragRow(churnName(1))+fragRow(churnName(3))), t0.Add(150*time.Millisecond))
	if diff := cmp.Diff([]time.Duration{50 * time.Millisecond, 40 * time.Millisecond}, tab.lat); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
}

func TestSinceStart(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123_000_000)
	offset := 3*time.Millisecond + 250*time.Microsecond // the page's clock runs ahead
	page := float64(t0.Add(offset+42*time.Millisecond).UnixNano()) / 1e6
	if got := sinceStart(page, t0, offset); got < 42*time.Millisecond-time.Microsecond || got > 42*time.Millisecond+time.Microsecond {
		t.Errorf("sinceStart = %v, want 42ms", got)
	}
	if got := sinceStart(0, t0, offset); got != 0 {
		t.Errorf("sinceStart of no time = %v, want 0", got)
	}
}

func TestSummarizeLatency(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	out := &DashLatencyResult{Samples: 4, Runs: []DashLatencySample{
		{Create: ms(5), Frame: ms(10), DOM: ms(12), SincePrevFrame: ms(180)},
		{Create: ms(6), Frame: ms(90), DOM: ms(95), SincePrevFrame: ms(101)}, // waited for the interval
		{Create: ms(7), Frame: 0, DOM: ms(30)},                               // no fragment time recorded
		{Create: ms(8)},                                                      // never seen
	}}
	summarizeLatency(out)
	if out.Seen != 3 || out.Coalesced != 1 {
		t.Errorf("seen %d, coalesced %d; want 3 and 1", out.Seen, out.Coalesced)
	}
	if out.P50 != ms(30) || out.Max != ms(95) || out.FrameP50 != ms(10) || out.DOMP99 != ms(5) || out.CreateP99 != ms(7) {
		t.Errorf("p50 %v, max %v, frame p50 %v, DOM part p99 %v, create p99 %v", out.P50, out.Max, out.FrameP50, out.DOMP99, out.CreateP99)
	}
}

func TestDashConfigValidate(t *testing.T) {
	base := DashConfig{}
	base.setDefaults()
	for _, tt := range []struct {
		name string
		edit func(*DashConfig)
		ok   bool
	}{
		{"defaults", func(*DashConfig) {}, true},
		{"quick", func(c *DashConfig) { *c = QuickDashConfig(*c) }, true},
		{"unknown scenario", func(c *DashConfig) { c.Scenarios = []string{"latency", "speed"} }, false},
		{"gaps reversed", func(c *DashConfig) { c.GapMin, c.GapMax = time.Second, time.Millisecond }, false},
		{"no tabs", func(c *DashConfig) { c.Tabs = -1 }, false},
		{"churn rate 1", func(c *DashConfig) { c.ChurnRate = 1 }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestDashReport renders a run's results and checks that the block survives storeperf's rewrite of the file.
func TestDashReport(t *testing.T) {
	cfg := DashConfig{}
	cfg.setDefaults()
	res := &DashResults{Started: time.Unix(1_700_000_000, 0), Command: "cd perf && go run ./cmd/dashperf",
		Shape:   DashShape{LatencySamples: 200, PagePods: 10_000, PageReps: 30, Tabs: 200, ChurnRate: 100, ChurnDuration: time.Minute},
		Latency: &DashLatencyResult{Samples: 200, Seen: 200, P50: 40 * time.Millisecond, P99: 300 * time.Millisecond},
		Page: &DashPageResult{Pods: 10_000, Variants: []DashPageVariant{{Key: "page1", Label: "first page, name order",
			Durations: []time.Duration{time.Millisecond}, Median: 20 * time.Millisecond, P99: 60 * time.Millisecond}}},
		Tabs: &DashTabsResult{Tabs: 200, Connected: 200, Rate: 100, Duration: time.Minute, Creates: 3000, Deletes: 3000,
			RSSBefore: 100 << 20, RSSAfter: 200 << 20, FramesMedian: 9.9, FramesMax: 10}}
	md := DashReport(res)
	for _, want := range []string{
		"## The dashboard (dashperf)",
		"| write-to-DOM p99 ≤ 250.00 ms | 300.00 ms | 1.20× | **NO** |",
		"| pods page at 10,000 pods, first page, name order: p99 ≤ 100.00 ms | 60.00 ms (median 20.00 ms) | 0.60× | yes |",
		"| RSS | 100.0 MiB | 200.0 MiB | **512.0 KiB** |",
		"### How to read the dashboard numbers",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	path := filepath.Join(t.TempDir(), "perf.md")
	if err := WriteDashReport(path, md); err != nil {
		t.Fatal(err)
	}
	if err := WriteStoreReport(path, "# Store\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := storeBegin + "\n# Store\n" + storeEnd + "\n\n" + dashBegin + "\n" + md + dashEnd + "\n"; string(got) != want {
		t.Errorf("after storeperf's rewrite:\n%s\nwant\n%s", got, want)
	}
}
