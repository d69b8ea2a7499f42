package proxy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Backend keeps a node's kernel equal to a State: the nftables backend (agents/proxy/nft) or the IPVS one
// (agents/proxy/ipvs).
type Backend interface {
	// Sync applies the minimal change from what the kernel holds to desired.
	Sync(ctx context.Context, desired State) error
	// Resync reads back everything the backend programmed and repairs what someone else changed.
	Resync(ctx context.Context) error
	// Cleanup removes everything the backend programmed.
	Cleanup(ctx context.Context) error
	// Close releases the backend's handles; what it programmed stays.
	Close() error
}

// Defaults of LoopConfig, kube-proxy's (--min-sync-period 1 s, --sync-period 1 min for nftables mode).
const (
	DefaultMinSync  = time.Second
	DefaultFullSync = time.Minute
)

// LoopConfig configures a Loop. Zero fields take the defaults noted.
type LoopConfig struct {
	Backend Backend
	// Desired computes the desired state (the agent builds it from its informers' Services and EndpointSlices).
	Desired func() (State, error)
	// MinSync is the least time between the starts of two syncs (default DefaultMinSync): changes within it
	// are applied together.
	MinSync time.Duration
	// FullSync is how often the backend reads back the kernel and repairs it (default DefaultFullSync); it is
	// also the longest wait between retries of a failing sync.
	FullSync time.Duration
	// OnError is told of the first failure of each run of failing syncs (the agent records a Warning event on
	// its Node); the loop retries, backing off from MinSync to FullSync.
	OnError func(error)
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Loop is the proxy's sync loop: informer events mark the state changed (Changed); a sync builds the desired
// state and has the backend apply the difference, at most once per MinSync; a full read-back runs every
// FullSync and when asked (Resync: after the agent's watches broke). A failing sync is retried with back-off;
// it never stops the loop.
type Loop struct {
	cfg    LoopConfig
	poke   chan struct{}
	resync chan struct{}

	mu      sync.Mutex
	stats   LoopStats
	lastErr error
}

// LoopStats counts what a Loop did.
type LoopStats struct {
	Syncs, Failures, Resyncs int
	// LastSync is how long the last sync took (building the state and applying it).
	LastSync time.Duration
}

// NewLoop returns a loop; Run runs it.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	if cfg.Backend == nil || cfg.Desired == nil {
		return nil, errors.New("proxy: the sync loop needs a backend and a desired state")
	}
	if cfg.MinSync <= 0 {
		cfg.MinSync = DefaultMinSync
	}
	if cfg.FullSync <= 0 {
		cfg.FullSync = DefaultFullSync
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnError == nil {
		cfg.OnError = func(error) {}
	}
	return &Loop{cfg: cfg, poke: make(chan struct{}, 1), resync: make(chan struct{}, 1)}, nil
}

// Changed marks the desired state changed: a sync follows, within MinSync of the last one's start.
func (l *Loop) Changed() { signal(l.poke) }

// Resync asks for a full read-back at the next sync.
func (l *Loop) Resync() { signal(l.resync) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // already pending
	}
}

// Stats returns what the loop did so far.
func (l *Loop) Stats() LoopStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Run syncs until ctx ends, starting at once.
func (l *Loop) Run(ctx context.Context) {
	clk := l.cfg.Clock
	full := clk.NewTicker(l.cfg.FullSync)
	defer full.Stop()
	dirty, resync := true, false
	var last time.Time          // the start of the last sync
	gap := time.Duration(0)     // the least time from last to the next sync: MinSync, or the retry back-off
	var timer clock.Timer       // armed while a sync waits for its time
	var timerC <-chan time.Time // timer's channel, nil when disarmed
	for {
		if dirty || resync {
			if wait := gap - clk.Since(last); !last.IsZero() && wait > 0 {
				if timerC == nil {
					timer = clk.NewTimer(wait)
					timerC = timer.C()
				}
			} else {
				if timer != nil {
					timer.Stop()
					timer, timerC = nil, nil
				}
				last = clk.Now()
				err := l.sync(ctx, resync)
				if ctx.Err() != nil {
					return
				}
				dirty, resync = err != nil, false
				gap = l.nextGap(gap, err)
				continue
			}
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-l.poke:
			dirty = true
		case <-l.resync:
			resync = true
		case <-full.C():
			resync = true
		case <-timerC:
			timer, timerC = nil, nil
		}
	}
}

// nextGap is the wait before the next sync after one that ended with err: MinSync after a success, else
// doubling from MinSync up to FullSync.
func (l *Loop) nextGap(gap time.Duration, err error) time.Duration {
	if err == nil {
		return l.cfg.MinSync
	}
	return min(max(2*gap, l.cfg.MinSync), l.cfg.FullSync)
}

// sync builds the desired state and applies it (after a full read-back when resync).
func (l *Loop) sync(ctx context.Context, resync bool) error {
	start := l.cfg.Clock.Now()
	err := l.apply(ctx, resync)
	took := l.cfg.Clock.Since(start)
	l.mu.Lock()
	l.stats.Syncs++
	l.stats.LastSync = took
	if resync {
		l.stats.Resyncs++
	}
	first := err != nil && l.lastErr == nil
	recovered := err == nil && l.lastErr != nil
	if err != nil {
		l.stats.Failures++
	}
	l.lastErr = err
	l.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		l.cfg.Logger.Warn("syncing the Service proxy failed; retrying", "err", err)
		if first {
			l.cfg.OnError(err)
		}
	case recovered:
		l.cfg.Logger.Info("the Service proxy is in sync again")
	default:
		l.cfg.Logger.Debug("Service proxy synced", "took", took, "resync", resync)
	}
	return err
}

func (l *Loop) apply(ctx context.Context, resync bool) error {
	desired, err := l.cfg.Desired()
	if err != nil {
		return err
	}
	var rerr error
	if resync {
		// A failed read-back does not stop the sync: Sync after it rewrites what it cannot trust.
		rerr = l.cfg.Backend.Resync(ctx)
	}
	return errors.Join(rerr, l.cfg.Backend.Sync(ctx, desired))
}
