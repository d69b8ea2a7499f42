package proxy

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// callLog is a Backend that records its calls in memory and fails Sync while told to: the loop's own behaviour
// (rate limit, retries, resyncs) is what these tests check; the real backends have their own tests on the kernel.
type callLog struct {
	mu       sync.Mutex
	calls    chan string
	applied  []State
	failures int // Syncs still to fail
}

func (b *callLog) Sync(_ context.Context, desired State) error {
	b.mu.Lock()
	fail := b.failures > 0
	if fail {
		b.failures--
	} else {
		b.applied = append(b.applied, desired)
	}
	b.mu.Unlock()
	if fail {
		b.calls <- "sync failed"
		return errors.New("the kernel refused a rule")
	}
	b.calls <- "sync"
	return nil
}

func (b *callLog) Resync(context.Context) error  { b.calls <- "resync"; return nil }
func (b *callLog) Cleanup(context.Context) error { return nil }
func (b *callLog) Close() error                  { return nil }

func (b *callLog) fail(n int) {
	b.mu.Lock()
	b.failures = n
	b.mu.Unlock()
}

func (b *callLog) last() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied[len(b.applied)-1]
}

// loopEnv runs a Loop on a fake clock: MinSync 1 s, FullSync 1 min.
type loopEnv struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	b      *callLog
	l      *Loop
	mu     sync.Mutex
	ports  uint16 // the desired state: one virtual service on this port
	errors []error
}

func newLoopEnv(t *testing.T) *loopEnv {
	e := &loopEnv{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), b: &callLog{calls: make(chan string, 100)}, ports: 80}
	l, err := NewLoop(LoopConfig{Backend: e.b, Clock: e.clk, MinSync: time.Second, FullSync: time.Minute,
		Desired: func() (State, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			k := Key{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: "TCP", Port: e.ports}
			return State{k: {Key: k, Kind: ClusterIP}}, nil
		},
		OnError: func(err error) { e.mu.Lock(); e.errors = append(e.errors, err); e.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// next is the backend's next call (within 10 s of real time: the loop runs in its own goroutine).
func (e *loopEnv) next() string {
	e.t.Helper()
	select {
	case c := <-e.b.calls:
		return c
	case <-time.After(10 * time.Second):
		e.t.Fatal("the loop made no call to the backend")
		return ""
	}
}

// idleWith waits until the loop waits on waiters timers of the fake clock (1: the full-sync ticker only, it has
// nothing to do; 2: and a sync waiting for its time), then checks that the backend was not called meanwhile.
func (e *loopEnv) idleWith(waiters int) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond) // polling: the loop's goroutine arms its timer
	defer tick.Stop()
	for e.clk.Waiters() != waiters {
		select {
		case <-deadline:
			e.t.Fatalf("the loop waits on %d timers, want %d", e.clk.Waiters(), waiters)
		case <-tick.C:
		}
	}
	select {
	case c := <-e.b.calls:
		e.t.Fatalf("unexpected backend call %q", c)
	default:
	}
}

func (e *loopEnv) want(calls ...string) {
	e.t.Helper()
	for _, w := range calls {
		if got := e.next(); got != w {
			e.t.Fatalf("backend call %q, want %q", got, w)
		}
	}
}

func (e *loopEnv) setPort(p uint16) {
	e.mu.Lock()
	e.ports = p
	e.mu.Unlock()
	e.l.Changed()
}

func TestLoopSyncsAtOnceThenAtMostOncePerMinSync(t *testing.T) {
	e := newLoopEnv(t)
	e.want("sync")
	e.idleWith(1) // only the full-sync ticker: nothing changed
	for p := uint16(81); p <= 90; p++ {
		e.setPort(p)
	}
	e.idleWith(2) // the changes wait for MinSync
	e.clk.Step(999 * time.Millisecond)
	e.idleWith(2)
	e.clk.Step(time.Millisecond)
	e.want("sync")
	if got := e.b.last().Sorted()[0].Port; got != 90 {
		t.Errorf("the sync applied port %d, want the latest change's 90", got)
	}
	e.idleWith(1)
	// Long after the last sync, a change is applied at once.
	e.clk.Step(5 * time.Second)
	e.setPort(91)
	e.want("sync")
	if st := e.l.Stats(); st.Syncs != 3 || st.Failures != 0 {
		t.Errorf("stats %+v, want 3 syncs, no failure", st)
	}
}

func TestLoopRetriesWithBackoffAndReportsOnce(t *testing.T) {
	e := newLoopEnv(t)
	e.want("sync")
	e.b.fail(3)
	e.clk.Step(time.Second)
	e.setPort(81)
	e.want("sync failed")
	// Retries after 2 s, then 4 s; the error is reported once.
	for _, wait := range []time.Duration{2 * time.Second, 4 * time.Second} {
		e.idleWith(2)
		e.clk.Step(wait - time.Millisecond)
		e.idleWith(2)
		e.clk.Step(time.Millisecond)
		e.want("sync failed")
	}
	e.idleWith(2)
	e.clk.Step(8 * time.Second)
	e.want("sync")
	e.idleWith(1)
	if got := e.b.last().Sorted()[0].Port; got != 81 {
		t.Errorf("the retry applied port %d, want 81", got)
	}
	e.mu.Lock()
	n := len(e.errors)
	e.mu.Unlock()
	if n != 1 {
		t.Errorf("%d errors reported, want 1 for the run of failures", n)
	}
	if st := e.l.Stats(); st.Failures != 3 || st.Syncs != 5 {
		t.Errorf("stats %+v, want 5 syncs of which 3 failed", st)
	}
	// A new failure after the recovery is reported again.
	e.b.fail(1)
	e.clk.Step(time.Second)
	e.setPort(82)
	e.want("sync failed")
	e.idleWith(2)
	e.mu.Lock()
	n = len(e.errors)
	e.mu.Unlock()
	if n != 2 {
		t.Errorf("%d errors reported, want 2", n)
	}
}

func TestLoopResyncsPeriodicallyAndWhenAsked(t *testing.T) {
	e := newLoopEnv(t)
	e.want("sync")
	e.idleWith(1)
	e.clk.Step(time.Minute)
	e.want("resync", "sync")
	e.idleWith(1)
	e.clk.Step(time.Second)
	e.l.Resync()
	e.want("resync", "sync")
	e.idleWith(1)
	if st := e.l.Stats(); st.Resyncs != 2 || st.Syncs != 3 {
		t.Errorf("stats %+v, want 3 syncs of which 2 resyncs", st)
	}
}
