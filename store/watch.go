package store

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// WatchOptions selects the events a watcher receives.
type WatchOptions struct {
	Cluster   string // empty: every cluster
	Resource  string // empty: every resource
	Namespace string // empty: every namespace
	Name      string // empty: every name
	// Revision: deliver events with a revision above it. 0 starts at the current revision (no replay).
	Revision int64
	// Progress asks for periodic BOOKMARK events.
	Progress bool
	// Buffer overrides Config.WatchBuffer for this watcher (0: the store's). A watch cache that every client
	// watch hangs off sets it large: closing it as slow would cost a reload of everything and every client's
	// watch, never less than the memory of its backlog.
	Buffer int
}

func (o WatchOptions) matches(k Key) bool {
	return (o.Cluster == "" || o.Cluster == k.Cluster) && (o.Resource == "" || o.Resource == k.Resource) &&
		(o.Namespace == "" || o.Namespace == k.Namespace) && (o.Name == "" || o.Name == k.Name)
}

// Watcher streams events; see the package documentation for its guarantees.
type Watcher struct {
	opts  WatchOptions
	store *Store
	start int64 // position the watcher joined the hub at; the live feed starts after it

	// The hub appends to queue (never blocking); run drains it. The queue grows only as far as the watcher is
	// behind, up to limit; past that the watcher is closed. Memory follows the backlog, not the limit.
	qmu    sync.Mutex // guards queue
	queue  []Event
	limit  int
	signal chan struct{} // capacity 1: "queue is not empty"
	out    chan Event    // run → consumer

	stopOnce sync.Once
	stopCh   chan struct{}
	killOnce sync.Once
	killCh   chan struct{} // closed by the hub when it drops the watcher
	mu       sync.Mutex    // guards err
	err      error
}

// Watch starts a watcher. It fails with ErrCompacted if opts.Revision is below the compaction revision and
// ErrFutureRevision if it is above the current revision. The watcher stops when ctx ends or Stop is called.
func (s *Store) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	if opts.Revision < 0 {
		return nil, fmt.Errorf("watch: negative revision: %w", ErrInvalid)
	}
	limit := s.cfg.WatchBuffer
	if opts.Buffer > 0 {
		limit = opts.Buffer
	}
	w := &Watcher{opts: opts, store: s, limit: limit, signal: make(chan struct{}, 1), out: make(chan Event),
		stopCh: make(chan struct{}), killCh: make(chan struct{})}
	w.start = s.hub.add(w)
	// Below the hub's position history must be checked for compaction; so must a revision below a compaction
	// this process knows of, even while the hub has not caught up with it yet.
	if opts.Revision != 0 && (opts.Revision < w.start || opts.Revision < s.hub.knownCompacted()) {
		var compacted int64
		if err := s.pool.QueryRow(ctx, "SELECT rev FROM wh_compact WHERE id = 1").Scan(&compacted); err != nil {
			s.hub.remove(w)
			return nil, translate("watch", nil, err)
		}
		if opts.Revision < compacted {
			s.hub.remove(w)
			return nil, fmt.Errorf("watch from revision %d (compacted to %d): %w", opts.Revision, compacted, ErrCompacted)
		}
	}
	if opts.Revision > w.start {
		cur, err := s.CurrentRevision(ctx)
		if err != nil {
			s.hub.remove(w)
			return nil, err
		}
		if opts.Revision > cur {
			s.hub.remove(w)
			return nil, fmt.Errorf("watch from revision %d (current %d): %w", opts.Revision, cur, ErrFutureRevision)
		}
	}
	go w.run(ctx)
	return w, nil
}

// Events delivers the events. It is closed when the watcher ends; then Err says why.
func (w *Watcher) Events() <-chan Event { return w.out }

// Err is nil after Stop or the end of the watch's context, ErrWatcherSlow, ErrCompacted, ErrClosed or
// ErrUnavailable otherwise. Valid once Events is closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// StartRevision is the revision the watcher started after when WatchOptions.Revision was 0.
func (w *Watcher) StartRevision() int64 { return max(w.start, w.opts.Revision) }

// RequestProgress asks for a BOOKMARK at least as new as rev as soon as the store has read that far (at once
// when it has; after its next look at the history otherwise), even without WatchOptions.Progress. A reader
// that must catch up with a revision it learnt elsewhere (CurrentRevision) calls it so the watcher's progress is
// known within a poll, not a ProgressInterval.
func (w *Watcher) RequestProgress(rev int64) { w.store.hub.requestProgress(w, rev) }

// Stop ends the watcher; Events is closed soon after.
func (w *Watcher) Stop() { w.stopOnce.Do(func() { close(w.stopCh) }) }

// kill is called by the hub (holding its lock) to end the watcher with err.
func (w *Watcher) kill(err error) {
	w.killOnce.Do(func() {
		w.setErr(err)
		close(w.killCh)
	})
}

func (w *Watcher) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// push is called by the hub with its lock held; it never blocks. False means the watcher is too far behind.
func (w *Watcher) push(ev Event) bool {
	w.qmu.Lock()
	if len(w.queue) >= w.limit {
		w.qmu.Unlock()
		return false
	}
	w.queue = append(w.queue, ev)
	w.qmu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
	return true
}

// backlog is how many events wait in the queue.
func (w *Watcher) backlog() int {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return len(w.queue)
}

// take empties the queue, handing back spare (emptied) for reuse.
func (w *Watcher) take(spare []Event) []Event {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	batch := w.queue
	w.queue = spare[:0]
	return batch
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.store.hub.remove(w)
	cursor := w.opts.Revision
	if cursor != 0 && cursor < w.start {
		var err error
		if cursor, err = w.catchUp(ctx, cursor); err != nil {
			w.setErr(err)
			return
		}
	}
	cursor = max(cursor, w.start)
	var batch []Event
	for {
		select {
		case <-w.signal:
			batch = w.take(batch)
			for i, ev := range batch {
				batch[i] = Event{} // drop references as we go
				if ev.Object.Revision <= cursor && (ev.Type != Bookmark || ev.Object.Revision < cursor) {
					continue
				}
				if !w.send(ctx, ev) {
					return
				}
				cursor = ev.Object.Revision
			}
			if cap(batch) > 4*minQueue {
				batch = nil // a burst is over: let its memory go
			}
		case <-w.killCh:
			return
		case <-w.stopCh:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (w *Watcher) send(ctx context.Context, ev Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.killCh:
	case <-w.stopCh:
	case <-ctx.Done():
	}
	return false
}

const catchUpPage = 1000

// minQueue is the queue capacity a watcher keeps between bursts.
const minQueue = 64

// catchUp delivers history in (from, w.start] from the table, a page at a time, each page in one snapshot that
// also proves the page was not compacted away.
func (w *Watcher) catchUp(ctx context.Context, from int64) (int64, error) {
	for from < w.start {
		evs, compacted, err := w.readPage(ctx, from)
		if err != nil {
			return from, translate("watch", nil, err)
		}
		if from < compacted {
			return from, fmt.Errorf("watch from revision %d (compacted to %d): %w", from, compacted, ErrCompacted)
		}
		for _, ev := range evs {
			if !w.send(ctx, ev) {
				return from, nil
			}
		}
		if len(evs) < catchUpPage {
			return w.start, nil
		}
		from = evs[len(evs)-1].Object.Revision
	}
	return from, nil
}

func (w *Watcher) readPage(ctx context.Context, from int64) ([]Event, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, w.store.cfg.QueryTimeout)
	defer cancel()
	q, args := catchUpQuery(w.opts, from, w.start)
	rows, err := w.store.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, err
	}
	evs, compacted, _, err := scanEvents(rows)
	return evs, compacted, err
}

func catchUpQuery(o WatchOptions, from, to int64) (string, []any) {
	args := []any{from, to}
	where := []string{"rev > $1", "rev <= $2"}
	for _, f := range []struct{ col, val string }{
		{"cluster", o.Cluster}, {"resource", o.Resource}, {"namespace", o.Namespace}, {"name", o.Name},
	} {
		if f.val != "" {
			args = append(args, f.val)
			where = append(where, fmt.Sprintf("%s = $%d", f.col, len(args)))
		}
	}
	return historyQuery(strings.Join(where, " AND "), catchUpPage), args
}

// historyQuery selects the compaction and current revision of one snapshot, then history rows.
func historyQuery(where string, limit int) string {
	return fmt.Sprintf(`SELECT c.rev, m.rev, h.rev, h.cluster, h.resource, h.namespace, h.name, h.type, h.create_rev, h.prev_rev, h.value
FROM wh_compact c CROSS JOIN wh_meta m LEFT JOIN LATERAL (
  SELECT * FROM history WHERE %s ORDER BY rev LIMIT %d) h ON true
WHERE c.id = 1 AND m.id = 1`, where, limit)
}

// scanEvents reads the rows of historyQuery: the events, the compaction and the current revision.
func scanEvents(rows pgx.Rows) (evs []Event, compacted, current int64, err error) {
	defer rows.Close()
	for rows.Next() {
		var rev, created, prev *int64
		var typ *int16
		var k struct{ c, r, ns, n *string }
		var value []byte
		if err := rows.Scan(&compacted, &current, &rev, &k.c, &k.r, &k.ns, &k.n, &typ, &created, &prev, &value); err != nil {
			return nil, 0, 0, err
		}
		if rev == nil {
			continue
		}
		evs = append(evs, Event{
			Type: EventType(*typ),
			Object: Object{Key: Key{Cluster: *k.c, Resource: *k.r, Namespace: *k.ns, Name: *k.n},
				Revision: *rev, CreateRevision: *created, Value: value},
			PrevRevision: *prev,
		})
	}
	return evs, compacted, current, rows.Err()
}
