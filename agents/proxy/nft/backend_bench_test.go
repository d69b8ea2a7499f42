package nft

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// BenchmarkFullSync: the first Sync of n services with 10 endpoints each into a namespace without the table.
func BenchmarkFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			node := newNS(b, b.TempDir(), "node")
			desired := manyServices(n, 10)
			for b.Loop() {
				b.StopTimer()
				be := newBackend(b, node, Config{PodCIDR: podCIDR})
				if err := be.Cleanup(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := be.Sync(b.Context(), desired); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(be.lastBatch), "msgs/op")
			}
		})
	}
}

// BenchmarkOneEndpointChange: with 10,000 services of 10 endpoints programmed, a Sync in which one service's
// endpoint is replaced (a different service each time).
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchmarkOneEndpointChange(b, n) })
	}
}

func benchmarkOneEndpointChange(b *testing.B, n int) {
	be := newBackend(b, newNS(b, b.TempDir(), "node"), Config{PodCIDR: podCIDR})
	desired := manyServices(n, 10)
	if err := be.Sync(b.Context(), desired); err != nil {
		b.Fatal(err)
	}
	keys := make([]proxy.Key, 0, n)
	for k := range desired {
		keys = append(keys, k)
	}
	i := 0
	for b.Loop() {
		changeOneEndpoint(desired, keys[i%n], i)
		i++
		if err := be.Sync(b.Context(), desired); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(be.lastBatch), "msgs/op")
}

// syncer is a backend the benchmarks drive: one table (Backend) or several (Sharded).
type syncer interface {
	Sync(ctx context.Context, desired proxy.State) error
	Cleanup(ctx context.Context) error
}

// BenchmarkShardedFullSync: BenchmarkFullSync with the services spread over DefaultShards tables.
func BenchmarkShardedFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			node := newNS(b, b.TempDir(), "node")
			desired := manyServices(n, 10)
			for b.Loop() {
				b.StopTimer()
				var s syncer = newSharded(b, node, DefaultShards)
				if err := s.Cleanup(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.Sync(b.Context(), desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShardedOneEndpointChange: BenchmarkOneEndpointChange with the services spread over DefaultShards
// tables: a change makes the kernel check its own table only.
func BenchmarkShardedOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			s := newSharded(b, newNS(b, b.TempDir(), "node"), DefaultShards)
			desired := manyServices(n, 10)
			if err := s.Sync(b.Context(), desired); err != nil {
				b.Fatal(err)
			}
			keys := slices.SortedFunc(maps.Keys(desired), proxy.Key.Compare)
			i := 0
			for b.Loop() {
				changeOneEndpoint(desired, keys[i%n], i)
				i++
				if err := s.Sync(b.Context(), desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// changeOneEndpoint replaces the first endpoint of k's virtual service with a new address (the i-th).
func changeOneEndpoint(desired proxy.State, k proxy.Key, i int) {
	vs := desired[k]
	vs.Destinations = append([]netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), 8080)},
		vs.Destinations[1:]...)
	slices.SortFunc(vs.Destinations, netip.AddrPort.Compare) // as the model has them
	desired[k] = vs
}

// BenchmarkEndpointAdded: with n services of 10 endpoints programmed, a Sync in which one service gains an
// endpoint and another loses one (their map elements move to other chains: the kernel validates the table).
func BenchmarkEndpointAdded(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, shards := range []int{1, DefaultShards} {
			b.Run(fmt.Sprintf("services=%d/tables=%d", n, shards), func(b *testing.B) {
				node := newNS(b, b.TempDir(), "node")
				var s syncer = newBackend(b, node, Config{PodCIDR: podCIDR})
				if shards > 1 {
					s = newSharded(b, node, shards)
				}
				desired := manyServices(n, 10)
				if err := s.Sync(b.Context(), desired); err != nil {
					b.Fatal(err)
				}
				keys := slices.SortedFunc(maps.Keys(desired), proxy.Key.Compare)
				i := 0
				for b.Loop() {
					grow, shrink := keys[i%n], keys[(i+n/2)%n]
					vs := desired[grow]
					vs.Destinations = append(slices.Clone(vs.Destinations), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), 8080))
					desired[grow] = vs
					vs = desired[shrink]
					vs.Destinations = slices.Clone(vs.Destinations[1:])
					desired[shrink] = vs
					i++
					if err := s.Sync(b.Context(), desired); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
