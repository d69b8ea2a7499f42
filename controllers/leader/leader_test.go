package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// partitionable fails every write while cut (a process that lost its database).
type partitionable struct {
	*store.Store
	cut atomic.Bool
}

var errCut = errors.New("partitioned")

func (p *partitionable) Update(ctx context.Context, k store.Key, v []byte, rev int64) (store.Object, error) {
	if p.cut.Load() {
		return store.Object{}, errCut
	}
	return p.Store.Update(ctx, k, v, rev)
}

func (p *partitionable) Get(ctx context.Context, k store.Key) (store.Object, error) {
	if p.cut.Load() {
		return store.Object{}, errCut
	}
	return p.Store.Get(ctx, k)
}

// leadership records who leads and fails the test if two ever do at once.
type leadership struct {
	t       *testing.T
	mu      sync.Mutex
	current string
	started map[string]chan struct{}
	stopped map[string]chan struct{}
}

func (l *leadership) lead(name string) func(context.Context) {
	return func(ctx context.Context) {
		l.mu.Lock()
		if l.current != "" {
			l.t.Errorf("%s started leading while %s leads", name, l.current)
		}
		l.current = name
		close(l.started[name])
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.current = ""
		close(l.stopped[name])
		l.mu.Unlock()
	}
}

func waitClosed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestOneLeaderAndTakeovers(t *testing.T) {
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.NewDatabase(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	names := []string{"a", "b", "c"}
	l := &leadership{t: t, started: map[string]chan struct{}{}, stopped: map[string]chan struct{}{}}
	for _, n := range names {
		l.started[n], l.stopped[n] = make(chan struct{}), make(chan struct{})
	}
	cfg := func(s Store, id string) Config {
		return Config{Store: s, Identity: id, LeaseDuration: 600 * time.Millisecond, RenewDeadline: 300 * time.Millisecond,
			RetryPeriod: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	}
	var wg sync.WaitGroup
	run := func(ctx context.Context, s Store, id string) {
		wg.Go(func() {
			if err := Run(ctx, cfg(s, id), l.lead(id)); err != nil {
				t.Error(err)
			}
		})
	}
	ctxA, stopA := context.WithCancel(t.Context())
	run(ctxA, st, "a")
	waitClosed(t, l.started["a"], "a leading")

	// b waits while a leads; a stopping releases the lease and b takes over at once.
	ctxB, stopB := context.WithCancel(t.Context())
	partB := &partitionable{Store: st}
	run(ctxB, partB, "b")
	stopA()
	waitClosed(t, l.stopped["a"], "a stopping")
	waitClosed(t, l.started["b"], "b taking over after a released the lease")

	// b loses its database: it stops leading by its renew deadline; c takes over once the lease expires.
	ctxC, stopC := context.WithCancel(t.Context())
	run(ctxC, st, "c")
	partB.cut.Store(true)
	waitClosed(t, l.stopped["b"], "b stopping after losing its renewals")
	waitClosed(t, l.started["c"], "c taking over an expired lease")
	stopB()
	stopC()
	wg.Wait()
}

func TestConfigErrors(t *testing.T) {
	if err := Run(t.Context(), Config{}, func(context.Context) {}); err == nil {
		t.Fatal("Run without a store")
	}
	if err := Run(t.Context(), Config{Store: &partitionable{}, Identity: "x", LeaseDuration: time.Second,
		RenewDeadline: 2 * time.Second}, func(context.Context) {}); err == nil {
		t.Fatal("a renew deadline longer than the lease")
	}
}
