package tunnel

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestBackoffProperties: delays stay within [d/2, d] of the doubling schedule capped at Max, and a connection
// that stayed up for ResetAfter starts the schedule over.
func TestBackoffProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		jitters := rapid.SliceOfN(rapid.Float64Range(0, 0.999999), 1, 40).Draw(rt, "jitters")
		ups := rapid.SliceOfN(rapid.SampledFrom([]time.Duration{0, time.Second, 59 * time.Second, time.Minute, time.Hour}),
			len(jitters), len(jitters)).Draw(rt, "ups")
		i := 0
		b := Backoff{Jitter: func() float64 { return jitters[i] }}
		want := time.Duration(0) // the undithered delay this attempt should have
		for ; i < len(jitters); i++ {
			switch {
			case want == 0 || ups[i] >= time.Minute:
				want = time.Second
			default:
				want = min(2*want, 30*time.Second)
			}
			got := b.Next(ups[i])
			if got < want/2 || got > want {
				rt.Fatalf("attempt %d (up %v): delay %v outside [%v, %v]", i, ups[i], got, want/2, want)
			}
		}
	})
}

func TestBackoffDefaults(t *testing.T) {
	b := Backoff{Jitter: func() float64 { return 0 }}
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next(0))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
	if d := b.Next(time.Minute); d != time.Second {
		t.Fatalf("after a minute up: %v, want 1s", d)
	}
}
