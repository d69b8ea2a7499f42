// Command schedperf measures the Wheelhouse scheduler — its algorithm alone, end to end through the API into
// PostgreSQL, the rollout of a large Deployment and its memory — and writes its section of docs/perf.md.
// `schedperf report` renders that section again from a run's --json results.
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
	perf.Command{Name: "schedperf", DefaultResults: "results/sched.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			return run(ctx, cfg)
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.SchedResults](from)
			if err != nil {
				return err
			}
			return perf.WriteSchedReport(out, perf.SchedReport(res))
		}}.Main()
}

func run(ctx context.Context, cfg perf.SchedConfig) error {
	_, err := perf.RunSched(ctx, cfg)
	return err
}

func parseFlags(args []string) (perf.SchedConfig, error) {
	var cfg perf.SchedConfig
	fs := flag.NewFlagSet("schedperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run of about 20 seconds: one repetition, 50 nodes, 100 pods (25 preemptors), a 100-replica Deployment on 10 nodes; overrides the size flags")
	all := strings.Join(perf.AllSchedCases, ",")
	algo := fs.String("algo-cases", all, "cases measured with the algorithm alone (comma-separated, or none)")
	e2e := fs.String("e2e-cases", all, "cases measured end to end through the API (comma-separated, or none)")
	fs.IntVar(&cfg.Nodes, "nodes", 5000, "nodes in the cluster")
	fs.IntVar(&cfg.Pods, "pods", 10_000, "pods to place in the plain, spread and anti-affinity cases")
	fs.IntVar(&cfg.Preemptors, "preemptors", 0, "high-priority pods to place in the preemption case (default: --pods, at most one per victim)")
	fs.IntVar(&cfg.VictimsPerNode, "victims-per-node", 4, "low-priority pods of one CPU on each 4-CPU node in the preemption case")
	fs.IntVar(&cfg.Repetitions, "reps", 3, "repetitions of every measurement; the report shows medians")
	fs.IntVar(&cfg.DeployReplicas, "deploy-replicas", 1000, "replicas of the timed Deployment (negative: skip the rollout)")
	fs.IntVar(&cfg.DeployNodes, "deploy-nodes", 100, "nodes of the rollout's cluster")
	fs.IntVar(&cfg.Workers, "workers", 32, "concurrent creates when loading an end-to-end run")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "longest wait for one run's pods to be bound (default 10m)")
	fs.StringVar(&cfg.Out, "out", "", "markdown file whose schedperf section is (re)written, e.g. ../docs/perf.md")
	fs.StringVar(&cfg.JSONOut, "json", "", "also write the raw results as JSON here")
	fs.StringVar(&cfg.TempDir, "tmp", "", "parent of the run's temp directory (default $TMPDIR or /tmp)")
	fs.BoolVar(&cfg.KeepTemp, "keep-tmp", false, "keep PostgreSQL's data directory")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of each end-to-end measurement (scheduler, API and store; not the loading) to <this>-<case>-<rep>")
	verbose := fs.Bool("v", true, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.AlgoCases, cfg.E2ECases = cases(*algo), cases(*e2e)
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = strings.TrimSpace("cd perf && go run ./cmd/schedperf " + strings.Join(args, " "))
	if *quick {
		cfg = perf.QuickSchedConfig(cfg)
	}
	return cfg, nil
}

// cases splits a comma-separated list; "none" is the empty list (not nil, which means every case).
func cases(s string) []string {
	out := []string{}
	if strings.TrimSpace(s) == "none" {
		return out
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
