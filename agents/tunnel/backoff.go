package tunnel

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay between the agent's connection attempts: Initial doubling up to Max, each delay
// jittered down by up to half (so agents that lost the same server do not return in lockstep), and started over
// after a connection that stayed up for ResetAfter. The zero value uses the defaults (1 s, 30 s, 1 min).
// Not safe for concurrent use; one Serve owns one Backoff.
type Backoff struct {
	Initial, Max, ResetAfter time.Duration
	// Jitter returns a number in [0, 1) (default math/rand/v2.Float64); tests inject their own.
	Jitter func() float64

	next time.Duration // the undithered delay of the next attempt; 0 before the first
}

func (b *Backoff) setDefaults() {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = time.Minute
	}
	if b.Jitter == nil {
		b.Jitter = rand.Float64
	}
}

// Next returns the delay before the next attempt, given how long the last connection was up (0 when the attempt
// failed). The result is in [d/2, d] where d is Initial·2^k capped at Max, k counting the failures since the
// last connection that lasted ResetAfter.
func (b *Backoff) Next(up time.Duration) time.Duration {
	b.setDefaults()
	if b.next == 0 || up >= b.ResetAfter {
		b.next = b.Initial
	}
	d := b.next
	b.next = min(2*b.next, b.Max)
	j := b.Jitter()
	if j < 0 || j >= 1 {
		j = 0
	}
	return d - time.Duration(float64(d/2)*j)
}
