// Command dashperf measures the dashboard of the real binary: write-to-DOM latency in headless Chromium, the
// pods page's time at many pods, memory per connected tab, and many tabs under pod churn; it writes its block
// of docs/perf.md. `dashperf report` renders that block again from a run's --json results.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/wheelhouse-dev/wheelhouse/perf"
)

func main() {
	perf.Command{Name: "dashperf", DefaultResults: "results/dash.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			_, err = perf.RunDash(ctx, cfg)
			return err
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.DashResults](from)
			if err != nil {
				return err
			}
			return perf.WriteDashReport(out, perf.DashReport(res))
		}}.Main()
}

func parseFlags(args []string) (perf.DashConfig, error) {
	var cfg perf.DashConfig
	fs := flag.NewFlagSet("dashperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run under a minute: 20 writes, 500 pods on the page, 20 tabs for 5 s")
	scenarios := fs.String("scenarios", "latency,tabs,page", "scenarios to run (comma-separated)")
	fs.IntVar(&cfg.LatencySamples, "samples", 200, "writes timed until their row is in the browser's DOM")
	fs.IntVar(&cfg.LatencyPods, "latency-pods", 100, "pods in the namespace the browser shows")
	fs.DurationVar(&cfg.GapMin, "gap-min", 0, "least random pause before each timed write (default 50ms)")
	fs.DurationVar(&cfg.GapMax, "gap-max", 0, "largest random pause before each timed write (default 250ms)")
	fs.IntVar(&cfg.PagePods, "page-pods", 10_000, "pods in the namespace whose page is timed")
	fs.IntVar(&cfg.PageReps, "page-reps", 30, "timed fetches of each page variant")
	fs.IntVar(&cfg.CreateWorkers, "workers", 16, "concurrent creates while loading pods")
	fs.IntVar(&cfg.Tabs, "tabs", 200, "websocket tabs subscribed to one pods list")
	fs.IntVar(&cfg.ChurnPods, "churn-pods", 100, "pods in the namespace the tabs show")
	fs.IntVar(&cfg.ChurnRate, "churn-rate", 100, "pod changes per second (half creates, half deletes)")
	fs.DurationVar(&cfg.ChurnDuration, "churn-duration", 0, "how long the churn runs (default 60s)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "longest wait for pods, tabs or the page (default 2m)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the random write spacing (default: the time)")
	fs.StringVar(&cfg.ServerProfile, "server-cpuprofile", "", "write a CPU profile of the server over the churn window here")
	fs.StringVar(&cfg.Chromium, "chromium", "", "browser binary (default: chromium on PATH)")
	fs.StringVar(&cfg.Out, "out", "", "markdown file whose dashperf block is (re)written, e.g. ../docs/perf.md")
	fs.StringVar(&cfg.JSONOut, "json", "", "also write the raw results as JSON here")
	fs.StringVar(&cfg.TempDir, "tmp", "", "parent of the run's temp directory (default $TMPDIR or /tmp)")
	fs.BoolVar(&cfg.KeepTemp, "keep-tmp", false, "keep the data directories and logs")
	fs.StringVar(&cfg.Binary, "bin", "", "use this wheelhouse binary instead of building ./cmd/wheelhouse")
	verbose := fs.Bool("v", true, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Scenarios = strings.Split(*scenarios, ",")
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = strings.TrimSpace("cd perf && go run ./cmd/dashperf " + strings.Join(args, " "))
	if *quick { // the smoke run's sizes, but flags given explicitly win
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		q := perf.QuickDashConfig(cfg)
		keep := func(name string, p *int, v int) {
			if set[name] {
				*p = v
			}
		}
		keep("samples", &q.LatencySamples, cfg.LatencySamples)
		keep("latency-pods", &q.LatencyPods, cfg.LatencyPods)
		keep("page-pods", &q.PagePods, cfg.PagePods)
		keep("page-reps", &q.PageReps, cfg.PageReps)
		keep("tabs", &q.Tabs, cfg.Tabs)
		keep("churn-pods", &q.ChurnPods, cfg.ChurnPods)
		keep("churn-rate", &q.ChurnRate, cfg.ChurnRate)
		if set["churn-duration"] {
			q.ChurnDuration = cfg.ChurnDuration
		}
		cfg = q
	}
	return cfg, nil
}
