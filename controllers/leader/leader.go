// Package leader elects one server process to run the controllers and the scheduler for the whole
// installation: a lease record in the object store, taken and renewed by compare-and-swap (the store's revision
// is the lock's version), as client-go's leaderelection does with a Lease object. See
// docs/design/controllers.md.
//
// Expiry is judged on the local clock from the moment this process last saw the record change (as upstream),
// never from timestamps another process wrote, so clock skew between replicas cannot make two leaders. A leader
// that cannot renew for RenewDeadline stops leading (its context is cancelled) before LeaseDuration has passed
// since its last renewal, which is when another process may take over.
package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Store is what the election needs of the object store (*store.Store implements it).
type Store interface {
	Get(ctx context.Context, key store.Key) (store.Object, error)
	Create(ctx context.Context, key store.Key, value []byte) (store.Object, error)
	Update(ctx context.Context, key store.Key, value []byte, expectRev int64) (store.Object, error)
}

// Key is the installation's controller lease: in the store's system space, outside any tenant's cluster.
var Key = store.Key{Cluster: "_system", Resource: "leases.coordination.k8s.io", Namespace: "kube-system",
	Name: "wheelhouse-controllers"}

// Config configures an election. Zero durations take the defaults noted.
type Config struct {
	Store    Store
	Key      store.Key // default Key
	Identity string    // this process (required): hostname and pid, say
	// LeaseDuration is how long a lease lasts without renewal before another process may take it (default 15 s).
	LeaseDuration time.Duration
	// RenewDeadline is how long a leader keeps leading without a successful renewal (default 10 s; less than
	// LeaseDuration).
	RenewDeadline time.Duration
	// RetryPeriod is the interval of renewals and acquisition attempts (default 2 s).
	RetryPeriod time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Key == (store.Key{}) {
		c.Key = Key
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// record is the lease's stored value.
type record struct {
	Holder string `json:"holder"` // "" when released
	// Renewals counts renewals: a record that changed is seen as alive even if the holder is the same.
	Renewals int64 `json:"renewals"`
}

// Run takes part in the election until ctx ends: whenever this process holds the lease it runs lead with a
// context that is cancelled as soon as it stops holding it (lost renewals, or ctx ending — then the lease is
// released so another process takes over at once). lead may be called again after a later re-election.
func Run(ctx context.Context, cfg Config, lead func(ctx context.Context)) error {
	cfg.setDefaults()
	if cfg.Store == nil || cfg.Identity == "" {
		return errors.New("leader: Store and Identity are required")
	}
	if cfg.RenewDeadline >= cfg.LeaseDuration {
		return errors.New("leader: RenewDeadline must be shorter than LeaseDuration")
	}
	e := &elector{cfg: cfg}
	t := time.NewTicker(cfg.RetryPeriod)
	defer t.Stop()
	for {
		if e.tryAcquire(ctx) {
			e.leadUntilLost(ctx, t.C, lead)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type elector struct {
	cfg Config
	// observed is the last record version seen and when (local clock) it was first seen.
	observedRev  int64
	observedAt   time.Time
	observedHold string
	rev          int64 // our record's revision while we hold it
	renewals     int64
}

// tryAcquire takes the lease when it is free, released, expired or already ours.
func (e *elector) tryAcquire(ctx context.Context) bool {
	now := e.cfg.Now()
	obj, err := e.cfg.Store.Get(ctx, e.cfg.Key)
	if errors.Is(err, store.ErrNotFound) {
		return e.write(ctx, 0, true)
	}
	if err != nil {
		e.cfg.Logger.Warn("reading the controller lease failed", "err", err)
		return false
	}
	var r record
	if err := json.Unmarshal(obj.Value, &r); err != nil {
		r = record{} // unreadable: treat as released
	}
	if obj.Revision != e.observedRev {
		e.observedRev, e.observedAt, e.observedHold = obj.Revision, now, r.Holder
	}
	free := r.Holder == "" || r.Holder == e.cfg.Identity || now.Sub(e.observedAt) > e.cfg.LeaseDuration
	if !free {
		return false
	}
	e.renewals = r.Renewals
	return e.write(ctx, obj.Revision, false)
}

// write stores our claim over revision rev (create when create).
func (e *elector) write(ctx context.Context, rev int64, create bool) bool {
	e.renewals++
	b, _ := json.Marshal(record{Holder: e.cfg.Identity, Renewals: e.renewals})
	var obj store.Object
	var err error
	// Ahead of queued writes: a renewal stuck behind a burst of them would cost the lease.
	wctx := store.WithPriority(ctx)
	if create {
		obj, err = e.cfg.Store.Create(wctx, e.cfg.Key, b)
	} else {
		obj, err = e.cfg.Store.Update(wctx, e.cfg.Key, b, rev)
	}
	if err != nil {
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrExists) && ctx.Err() == nil {
			e.cfg.Logger.Warn("writing the controller lease failed", "err", err)
		}
		return false
	}
	e.rev = obj.Revision
	e.observedRev, e.observedAt, e.observedHold = obj.Revision, e.cfg.Now(), e.cfg.Identity
	return true
}

// leadUntilLost runs lead while renewals succeed; it returns once leadership is lost or ctx ends (releasing
// the lease in that case), after lead has returned.
func (e *elector) leadUntilLost(ctx context.Context, tick <-chan time.Time, lead func(context.Context)) {
	log := e.cfg.Logger.With("identity", e.cfg.Identity)
	log.Info("leading: starting controllers and scheduler")
	leadCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	lastRenew := e.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			stop()
			<-done
			e.release()
			log.Info("stopped leading: shutting down")
			return
		case <-tick:
		}
		if e.write(ctx, e.rev, false) {
			lastRenew = e.cfg.Now()
			continue
		}
		if e.cfg.Now().Sub(lastRenew) >= e.cfg.RenewDeadline || e.lostToAnother(ctx) {
			stop()
			<-done
			log.Warn("lost the controller lease: controllers and scheduler stopped")
			return
		}
	}
}

// lostToAnother reports whether someone else now holds the lease (our renewal conflicted with their write).
func (e *elector) lostToAnother(ctx context.Context) bool {
	obj, err := e.cfg.Store.Get(ctx, e.cfg.Key)
	if err != nil {
		return false
	}
	var r record
	return json.Unmarshal(obj.Value, &r) == nil && r.Holder != e.cfg.Identity
}

// release hands the lease back so another process need not wait for it to expire.
func (e *elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, _ := json.Marshal(record{Holder: "", Renewals: e.renewals + 1})
	if _, err := e.cfg.Store.Update(store.WithPriority(ctx), e.cfg.Key, b, e.rev); err != nil && !errors.Is(err, store.ErrConflict) {
		e.cfg.Logger.Warn("releasing the controller lease failed; another process takes it when it expires", "err", err)
	}
}

// String describes the election for logs.
func (c Config) String() string { return fmt.Sprintf("lease %s as %s", c.Key, c.Identity) }

// Holder reads who holds the lease at key (Key when zero) and its renewal count: "" when nobody does. A caller
// that reads it twice a lease duration apart and sees the same count knows the holder stopped renewing.
func Holder(ctx context.Context, st Store, key store.Key) (string, int64, error) {
	if key == (store.Key{}) {
		key = Key
	}
	obj, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", 0, nil
	} else if err != nil {
		return "", 0, err
	}
	var r record
	if err := json.Unmarshal(obj.Value, &r); err != nil {
		return "", 0, fmt.Errorf("leader: lease %s: %w", key, err)
	}
	return r.Holder, r.Renewals, nil
}
