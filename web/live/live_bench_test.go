package live_test

import (
	"strings"
	"testing"
)

// BenchmarkCoalesce measures what a change costs the hub: one op is one changed() call from a region's watch,
// while the region waits for its interval (a burst of changes on a busy page). The burst must end in exactly
// one render (reported as renders/burst).
func BenchmarkCoalesce(b *testing.B) {
	pods := newRegion(strings.Repeat(`<tr><td>web-7d9f8b6c5-x2k4q</td><td>Running</td></tr>`, 50))
	h := start(b, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.read()
	changed := pods.changed(b, 1)

	for b.Loop() {
		changed()
	}

	h.clock.waitTimer(b, interval)
	h.clock.Step(interval)
	if m := h.read(); m.T != "frag" || m.Seq != 2 {
		b.Fatalf("after the burst: %+v, want the fragment with seq 2", m)
	}
	renders := pods.renderCount() - 1
	if renders != 1 {
		b.Fatalf("renders for a burst of %d changes = %d, want 1", b.N, renders)
	}
	b.ReportMetric(float64(renders), "renders/burst")
}
