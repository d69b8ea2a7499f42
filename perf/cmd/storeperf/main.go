// Command storeperf compares the Wheelhouse store with etcd and kine on this machine and writes a markdown
// report. `storeperf watcher` is the harness's own second process; it is not meant to be run by hand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/wheelhouse-dev/wheelhouse/perf"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "watcher" { // a watch client process of the fan-out measurement
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := perf.WatcherMain(ctx, os.Stdin, os.Stdout)
		stop()
		os.Exit(code)
	}
	perf.Command{Name: "storeperf", DefaultResults: "results/perf.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			return run(ctx, cfg)
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.Results](from)
			if err != nil {
				return err
			}
			return perf.WriteStoreReport(out, perf.Report(res))
		}}.Main()
}

// cpuProfile is the --cpuprofile path; profiling is a property of this process, not of the harness Config.
var cpuProfile string

func run(ctx context.Context, cfg perf.Config) error {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	_, err := perf.Run(ctx, cfg)
	return err
}

func parseFlags(args []string) (perf.Config, error) {
	var cfg perf.Config
	fs := flag.NewFlagSet("storeperf", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run: every measurement once at tiny scale (1 s points, 1k-object list, 50 watches)")
	targets := fs.String("targets", strings.Join(perf.AllTargets, ","), "comma-separated targets: wheelhouse, etcd, kine")
	concurrency := fs.String("writers", "1,16,64", "comma-separated numbers of concurrent writers")
	lists := fs.String("list-sizes", "10000,100000", "comma-separated object counts to list; the largest is the memory phase's")
	fs.DurationVar(&cfg.PointDuration, "duration", 0, "duration of each throughput point (default 5s)")
	fs.IntVar(&cfg.Repetitions, "reps", 0, "repetitions of each throughput point; the median is reported (default 3)")
	fs.IntVar(&cfg.ListRepetitions, "list-reps", 0, "repetitions of each list (default 5)")
	fs.IntVar(&cfg.WatchRate, "watch-rate", 0, "writes/s during the watch-latency phase (default 1000)")
	fs.DurationVar(&cfg.WatchDuration, "watch-duration", 0, "duration of the watch-latency phase (default 10s)")
	fs.IntVar(&cfg.Watches, "watches", 0, "open watches in the memory phase (default 1000)")
	fs.BoolVar(&cfg.NoDiagnose, "no-diagnose", false, "skip the extra PostgreSQL diagnostic runs")
	fs.StringVar(&cfg.Out, "out", "", "markdown report path, e.g. ../docs/perf.md")
	fs.StringVar(&cfg.JSONOut, "json", "", "also write the raw results as JSON here")
	fs.StringVar(&cfg.TempDir, "tmp", "", "parent of the run's temp directory (default $TMPDIR or /tmp)")
	fs.BoolVar(&cfg.KeepTemp, "keep-tmp", false, "keep data directories and server logs")
	fs.StringVar(&cfg.CacheDir, "cache", "", "cache directory for the kine binary (default <repo>/.cache)")
	fs.BoolVar(&cfg.InstallEtcd, "install-etcd", true, "apt-get install etcd-server when etcd is missing and running as root")
	cfg.PGSettings = map[string]string{}
	fs.Func("pg-set", "extra PostgreSQL setting `k=v` (repeatable), e.g. shared_buffers=1GB", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return errors.New("want k=v")
		}
		cfg.PGSettings[k] = v
		return nil
	})
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the harness process (load generator and in-process store) here")
	verbose := fs.Bool("v", true, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	cfg.Targets = splitList(*targets)
	if cfg.Concurrency, err = ints(*concurrency); err != nil {
		return cfg, fmt.Errorf("--writers: %w", err)
	}
	if cfg.ListSizes, err = ints(*lists); err != nil {
		return cfg, fmt.Errorf("--list-sizes: %w", err)
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = defaultCache()
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = "cd perf && go run ./cmd/storeperf " + strings.Join(args, " ")
	if *quick {
		cfg = perf.QuickConfig(cfg)
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// defaultCache is .cache in the repository root (the parent of perf/), else in the working directory.
func defaultCache() string {
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "perf", "go.mod")); err == nil {
			return filepath.Join(d, ".cache")
		}
	}
	return filepath.Join(wd, ".cache")
}
