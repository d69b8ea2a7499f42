package watchcache

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestRingKeepsRecentEvents: whatever the pace of events, the window is an unbroken suffix of them (everything
// above from), between its minimum and maximum size, holding at least the minimum and, below the maximum,
// every event younger than the age.
func TestRingKeepsRecentEvents(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		least := rapid.IntRange(1, 8).Draw(rt, "min")
		most := rapid.IntRange(least, 64).Draw(rt, "max")
		const age = 10 * time.Second
		r := newRing(least, most, age)
		now := time.Unix(0, 0)
		var times []time.Time // of every event pushed; event i has revision i+1
		for i := range rapid.IntRange(1, 300).Draw(rt, "events") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "gap ms")) * time.Millisecond)
			r.push(Event{Revision: int64(i + 1)}, now)
			times = append(times, now)

			var got []int64
			r.after(r.from, func(ev Event) { got = append(got, ev.Revision) })
			total := int64(len(times))
			if len(got) != r.n || int64(len(got)) != total-r.from {
				rt.Fatalf("after %d events: window %v from %d, want every revision above it", total, got, r.from)
			}
			for j, rev := range got {
				if rev != r.from+int64(j)+1 {
					rt.Fatalf("window %v from %d is not an unbroken suffix", got, r.from)
				}
			}
			if r.size() < least || r.size() > most || r.n < min(len(times), least) {
				rt.Fatalf("size %d holding %d of %d events, want size in [%d, %d] holding at least %d", r.size(), r.n,
					len(times), least, most, min(len(times), least))
			}
			// Below the maximum nothing younger than age was dropped.
			if r.from > 0 && r.size() < most && now.Sub(times[r.from-1]) < age {
				rt.Fatalf("event %d (%v old) dropped with the window at %d of %d", r.from, now.Sub(times[r.from-1]), r.size(), most)
			}
		}
	})
}

// TestRingShrinks: once a burst has aged out, the window gives its memory back.
func TestRingShrinks(t *testing.T) {
	r := newRing(4, 1024, time.Minute)
	now := time.Unix(0, 0)
	for i := range 1000 {
		r.push(Event{Revision: int64(i + 1)}, now)
	}
	if r.size() != 1024 || r.n != 1000 {
		t.Fatalf("after a burst: size %d holding %d, want 1024 holding all 1000", r.size(), r.n)
	}
	for i := range 2000 {
		now = now.Add(time.Minute)
		r.push(Event{Revision: int64(1001 + i)}, now)
	}
	if r.size() != 4 {
		t.Fatalf("after the burst aged out: size %d, want the minimum 4", r.size())
	}
}
