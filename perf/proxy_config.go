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

// The Service proxy and cluster DNS harness's scenarios, by the names --scenarios takes.
const (
	scSync    = "sync"    // nftables full sync of many Services, each repetition in a fresh network namespace
	scChange  = "change"  // nftables: one endpoint change with many Services programmed
	scIPVS    = "ipvs"    // the IPVS backend's benchmarks, in the VM
	scConnect = "connect" // connection setup through a cluster IP versus to the pod IP
	scDNS     = "dns"     // cluster DNS queries/s
)

var proxyScenarios = []string{scSync, scChange, scIPVS, scConnect, scDNS}

// rootScenarios are the scenarios that make network namespaces and program nftables (root only).
var rootScenarios = []string{scSync, scChange, scConnect}

// ProxyConfig is one run of the Service proxy and cluster DNS harness (cmd/proxyperf). Zero fields take the
// defaults noted.
type ProxyConfig struct {
	// Scenarios to run, in the order of proxyScenarios whatever the order given (default all).
	Scenarios []string

	// SyncSizes are the Service counts of the full sync (default 1,000 and 10,000), each timed SyncReps times
	// (default 5) in a fresh network namespace. Every Service has Endpoints endpoints (default 10).
	SyncSizes []int
	SyncReps  int
	Endpoints int
	// ChangeServices Services are programmed (default 10,000), then ChangeReps times (default 30) one endpoint
	// of one Service (a different one each time) is replaced and the change synced.
	ChangeServices int
	ChangeReps     int

	// ConnectSamples connections per target (default 2,000), interleaved pod IP / cluster IP, with only the
	// measured Service programmed and then with ConnectOthers other Services (default 10,000; negative: skip).
	ConnectSamples int
	ConnectOthers  int

	// DNSServices Services in the DNS index (default 10,000), DNSHeadless of them headless with an
	// EndpointSlice of Endpoints endpoints (default 1,000). Each query kind is sent for DNSDuration (default 10 s)
	// by each number of concurrent senders in DNSSenders (default 1, 4, 16).
	DNSServices int
	DNSHeadless int
	DNSSenders  []int
	DNSDuration time.Duration

	// IPVSBenchtime is the IPVS benchmarks' -benchtime in the VM (default 3 s: the VM boots once, each benchmark
	// inside runs about that long); IPVSTimeout bounds the whole run (default 20 min).
	IPVSBenchtime time.Duration
	IPVSTimeout   time.Duration

	// Out is the markdown file whose proxyperf block is (re)written (empty: none); JSONOut gets the raw results.
	Out, JSONOut string
	// Command is the reproduce command printed in the report; Quick marks a smoke run.
	Command string
	Quick   bool
	// Seed seeds the order of each interleaved pair of connections (default: the time).
	Seed   int64
	Logger *slog.Logger
}

// QuickProxyConfig shrinks cfg to a smoke run of under a minute.
func QuickProxyConfig(cfg ProxyConfig) ProxyConfig {
	cfg.Quick = true
	cfg.SyncSizes, cfg.SyncReps = []int{100, 1000}, 2
	cfg.ChangeServices, cfg.ChangeReps = 1000, 5
	cfg.ConnectSamples, cfg.ConnectOthers = 200, 1000
	cfg.DNSServices, cfg.DNSHeadless, cfg.DNSSenders, cfg.DNSDuration = 1000, 100, []int{1, 4}, time.Second
	cfg.IPVSBenchtime = time.Second
	return cfg
}

func (cfg *ProxyConfig) setDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&cfg.SyncReps, 5)
	def(&cfg.Endpoints, 10)
	def(&cfg.ChangeServices, 10_000)
	def(&cfg.ChangeReps, 30)
	def(&cfg.ConnectSamples, 2000)
	def(&cfg.ConnectOthers, 10_000)
	def(&cfg.DNSServices, 10_000)
	def(&cfg.DNSHeadless, 1000)
	if len(cfg.Scenarios) == 0 {
		cfg.Scenarios = proxyScenarios
	}
	if len(cfg.SyncSizes) == 0 {
		cfg.SyncSizes = []int{1000, 10_000}
	}
	if len(cfg.DNSSenders) == 0 {
		cfg.DNSSenders = []int{1, 4, 16}
	}
	if cfg.DNSDuration == 0 {
		cfg.DNSDuration = 10 * time.Second
	}
	if cfg.IPVSBenchtime == 0 {
		cfg.IPVSBenchtime = 3 * time.Second
	}
	if cfg.IPVSTimeout == 0 {
		cfg.IPVSTimeout = 20 * time.Minute
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// maxProxyServices bounds every Service count: cluster IPs are numbered within 10.96.0.0/12 and the fake
// endpoints within 10.244.16.0/20.
const maxProxyServices = 500_000

// Validate reports a configuration that cannot run.
func (cfg ProxyConfig) Validate() error {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(proxyScenarios, s) {
			return fmt.Errorf("proxyperf: unknown scenario %q (want some of %s)", s, strings.Join(proxyScenarios, ","))
		}
	}
	for _, n := range cfg.SyncSizes {
		if n < 1 || n > maxProxyServices {
			return fmt.Errorf("proxyperf: sync size %d: want 1 to %d Services", n, maxProxyServices)
		}
	}
	for _, k := range cfg.DNSSenders {
		if k < 1 || k > 1024 {
			return fmt.Errorf("proxyperf: %d DNS senders: want 1 to 1024", k)
		}
	}
	switch {
	case cfg.SyncReps < 1 || cfg.ChangeReps < 1 || cfg.ConnectSamples < 1:
		return errors.New("proxyperf: --sync-reps, --change-reps and --connect-samples must be positive")
	case cfg.Endpoints < 1 || cfg.Endpoints > 1000:
		return errors.New("proxyperf: --endpoints: want 1 to 1000")
	case cfg.ChangeServices < 1 || cfg.ChangeServices > maxProxyServices || cfg.ConnectOthers > maxProxyServices:
		return fmt.Errorf("proxyperf: at most %d Services", maxProxyServices)
	case cfg.DNSServices < 1 || cfg.DNSHeadless < 0 || cfg.DNSHeadless > cfg.DNSServices || cfg.DNSServices > maxProxyServices:
		return errors.New("proxyperf: want 1 <= --dns-services <= 500000 and 0 <= --dns-headless <= --dns-services")
	case cfg.DNSDuration < 100*time.Millisecond:
		return errors.New("proxyperf: --dns-duration: at least 100ms")
	}
	return nil
}

// runs reports whether the scenario is selected.
func (cfg ProxyConfig) runs(scenario string) bool { return slices.Contains(cfg.Scenarios, scenario) }

// needsRoot reports whether a selected scenario makes network namespaces.
func (cfg ProxyConfig) needsRoot() bool {
	return slices.ContainsFunc(cfg.Scenarios, func(s string) bool { return slices.Contains(rootScenarios, s) })
}
