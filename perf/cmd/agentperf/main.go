// Command agentperf measures the node agent with the real binary: pod startup latency on real agents (process
// runtime, each in its own network namespace), one agent's memory with many pods, the process runtime and
// containerd side by side (one agent each), pulling and starting a pod whose image is not on the node (beside
// `ctr images pull`), and the server's CPU and memory under many hollow nodes (`wheelhouse agent --hollow N`);
// it writes its block of docs/perf.md. `agentperf report` renders that block again from a run's --json results.
// Needs root.
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
	perf.Command{Name: "agentperf", DefaultResults: "results/agent.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			return (func(ctx context.Context, cfg perf.AgentConfig) error { _, err := perf.RunAgent(ctx, cfg); return err })(ctx, cfg)
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.AgentResults](from)
			if err != nil {
				return err
			}
			return perf.WriteAgentReport(out, perf.AgentReport(res))
		}}.Main()
}

func parseFlags(args []string) (perf.AgentConfig, error) {
	var cfg perf.AgentConfig
	fs := flag.NewFlagSet("agentperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run under a minute: 20 startup pods once, 10 pods for memory, 10 per runtime, 3 pulls, 20 hollow nodes × 5 pods")
	fs.IntVar(&cfg.StartupPods, "pods", 100, "pods per repetition of the startup scenario (negative: skip it)")
	fs.IntVar(&cfg.RealAgents, "agents", 2, "real agents (process runtime), each in its own network namespace")
	fs.IntVar(&cfg.CreateRate, "rate", 20, "pod creates per second (open loop) in the startup and memory scenarios")
	fs.IntVar(&cfg.Repetitions, "reps", 3, "repetitions of the startup scenario; the report shows medians")
	fs.IntVar(&cfg.RSSPods, "rss-pods", 100, "pods on one agent while its memory is read (negative: skip)")
	fs.IntVar(&cfg.RuntimePods, "runtime-pods", 50, "pods per repetition on each runtime's agent (process and containerd) in the runtime comparison (negative: skip)")
	fs.IntVar(&cfg.Pulls, "pulls", 20, "pods pulling their image (≈ 50 MiB, absent from the node) from a local registry through containerd, one at a time, each after a `ctr images pull` of an image of the same shape (negative: skip)")
	fs.IntVar(&cfg.HollowNodes, "hollow", 1000, "hollow nodes (negative: skip the hollow scenario)")
	fs.IntVar(&cfg.HollowPodsPerNode, "hollow-pods", 30, "pods per hollow node (one Deployment)")
	fs.IntVar(&cfg.HollowReps, "hollow-reps", 1, "repetitions of the hollow Deployment")
	fs.DurationVar(&cfg.Steady, "steady", 0, "steady-state sampling window (default 30s)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "longest wait for nodes or pods (default 10m)")
	fs.StringVar(&cfg.Out, "out", "", "markdown file whose agentperf block is (re)written, e.g. ../docs/perf.md")
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
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = strings.TrimSpace("cd perf && go run ./cmd/agentperf " + strings.Join(args, " "))
	if *quick { // the smoke run's sizes, but flags given explicitly win
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		q := perf.QuickAgentConfig(cfg)
		keep := func(name string, p *int, v int) {
			if set[name] {
				*p = v
			}
		}
		keep("pods", &q.StartupPods, cfg.StartupPods)
		keep("reps", &q.Repetitions, cfg.Repetitions)
		keep("rss-pods", &q.RSSPods, cfg.RSSPods)
		keep("runtime-pods", &q.RuntimePods, cfg.RuntimePods)
		keep("pulls", &q.Pulls, cfg.Pulls)
		keep("hollow", &q.HollowNodes, cfg.HollowNodes)
		keep("hollow-pods", &q.HollowPodsPerNode, cfg.HollowPodsPerNode)
		keep("hollow-reps", &q.HollowReps, cfg.HollowReps)
		if set["steady"] {
			q.Steady = cfg.Steady
		}
		cfg = q
	}
	return cfg, nil
}
