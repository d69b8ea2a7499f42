package watchcache

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// WatchOptions selects what a watch receives.
type WatchOptions struct {
	// Cluster selects one cluster of a cross-cluster collection (empty: every cluster).
	Cluster   string
	Namespace string // empty: every namespace
	Name      string // empty: every name
	// Revision: deliver events after it (it must be within the window: ErrTooOld otherwise). 0 starts at the
	// collection's revision.
	Revision int64
	// Initial asks for the current state (Watch.Initial) and events after it; Revision must be 0.
	Initial bool
	// Filter, when set, narrows the watch to objects it accepts: an event is delivered when its object or the
	// state it replaced (Event.Prev) is accepted, so a watcher still sees an object leave. It runs under the
	// collection's lock for every event and watch, so it must be cheap (a field comparison): it is the
	// equivalent of upstream's indexed watch triggers (pods by spec.nodeName), sparing a thousand node agents'
	// watches each other's pod events. The watcher still applies its full selector.
	Filter func(*Entry) bool
	// Indexed narrows the watch further, before Filter: it is handed only the events whose object, or the state
	// it replaced, has IndexValue in the collection's secondary index (Config.Index), found by a map lookup per
	// event instead of a Filter call per watch and event. Ignored by a collection without an index.
	Indexed    bool
	IndexValue string
	// BookmarkEvery asks for progress bookmarks (the collection's revision while nothing else happens), at most
	// one per interval; 0: none. The store advances a collection every second, and handing each advance to a
	// thousand node agents' watches that pass one on every 10 s woke each of them every second for nothing.
	BookmarkEvery time.Duration
}

// Watch receives a collection's events. Next returns them in revision order, each once.
type Watch struct {
	col  *Collection
	opts WatchOptions
	// Initial is the state the watch starts from (WatchOptions.Initial), in key order.
	Initial []*Entry
	// Start is the revision the events start after.
	Start int64

	// lastBookmark is when the collection last queued a bookmark for this watch (guarded by the collection's lock).
	lastBookmark time.Time

	mu     sync.Mutex // guards queue, err
	queue  []Event
	err    error
	limit  int
	signal chan struct{} // capacity 1: the queue changed or the watch ended
}

// Watch starts a watch. With a Revision not yet reached it waits (WaitFor); below the window (or the store's
// compaction) it fails with ErrTooOld and the caller should watch the store, whose history reaches further.
func (col *Collection) Watch(ctx context.Context, opts WatchOptions) (*Watch, error) {
	if opts.Initial && opts.Revision != 0 {
		return nil, fmt.Errorf("watchcache: Initial with a Revision")
	}
	if opts.Revision > 0 {
		if err := col.WaitFor(ctx, opts.Revision); err != nil {
			return nil, err
		}
	}
	w := &Watch{col: col, opts: opts, limit: col.cache.cfg.WatchBuffer, signal: make(chan struct{}, 1)}
	compacted := col.cache.cfg.Source.KnownCompactRevision()
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.err != nil {
		return nil, col.err
	}
	switch {
	case opts.Initial:
		var initial []*Entry
		if col.kind.Cluster == "" && opts.Cluster == "" {
			col.items.Ascend(func(e *Entry) bool { initial = append(initial, e); return true })
		} else {
			cluster := col.kind.Cluster
			if cluster == "" {
				cluster = opts.Cluster
			}
			initial = col.listIn(cluster, opts.Namespace)
		}
		for _, e := range initial {
			if w.wants(e) && (w.opts.Filter == nil || w.opts.Filter(e)) {
				w.Initial = append(w.Initial, e)
			}
		}
		w.Start = col.rev
	case opts.Revision == 0:
		w.Start = col.rev
	default:
		if opts.Revision < col.window.from || opts.Revision < compacted {
			return nil, fmt.Errorf("watch from %d, window from %d, compacted to %d: %w", opts.Revision,
				col.window.from, compacted, ErrTooOld)
		}
		w.Start = opts.Revision
		col.window.after(opts.Revision, func(ev Event) {
			if w.wants(ev.Object) && col.inIndex(w, ev) && w.accepts(ev) {
				w.queue = append(w.queue, ev)
			}
		})
		if len(w.queue) > 0 {
			w.signal <- struct{}{}
		}
	}
	col.addWatch(w)
	col.touch()
	return w, nil
}

// wants says whether e is in the watch's namespace and name.
func (w *Watch) wants(e *Entry) bool {
	return (w.opts.Cluster == "" || w.opts.Cluster == e.Cluster) &&
		(w.opts.Namespace == "" || w.opts.Namespace == e.Namespace) && (w.opts.Name == "" || w.opts.Name == e.Name)
}

// accepts applies the watch's Filter to an event's object and the state it replaced.
func (w *Watch) accepts(ev Event) bool {
	f := w.opts.Filter
	return f == nil || ev.Object == nil || f(ev.Object) || (ev.Prev != nil && f(ev.Prev))
}

// push queues ev; false means the watch is too far behind. Called with the collection's lock held.
func (w *Watch) push(ev Event) bool {
	w.mu.Lock()
	if len(w.queue) >= w.limit {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.wake()
	return true
}

// bookmark queues a bookmark unless events are waiting (they say more than the bookmark would).
func (w *Watch) bookmark(ev Event) {
	w.mu.Lock()
	if len(w.queue) > 0 {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.wake()
}

func (w *Watch) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// end stops the watch with err (nil after Stop).
func (w *Watch) end(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.wake()
}

// Next returns the events waiting, blocking until there is one. After the watch ends it returns the events
// still queued, then the reason (ErrSlow, ErrReset, ErrClosed, or ctx's error).
func (w *Watch) Next(ctx context.Context, spare []Event) ([]Event, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			evs := w.queue
			w.queue = spare[:0]
			w.mu.Unlock()
			return evs, nil
		}
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-w.signal:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Stop ends the watch.
func (w *Watch) Stop() {
	w.col.mu.Lock()
	w.col.removeWatch(w)
	w.col.mu.Unlock()
	w.col.touch()
	w.end(errStopped)
}

var errStopped = fmt.Errorf("watchcache: watch stopped")
