// Command agentperf measures the node agent with the real binary: pod startup latency on real agents (process
// runtime, each in its own network namespace), one agent's memory with many pods, and the server's CPU and
// memory under many hollow nodes (`wheelhouse agent --hollow N`); it writes its block of docs/perf.md.
// `agentperf report` renders that block again from a run's --json results. Needs root.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wheelhouse-dev/wheelhouse/perf"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "report" {
		if err := rerender(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "agentperf report:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentperf:", err)
		os.Exit(2)
	}
	if _, err := perf.RunAgent(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agentperf:", err)
		os.Exit(1)
	}
}

// rerender writes the block again from a run's --json results:
// agentperf report --from results/agent.json --out ../docs/perf.md
func rerender(args []string) error {
	fs := flag.NewFlagSet("agentperf report", flag.ContinueOnError)
	from := fs.String("from", "results/agent.json", "results written by a run's --json")
	out := fs.String("out", "", "markdown file whose agentperf block is rewritten")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	b, err := os.ReadFile(*from)
	if err != nil {
		return err
	}
	var res perf.AgentResults
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", *from, err)
	}
	return perf.WriteAgentReport(*out, perf.AgentReport(&res))
}

func parseFlags(args []string) (perf.AgentConfig, error) {
	var cfg perf.AgentConfig
	fs := flag.NewFlagSet("agentperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run under a minute: 20 startup pods once, 20 pods for memory, 20 hollow nodes × 5 pods")
	fs.IntVar(&cfg.StartupPods, "pods", 100, "pods per repetition of the startup scenario")
	fs.IntVar(&cfg.RealAgents, "agents", 2, "real agents (process runtime), each in its own network namespace")
	fs.IntVar(&cfg.CreateRate, "rate", 20, "pod creates per second (open loop) in the startup and memory scenarios")
	fs.IntVar(&cfg.Repetitions, "reps", 3, "repetitions of the startup scenario; the report shows medians")
	fs.IntVar(&cfg.RSSPods, "rss-pods", 100, "pods on one agent while its memory is read (negative: skip)")
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
