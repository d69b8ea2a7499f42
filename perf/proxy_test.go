package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

// proxyFixture is a run's results as the harness records them: both nftables sizes, one change, IPVS rows from
// the VM, both connection runs and two DNS points.
func proxyFixture() *ProxyResults {
	sync := func(mode string, inVM bool, n int, build time.Duration, syncs ...time.Duration) ProxySyncResult {
		s := ProxySyncResult{Mode: mode, InVM: inVM, Services: n, Endpoints: 10, VirtualServices: n, Reps: len(syncs), Sync: syncs}
		for range syncs {
			if build > 0 {
				s.Build = append(s.Build, build)
			}
		}
		s.summarize()
		return s
	}
	ipvsSync := sync(modeIPVS, true, 10_000, 0, 4*time.Second)
	ipvsSync.Iterations = 1
	change := ProxyChangeResult{Mode: modeNFT, Services: 10_000, Endpoints: 10, Reps: 4,
		Syncs: []time.Duration{60 * ms, 62 * ms, 70 * ms, 90 * ms}, Builds: []time.Duration{30 * ms, 30 * ms, 30 * ms, 30 * ms}}
	change.summarize()
	ipvsChange := ProxyChangeResult{Mode: modeIPVS, InVM: true, Services: 10_000, Endpoints: 10, Reps: 1, Iterations: 40,
		Syncs: []time.Duration{20 * ms}}
	ipvsChange.summarize()
	return &ProxyResults{
		Started: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Finished: time.Date(2026, 12, 2, 3, 7, 30, 0, time.UTC),
		Command: "cd perf && go run ./cmd/proxyperf", LoadAvg: "0.10 0.20 0.30",
		Machine: Machine{CPUs: 2, CPUModel: "Test CPU", Kernel: "6.18", Go: "go1.26", Commit: "abc123"},
		Shape: ProxyShape{SyncSizes: []int{1000, 10_000}, SyncReps: 3, Endpoints: 10, ChangeServices: 10_000, ChangeReps: 4,
			ConnectSamples: 2000, ConnectOthers: 10_000, DNSServices: 10_000, DNSHeadless: 1000, DNSSenders: []int{1, 4},
			DNSDuration: 10 * time.Second},
		Sync: []ProxySyncResult{
			sync(modeNFT, false, 1000, 5*ms, 100*ms, 110*ms, 120*ms),
			sync(modeNFT, false, 10_000, 50*ms, 1100*ms, 1200*ms, 1300*ms),
			ipvsSync,
		},
		Change: []ProxyChangeResult{change, ipvsChange},
		IPVS: &ProxyIPVSResult{Runner: "go test -bench ^BenchmarkVM$", Took: 5 * time.Minute,
			Lines: []string{"BenchmarkFullSync/services=10000-2 1 4000000000 ns/op"}},
		Connect: []ProxyConnectResult{
			{OtherServices: 0, Samples: 2000, Ratio: 1.05,
				Direct:    ProxyLatency{P50: 100 * time.Microsecond, P99: 200 * time.Microsecond},
				ClusterIP: ProxyLatency{P50: 105 * time.Microsecond, P99: 220 * time.Microsecond}},
			{OtherServices: 10_000, Samples: 2000, Ratio: 1.2,
				Direct:    ProxyLatency{P50: 100 * time.Microsecond, P99: 200 * time.Microsecond},
				ClusterIP: ProxyLatency{P50: 120 * time.Microsecond, P99: 260 * time.Microsecond, Errors: 1, FirstErr: "connection reset | by peer"}},
		},
		DNS: &ProxyDNSResult{Services: 10_000, Headless: 1000, Endpoints: 10, CPUs: 2, Duration: 10 * time.Second,
			Runs: []ProxyDNSRun{
				{Kind: dnsKindA, Senders: 1, Queries: 200_000, QPS: 20_000, P50: 45 * time.Microsecond, P99: 90 * time.Microsecond, CPU: 1.5},
				{Kind: dnsKindNX, Senders: 4, Queries: 400_000, QPS: 40_000, P50: 90 * time.Microsecond, P99: 300 * time.Microsecond, CPU: 1.9},
			}},
	}
}

func TestProxyReport(t *testing.T) {
	md := ProxyReport(proxyFixture())
	for _, want := range []string{
		"## The Service proxy and cluster DNS (proxyperf)",
		"Took 7m30s.", // the run's length
		// Goals: nftables full sync is Build + Sync, one change too; both over their goals.
		"| nftables: 10,000 Services × 10 endpoints fully synced ≤ 1 s | 1.25 s (Build 50.00 ms + Sync 1.20 s) | 1.25× | **NO** |",
		"| nftables: one endpoint change at 10,000 Services applied ≤ 50.00 ms | 96.00 ms (Build 30.00 ms + Sync 66.00 ms; p99 120.00 ms) | 1.92× | **NO** |",
		"| ipvs (in the VM, TCG software emulation: slower than real hardware): 10,000 Services × 10 endpoints fully synced ≤ 1 s | 4 s (Sync alone) | 4.00× | not judged (emulated) |",
		"| ipvs (in the VM, TCG software emulation: slower than real hardware): one endpoint change at 10,000 Services applied ≤ 50.00 ms | 20.00 ms (Sync alone; p99 —) | 0.40× | not judged (emulated) |",
		"cluster IP p50 / pod IP p50 ≤ 1.10 | 1.050 (105 µs vs 100 µs) | 0.95× | yes |",
		"10,000 other Services programmed): cluster IP p50 / pod IP p50 ≤ 1.10 | 1.200 (120 µs vs 100 µs) | 1.09× | **NO** |",
		// Tables.
		"| nftables | 1,000 × 10 | 1,000 | 3 | 5.00 ms | 110.00 ms (100.00 ms – 120.00 ms) | **115.00 ms** (105.00 ms – 125.00 ms) | 0.12× |  |",
		"| 10,000 × 10 | 10,000 | 1 benchmark line, 1 iteration |",
		"| 4 s (Sync alone) | 4.00× | not judged (emulated) |",
		"BenchmarkFullSync/services=10000-2 1 4000000000 ns/op",
		"0 / 1: connection reset \\| by peer |",
		"| A, Service with a cluster IP | 1 | **20,000** | 45 µs | 90 µs | 1.50 | 0 |",
		"### Method and caveats",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestProxyReportNotMeasured(t *testing.T) {
	res := proxyFixture()
	res.Quick = true
	res.Sync, res.Change = res.Sync[:2], res.Change[:1]
	res.Sync[1].Services = 1000 // a quick run's size
	res.IPVS = &ProxyIPVSResult{NotMeasured: "agents/proxy/ipvs does not exist yet"}
	res.Connect, res.DNS = nil, nil
	md := ProxyReport(res)
	for _, want := range []string{
		"**Smoke run (--quick)**",
		"| ipvs: full sync and one endpoint change | not measured: agents/proxy/ipvs does not exist yet | — | — |",
		"| ipvs | not measured: agents/proxy/ipvs does not exist yet |",
		"fully synced ≤ 1 s (the goal is for 10,000)",
		"### Connection setup through a cluster IP (nftables)\n\nNot measured.",
		"### Cluster DNS queries/s\n\nNot measured.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// TestProxyReportBlock: the block replaces only itself in docs/perf.md, and storeperf keeps it.
func TestProxyReportBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.md")
	const doc = "# Store report\n\n" + dashBegin + "\ndash\n" + dashEnd + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"first", "second"} {
		if err := WriteProxyReport(path, section); err != nil {
			t.Fatal(err)
		}
	}
	want := doc + "\n" + proxyBegin + "\nsecond\n" + proxyEnd + "\n"
	got, _ := os.ReadFile(path)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("after two writes (-want +got):\n%s", diff)
	}
	if err := WriteStoreReport(path, "# New store report\n"); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	if !strings.Contains(string(got), proxyBegin+"\nsecond\n"+proxyEnd) || !strings.Contains(string(got), dashBegin) {
		t.Errorf("storeperf dropped a block:\n%s", got)
	}
}

func TestParseIPVSBench(t *testing.T) {
	out := `goos: linux
    vm_test.go:36: BenchmarkFullSync/services=1000         	       3	 412345678 ns/op	  1234 B/op
    vm_test.go:36: BenchmarkFullSync/services=10000        	       1	4123456789 ns/op
    vm_test.go:36: BenchmarkFullSync/services=1000-2       	       2	 400000000 ns/op
    vm_test.go:36: BenchmarkOneEndpointChange/services=10000 	      50	  21000000 ns/op	 3.000 dest-reads/op
    vm_test.go:36: BenchmarkNoChange/services=10000        	     100	   9000000 ns/op
BenchmarkVM-2   	       1	300000000000 ns/op
`
	syncs, change := parseIPVSBench([]byte(out), 10)
	type row struct {
		Services, Iterations int
		Median               time.Duration
	}
	var got []row
	for _, s := range syncs {
		if s.Mode != modeIPVS || !s.InVM || s.Endpoints != 10 {
			t.Errorf("sync result %+v: want ipvs, in the VM, 10 endpoints", s)
		}
		got = append(got, row{s.Services, s.Iterations, s.SyncMedian})
	}
	want := []row{{1000, 5, 406172839}, {10_000, 1, 4123456789}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("full syncs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"BenchmarkFullSync/services=1000         	       3	 412345678 ns/op	  1234 B/op",
		"BenchmarkFullSync/services=10000        	       1	4123456789 ns/op",
		"BenchmarkFullSync/services=1000-2       	       2	 400000000 ns/op",
		"BenchmarkOneEndpointChange/services=10000 	      50	  21000000 ns/op	 3.000 dest-reads/op",
		"BenchmarkNoChange/services=10000        	     100	   9000000 ns/op"}, benchLines([]byte(out))); diff != "" {
		t.Errorf("benchLines (-want +got):\n%s", diff)
	}
	if change == nil || change.Services != 10_000 || change.Iterations != 50 || change.TotalP50 != 21*ms {
		t.Errorf("change = %+v, want 10,000 Services, 50 iterations, 21 ms", change)
	}
}

func TestProxySummaries(t *testing.T) {
	s := ProxySyncResult{Build: []time.Duration{10, 30, 20}, Sync: []time.Duration{100, 300, 200}}
	s.summarize()
	if s.BuildMedian != 20 || s.SyncMedian != 200 || s.SyncMin != 100 || s.SyncMax != 300 || s.TotalMedian != 220 ||
		s.TotalMin != 110 || s.TotalMax != 330 {
		t.Errorf("sync summary %+v", s)
	}
	if s.Sync[0] != 100 || s.Sync[1] != 300 {
		t.Errorf("summarize reordered the samples: %v", s.Sync)
	}
	c := ProxyChangeResult{Builds: []time.Duration{1, 1, 1, 1}, Syncs: []time.Duration{40, 10, 30, 20}}
	c.summarize()
	if c.SyncP50 != 25 || c.SyncP99 != 40 || c.SyncMax != 40 || c.TotalP50 != 26 || c.TotalP99 != 41 {
		t.Errorf("change summary %+v", c)
	}
	if c.Syncs[0] != 40 {
		t.Errorf("summarize reordered the samples: %v", c.Syncs)
	}
}

func TestProxyConfig(t *testing.T) {
	cfg := ProxyConfig{}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if !cfg.needsRoot() {
		t.Error("the default scenarios need root")
	}
	dnsOnly := ProxyConfig{Scenarios: []string{scDNS, scIPVS}}
	if dnsOnly.needsRoot() {
		t.Error("dns and ipvs need no root")
	}
	for _, bad := range []ProxyConfig{
		{Scenarios: []string{"iptables"}},
		{SyncSizes: []int{0}},
		{DNSSenders: []int{0}},
		{DNSHeadless: 20_000},
	} {
		bad.setDefaults()
		if bad.Validate() == nil {
			t.Errorf("%+v is valid", bad)
		}
	}
}

func TestProxyObjects(t *testing.T) {
	o := makeProxyObjects(0, 20, 10, 10)
	st := o.build()
	if len(st) != 18 { // services 0 and 10 are headless
		t.Fatalf("%d virtual services, want 18", len(st))
	}
	for _, vs := range st {
		if len(vs.Destinations) != 10 {
			t.Errorf("%s has %d destinations, want 10", vs.Service, len(vs.Destinations))
		}
	}
	before := st[o.build().Sorted()[0].Key]
	o.replaceEndpoint(1, 7)
	after := o.build()[before.Key]
	if before.Equal(after) {
		t.Error("replacing an endpoint changed nothing")
	}
	if serviceIP(0).String() != "10.96.0.16" || serviceIP(300).String() != "10.96.1.60" {
		t.Errorf("service IPs %v, %v", serviceIP(0), serviceIP(300))
	}
}
