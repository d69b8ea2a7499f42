package store

import (
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// value1K is a 1 KB object, the size the perf goals are stated in.
var value1K = []byte(fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"},"spec":{"pad":%q}}`, make([]byte, 900)))

// BenchmarkCreate measures creates/s with 1, 16 and 64 concurrent writers (b.SetParallelism × GOMAXPROCS).
func BenchmarkCreate(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openTest(b)
			var seq atomic.Int64
			runWriters(b, writers, func() {
				n := seq.Add(1)
				if _, err := s.Create(b.Context(), key("bench", fmt.Sprintf("ns%d", n%10), fmt.Sprintf("pod-%d", n)), value1K); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkUpdateCAS measures compare-and-swap updates/s; each writer owns one key and knows its revision.
func BenchmarkUpdateCAS(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openTest(b)
			var seq atomic.Int64
			runWriters(b, writers, nil, func() func() {
				k := key("bench", "ns", fmt.Sprintf("pod-%d", seq.Add(1)))
				rev := mustCreate(b, s, k, string(value1K)).Revision
				return func() {
					o, err := s.Update(b.Context(), k, value1K, rev)
					if err != nil {
						b.Fatal(err)
					}
					rev = o.Revision
				}
			})
		})
	}
}

// runWriters runs b.N operations spread over `writers` goroutines. op is shared; or perWriter makes one op
// per goroutine.
func runWriters(b *testing.B, writers int, op func(), perWriter ...func() func()) {
	b.SetParallelism(max(1, writers/max(1, runtime.GOMAXPROCS(0))))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		f := op
		if f == nil {
			f = perWriter[0]()
		}
		for pb.Next() {
			f()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

func BenchmarkGet(b *testing.B) {
	s := openTest(b)
	k := key("bench", "ns", "pod")
	mustCreate(b, s, k, string(value1K))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(b.Context(), k); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkList10k lists 10,000 1 KB objects in one call.
func BenchmarkList10k(b *testing.B) {
	s := openTest(b)
	fill(b, s, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := s.List(b.Context(), ListOptions{Cluster: "bench", Resource: "pods"})
		if err != nil || len(res.Items) != 10000 {
			b.Fatalf("%d items, %v", len(res.Items), err)
		}
	}
}

// BenchmarkListPaged10k lists 10,000 objects in pages of 500; every page after the first reads history at the
// first page's revision.
func BenchmarkListPaged10k(b *testing.B) {
	s := openTest(b)
	fill(b, s, 10000)
	b.ResetTimer()
	for b.Loop() {
		opts, n := ListOptions{Cluster: "bench", Resource: "pods", Limit: 500}, 0
		for {
			res, err := s.List(b.Context(), opts)
			if err != nil {
				b.Fatal(err)
			}
			n += len(res.Items)
			if opts.Continue = res.Continue; opts.Continue == "" {
				break
			}
		}
		if n != 10000 {
			b.Fatalf("%d items", n)
		}
	}
}

func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	done := make(chan error, 32)
	for w := range 32 {
		go func() {
			for i := w; i < n; i += 32 {
				if _, err := s.Create(b.Context(), key("bench", fmt.Sprintf("ns%d", i%10), fmt.Sprintf("pod-%05d", i)), value1K); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 32 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchLatency measures commit-to-delivery latency to a watcher on a SECOND store instance (its own
// pool and LISTEN connection), so delivery goes through NOTIFY and the history table; polling is off.
func BenchmarkWatchLatency(b *testing.B) {
	url := pgtest.NewDatabase(b)
	writer := openURL(b, url)
	reader := openURL(b, url, func(c *Config) { c.PollInterval = time.Hour })
	w, err := reader.Watch(b.Context(), WatchOptions{Cluster: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		began := time.Now()
		o, err := writer.Create(b.Context(), key("bench", "ns", fmt.Sprintf("p%d", i)), value1K)
		if err != nil {
			b.Fatal(err)
		}
		committed := time.Since(began)
		for ev := range w.Events() {
			if ev.Revision() == o.Revision {
				break
			}
		}
		lat = append(lat, time.Since(began)-committed/2) // from (about) the commit
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
