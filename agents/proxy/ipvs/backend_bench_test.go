package ipvs

import (
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The kernel benchmarks need IPVS: BenchmarkVM runs them in Debian's kernel under qemu (software emulation: slower
// than a real machine, by a factor the nft backend's benchmarks, run in the VM too, would show).

// quiet is a backend configuration whose logger discards (benchmarks measure the backend, not the test log).
var quiet = Config{PodCIDR: podCIDR, Logger: slog.New(slog.DiscardHandler)}

// BenchmarkFullSync: the first Sync of n services with 10 endpoints each, after a Cleanup.
func BenchmarkFullSync(b *testing.B) {
	requireIPVS(b)
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			be := newBackend(b, nodeNS(b), quiet)
			desired := manyServices(n, 10)
			for b.Loop() {
				b.StopTimer()
				if err := be.Cleanup(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := be.Sync(b.Context(), desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProgrammed measures Syncs with 10,000 services of 10 endpoints programmed (once, for its three
// sub-benchmarks: programming them takes minutes under software emulation).
//
//   - OneEndpointChange: one service's endpoint replaced (a different service each time): the read back of the
//     services (one dump) and of the dummy's addresses, the changed service's destinations, one added and one
//     drained (and the previous change's drained one deleted);
//   - NoChange: a Sync that changes nothing — the cost of Sync's read back alone;
//   - Resync: every service's destinations and the table's sets read back, nothing to repair.
func BenchmarkProgrammed(b *testing.B) {
	requireIPVS(b)
	const n = 10000
	be := newBackend(b, nodeNS(b), quiet)
	desired := manyServices(n, 10)
	if err := be.Sync(b.Context(), desired); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("OneEndpointChange/services=%d", n), func(b *testing.B) {
		keys := slices.SortedFunc(maps.Keys(desired), proxy.Key.Compare)
		i := 0
		for b.Loop() {
			k := keys[i%n]
			vs := desired[k]
			vs.Destinations = append([]netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), 8080)},
				vs.Destinations[1:]...)
			slices.SortFunc(vs.Destinations, netip.AddrPort.Compare)
			desired[k] = vs
			i++
			if err := be.Sync(b.Context(), desired); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(be.last.destReads), "dest-reads/op")
		b.ReportMetric(float64(len(be.last.changes)), "changes/op")
	})
	b.Run(fmt.Sprintf("NoChange/services=%d", n), func(b *testing.B) {
		for b.Loop() {
			if err := be.Sync(b.Context(), desired); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("Resync/services=%d", n), func(b *testing.B) {
		for b.Loop() {
			if err := be.Resync(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVM runs the kernel benchmarks above in Debian's kernel under qemu, with this run's -test.benchtime and
// -test.count, echoing the guest's lines to standard output as they come (a benchmark's log is cut to 10 lines),
// so that its result lines read as this run's (make perf-proxy and benchstat read them).
func BenchmarkVM(b *testing.B) {
	args := []string{"-test.run", "^$", "-test.bench", "^Benchmark(FullSync|Programmed)$", "-test.benchmem"}
	for _, name := range []string{"test.benchtime", "test.count"} {
		if f := flag.Lookup(name); f != nil {
			args = append(args, "-"+name, f.Value.String())
		}
	}
	timeout := 30 * time.Minute
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > time.Minute {
			timeout = d - time.Minute
		}
	}
	for b.Loop() {
		runVM(b, args, timeout, func(line string) { fmt.Println(line) })
	}
}
