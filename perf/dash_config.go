package perf

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// The dashboard harness's scenarios, by the names --scenarios takes.
const (
	scLatency = "latency" // write-to-DOM latency in headless Chromium
	scPage    = "page"    // the pods page's server time at many pods
	scTabs    = "tabs"    // memory per connected tab, then many tabs under pod churn
)

var dashScenarios = []string{scLatency, scTabs, scPage}

// DashConfig is one run of the dashboard harness (cmd/dashperf). Zero fields take the defaults noted.
type DashConfig struct {
	// Scenarios to run, in the order of dashScenarios whatever the order given (default all three).
	Scenarios []string

	// LatencySamples pods (default 200) are created one at a time, each timed from the start of its create call
	// until its row is in the page's DOM, in a namespace of LatencyPods pods (default 100). Writes are spaced by
	// a random pause between GapMin and GapMax (defaults 50 and 250 ms).
	LatencySamples int
	LatencyPods    int
	GapMin, GapMax time.Duration

	// PagePods pods (default 10,000) are created by CreateWorkers concurrent calls (default 16); each page
	// variant is then fetched PageReps times (default 30).
	PagePods      int
	CreateWorkers int
	PageReps      int

	// Tabs websocket clients (default 200) subscribe to the list of a namespace of ChurnPods pods (default 100)
	// while ChurnRate pod changes per second (default 100: half creates, half deletes) run for ChurnDuration
	// (default 60 s).
	Tabs          int
	ChurnPods     int
	ChurnRate     int
	ChurnDuration time.Duration

	// Timeout bounds every wait: a row to appear, tabs to connect, pods to load (default 2 min; a single
	// latency sample waits at most 10 s).
	Timeout time.Duration

	// Out is the markdown file whose dashperf block is (re)written (empty: none); JSONOut gets the raw results.
	Out, JSONOut string
	// Command is the reproduce command printed in the report; Quick marks a smoke run.
	Command string
	Quick   bool
	// TempDir is where the run's directory is created; removed at the end unless KeepTemp.
	TempDir  string
	KeepTemp bool
	// Binary is a prebuilt wheelhouse binary; empty builds ./cmd/wheelhouse of the repository.
	Binary string
	// Chromium is the browser to drive (default: chromium, chromium-browser or google-chrome on PATH).
	Chromium string
	// ServerProfile, when set, gets a CPU profile of the server over the churn window.
	ServerProfile string
	// Seed seeds the random write spacing (default: the start time).
	Seed   int64
	Logger *slog.Logger
}

// QuickDashConfig shrinks cfg to a smoke run of under a minute.
func QuickDashConfig(cfg DashConfig) DashConfig {
	cfg.Quick = true
	cfg.LatencySamples, cfg.LatencyPods = 20, 20
	cfg.PagePods, cfg.PageReps = 500, 5
	cfg.Tabs, cfg.ChurnPods, cfg.ChurnRate, cfg.ChurnDuration = 20, 20, 20, 5*time.Second
	return cfg
}

func (cfg *DashConfig) setDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&cfg.LatencySamples, 200)
	def(&cfg.LatencyPods, 100)
	def(&cfg.PagePods, 10_000)
	def(&cfg.CreateWorkers, 16)
	def(&cfg.PageReps, 30)
	def(&cfg.Tabs, 200)
	def(&cfg.ChurnPods, 100)
	def(&cfg.ChurnRate, 100)
	if len(cfg.Scenarios) == 0 {
		cfg.Scenarios = dashScenarios
	}
	if cfg.GapMin == 0 && cfg.GapMax == 0 {
		cfg.GapMin, cfg.GapMax = 50*time.Millisecond, 250*time.Millisecond
	}
	if cfg.ChurnDuration == 0 {
		cfg.ChurnDuration = time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports a configuration that cannot run.
func (cfg DashConfig) Validate() error {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(dashScenarios, s) {
			return fmt.Errorf("dashperf: unknown scenario %q (want some of %s)", s, strings.Join(dashScenarios, ","))
		}
	}
	switch {
	case cfg.LatencySamples < 1 || cfg.LatencyPods < 0:
		return errors.New("dashperf: --samples must be positive and --latency-pods not negative")
	case cfg.GapMin < 0 || cfg.GapMax < cfg.GapMin:
		return errors.New("dashperf: want 0 <= --gap-min <= --gap-max")
	case cfg.PagePods < 1 || cfg.PageReps < 1 || cfg.CreateWorkers < 1:
		return errors.New("dashperf: --page-pods, --page-reps and --workers must be positive")
	case cfg.Tabs < 1 || cfg.ChurnRate < 2 || cfg.ChurnDuration < time.Second || cfg.ChurnPods < 0:
		return errors.New("dashperf: want --tabs >= 1, --churn-rate >= 2, --churn-duration >= 1s")
	case cfg.PagePods > 100_000:
		return errors.New("dashperf: at most 100,000 pods on the page")
	}
	return nil
}

// runs reports whether the scenario is selected.
func (cfg DashConfig) runs(scenario string) bool { return slices.Contains(cfg.Scenarios, scenario) }
