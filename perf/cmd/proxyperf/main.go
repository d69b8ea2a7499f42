// Command proxyperf measures the Service proxy and the cluster DNS server (issue 8, "Speed"): the nftables
// backend's full sync of many Services and one endpoint change, the IPVS backend's in the qemu VM, connection
// setup through a cluster IP against the pod IP, and DNS queries/s; it writes its block of docs/perf.md.
// `proxyperf report` renders that block again from a run's --json results.
//
// It needs root: the sync, change and connect scenarios make network namespaces and program nftables in them
// (the dns and ipvs scenarios alone do not).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/wheelhouse-dev/wheelhouse/perf"
)

func main() {
	perf.Command{Name: "proxyperf", DefaultResults: "results/proxy.json",
		Run: func(ctx context.Context, args []string) error {
			cfg, err := parseFlags(args)
			if err != nil {
				return fmt.Errorf("%w: %w", perf.ErrUsage, err)
			}
			_, err = perf.RunProxy(ctx, cfg)
			return err
		},
		Report: func(from, out string) error {
			res, err := perf.ReadResults[perf.ProxyResults](from)
			if err != nil {
				return err
			}
			return perf.WriteProxyReport(out, perf.ProxyReport(res))
		}}.Main()
}

func parseFlags(args []string) (perf.ProxyConfig, error) {
	var cfg perf.ProxyConfig
	fs := flag.NewFlagSet("proxyperf", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: proxyperf [flags]   (as root: network namespaces and nftables)")
		fmt.Fprintln(fs.Output(), "       proxyperf report --from results/proxy.json --out ../docs/perf.md")
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "smoke run under a minute: 100 and 1,000 Services, 200 connections, 1 s of DNS per point, no IPVS (its VM takes minutes)")
	scenarios := fs.String("scenarios", "sync,change,connect,dns,ipvs", "scenarios to run (comma-separated; sync, change and connect need root)")
	syncSizes := fs.String("sync-sizes", "1000,10000", "Service counts of the full sync")
	fs.IntVar(&cfg.SyncReps, "sync-reps", 5, "full syncs per size, each in a fresh network namespace")
	fs.IntVar(&cfg.Endpoints, "endpoints", 10, "endpoints per Service")
	fs.IntVar(&cfg.ChangeServices, "change-services", 10_000, "Services programmed while one endpoint changes")
	fs.IntVar(&cfg.ChangeReps, "change-reps", 30, "timed endpoint changes")
	fs.IntVar(&cfg.ConnectSamples, "connect-samples", 2000, "timed connections per target (pod IP, cluster IP), interleaved")
	fs.IntVar(&cfg.ConnectOthers, "connect-others", 10_000, "other Services programmed in the second connection run (negative: skip it)")
	fs.IntVar(&cfg.DNSServices, "dns-services", 10_000, "Services in the DNS index")
	fs.IntVar(&cfg.DNSHeadless, "dns-headless", 1000, "how many of them are headless")
	senders := fs.String("dns-senders", "1,4,16", "concurrent DNS senders per point")
	fs.DurationVar(&cfg.DNSDuration, "dns-duration", 0, "how long each DNS point runs (default 10s)")
	fs.DurationVar(&cfg.IPVSBenchtime, "ipvs-benchtime", 0, "-benchtime of the IPVS benchmarks in the VM (default 3s: one boot, each benchmark about that long)")
	fs.DurationVar(&cfg.IPVSTimeout, "ipvs-timeout", 0, "longest run of the IPVS benchmarks in the VM (default 20m)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the connection pairs' order (default: the time)")
	fs.StringVar(&cfg.Out, "out", "", "markdown file whose proxyperf block is (re)written, e.g. ../docs/perf.md")
	fs.StringVar(&cfg.JSONOut, "json", "", "also write the raw results as JSON here")
	verbose := fs.Bool("v", true, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	cfg.Scenarios = strings.Split(*scenarios, ",")
	if cfg.SyncSizes, err = ints("--sync-sizes", *syncSizes); err != nil {
		return cfg, err
	}
	if cfg.DNSSenders, err = ints("--dns-senders", *senders); err != nil {
		return cfg, err
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Command = strings.TrimSpace("cd perf && go run ./cmd/proxyperf " + strings.Join(args, " "))
	if *quick {
		cfg = quickConfig(fs, cfg)
	}
	return cfg, nil
}

// quickConfig is the smoke run's sizes, but flags given explicitly win.
func quickConfig(fs *flag.FlagSet, cfg perf.ProxyConfig) perf.ProxyConfig {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	q := perf.QuickProxyConfig(cfg)
	keep := func(name string, p *int, v int) {
		if set[name] {
			*p = v
		}
	}
	keep("sync-reps", &q.SyncReps, cfg.SyncReps)
	keep("change-services", &q.ChangeServices, cfg.ChangeServices)
	keep("change-reps", &q.ChangeReps, cfg.ChangeReps)
	keep("connect-samples", &q.ConnectSamples, cfg.ConnectSamples)
	keep("connect-others", &q.ConnectOthers, cfg.ConnectOthers)
	keep("dns-services", &q.DNSServices, cfg.DNSServices)
	keep("dns-headless", &q.DNSHeadless, cfg.DNSHeadless)
	if !set["scenarios"] { // the VM alone takes minutes
		q.Scenarios = slices.DeleteFunc(q.Scenarios, func(s string) bool { return s == "ipvs" })
	}
	if set["sync-sizes"] {
		q.SyncSizes = cfg.SyncSizes
	}
	if set["dns-senders"] {
		q.DNSSenders = cfg.DNSSenders
	}
	if set["ipvs-benchtime"] {
		q.IPVSBenchtime = cfg.IPVSBenchtime
	}
	if set["dns-duration"] {
		q.DNSDuration = cfg.DNSDuration
	}
	return q
}

// ints parses a comma-separated list of integers.
func ints(flagName, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		out = append(out, n)
	}
	return out, nil
}
