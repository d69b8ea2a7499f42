// Command apiperf measures the Kubernetes API of `wheelhouse server` with its watch cache on and off, side by side
// on this machine, and writes its section of docs/perf.md. `apiperf report` renders that section again from a
// run's --json results.
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
	perf.Command{Name: "apiperf", DefaultResults: "results/api.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			return (func(ctx context.Context, cfg perf.APIConfig) error { _, err := perf.RunAPI(ctx, cfg); return err })(ctx, cfg)
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.APIResults](from)
			if err != nil {
				return err
			}
			return perf.WriteAPIReport(out, perf.APIReport(res))
		}}.Main()
}

func parseFlags(args []string) (perf.APIConfig, error) {
	var cfg perf.APIConfig
	fs := flag.NewFlagSet("apiperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run under a minute: one repetition, 100 creates/s for 2s, 500 pods, 50 watchers")
	targets := fs.String("targets", strings.Join(perf.AllAPITargets, ","), "comma-separated targets: wheelhouse, wheelhouse-nocache")
	fs.IntVar(&cfg.CreateRate, "rate", 500, "pod creates per second (open loop)")
	fs.DurationVar(&cfg.CreateDuration, "duration", 0, "duration of the create phase (default 10s)")
	fs.IntVar(&cfg.Repetitions, "reps", 3, "repetitions of every scenario, targets interleaved; the report shows medians")
	fs.IntVar(&cfg.ListPods, "pods", 10_000, "pods in the listed namespace")
	fs.IntVar(&cfg.ListRepetitions, "list-reps", 5, "timed lists of each form per repetition, after one warm-up")
	fs.IntVar(&cfg.Watchers, "watchers", 1000, "watches open in the fan-out scenario")
	fs.IntVar(&cfg.WatchRate, "watch-rate", 100, "writes per second in the fan-out scenario (open loop)")
	fs.DurationVar(&cfg.WatchDuration, "watch-duration", 0, "duration of the fan-out writes (default 10s)")
	fs.StringVar(&cfg.Out, "out", "", "markdown file whose apiperf section is (re)written, e.g. ../docs/perf.md")
	fs.StringVar(&cfg.JSONOut, "json", "", "also write the raw results as JSON here")
	fs.StringVar(&cfg.TempDir, "tmp", "", "parent of the run's temp directory (default $TMPDIR or /tmp)")
	fs.BoolVar(&cfg.KeepTemp, "keep-tmp", false, "keep the data directories and server logs")
	fs.StringVar(&cfg.Binary, "bin", "", "use this wheelhouse binary instead of building ./cmd/wheelhouse")
	fs.IntVar(&cfg.RBACCount, "rbac-count", 3, "runs of each authorization benchmark after the API scenarios (negative: skip)")
	verbose := fs.Bool("v", true, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = strings.TrimSpace("cd perf && go run ./cmd/apiperf " + strings.Join(args, " "))
	if *quick {
		cfg = perf.QuickAPIConfig(cfg)
	}
	return cfg, nil
}
