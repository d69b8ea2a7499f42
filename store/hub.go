package store

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// hub is a process's single reader of the history table. It follows the log from its position `last`,
// woken by NOTIFY, by local writers and by a poll ticker, and fans events out to its watchers.
type hub struct {
	s    *Store
	wake chan struct{}

	mu        sync.Mutex // guards last, compacted, watchers and progress; held while pushing (push never blocks)
	last      int64      // every event at or below last has been handed to the watchers of that time
	compacted int64      // the compaction revision last seen (by a poll or a local Compact)
	watchers  map[*Watcher]struct{}
	progress  map[*Watcher]struct{} // watchers that asked for a bookmark after the next poll
}

const hubPage = 1000

func newHub(s *Store, start int64) *hub {
	return &hub{s: s, wake: make(chan struct{}, 1), last: start, watchers: map[*Watcher]struct{}{},
		progress: map[*Watcher]struct{}{}}
}

// add registers w and returns the position it joins at: it will be pushed every event after it.
func (h *hub) add(w *Watcher) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[w] = struct{}{}
	return h.last
}

func (h *hub) remove(w *Watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	delete(h.progress, w)
	h.mu.Unlock()
}

// requestProgress pushes w a bookmark at the hub's position now; when the hub has not reached rev yet it also
// asks for a poll and a bookmark after it. A reader that needs w to reach a revision committed a moment ago
// gets there without waiting for the periodic bookmark, and without an extra poll when the hub is already there.
func (h *hub) requestProgress(w *Watcher, rev int64) {
	h.mu.Lock()
	_, registered := h.watchers[w]
	behind := h.last < rev
	if registered {
		w.push(Event{Type: Bookmark, Object: Object{Revision: h.last}})
		if behind {
			h.progress[w] = struct{}{}
		}
	}
	h.mu.Unlock()
	if registered && behind {
		h.wakeUp()
	}
}

// noteCompacted records a compaction revision seen by this process.
func (h *hub) noteCompacted(rev int64) {
	h.mu.Lock()
	h.compacted = max(h.compacted, rev)
	h.mu.Unlock()
}

// knownCompacted is the compaction revision last seen.
func (h *hub) knownCompacted() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.compacted
}

// wakeUp asks the hub to poll soon; it never blocks and coalesces.
func (h *hub) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hub) closeAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		w.kill(err)
		delete(h.watchers, w)
		delete(h.progress, w)
	}
}

// position is the hub's current revision.
func (h *hub) position() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *hub) run(ctx context.Context) {
	poll := time.NewTicker(h.s.cfg.PollInterval)
	defer poll.Stop()
	progress := time.NewTicker(h.s.cfg.ProgressInterval)
	defer progress.Stop()
	backoff := newBackoff(10*time.Millisecond, 2*time.Second)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-progress.C:
			h.bookmark()
			continue
		case <-h.wake:
		case <-poll.C:
		case <-retry.C:
		}
		if err := h.catchUp(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			d := backoff.next()
			h.s.log.Warn("watch hub cannot read history; retrying", "err", err, "in", d)
			retry.Reset(d)
			continue
		}
		backoff.reset()
	}
}

// catchUp polls until it has read everything committed.
func (h *hub) catchUp(ctx context.Context) error {
	for {
		n, err := h.pollOnce(ctx)
		if err != nil {
			return err
		}
		if n < hubPage {
			return nil
		}
	}
}

func (h *hub) pollOnce(ctx context.Context) (int, error) {
	from := h.position()
	ctx, cancel := context.WithTimeout(ctx, h.s.cfg.QueryTimeout)
	defer cancel()
	rows, err := h.s.sys.Query(ctx, historyQuery("rev > $1", hubPage), from)
	if err != nil {
		return 0, translate("watch hub", nil, err)
	}
	evs, compacted, current, err := scanEvents(rows)
	if err != nil {
		return 0, translate("watch hub", nil, err)
	}
	h.dispatch(from, evs, compacted, current)
	if h.s.hooks.afterPoll != nil {
		h.s.hooks.afterPoll(len(evs))
	}
	return len(evs), nil
}

func (h *hub) dispatch(from int64, evs []Event, compacted, current int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != from {
		return // another poll got here first (cannot happen with one run loop, but stay safe)
	}
	h.compacted = max(h.compacted, compacted)
	if from < compacted {
		// History in (from, compacted] that we never read may be gone: a watcher that needs events from there
		// cannot be served exactly any more and is closed with ErrCompacted (its client resumes: 410). A watcher
		// that asked for events after a revision at or above the compaction needs none of them and carries on
		// with the events below, which all survive compaction.
		closed := 0
		for w := range h.watchers {
			if w.opts.Revision < compacted {
				w.kill(ErrCompacted)
				delete(h.watchers, w)
				delete(h.progress, w)
				closed++
			}
		}
		if closed > 0 {
			h.s.log.Error("watch hub fell behind compaction; closed the watchers it can no longer serve",
				"at", from, "compacted", compacted, "closed", closed)
		}
	}
	for _, ev := range evs {
		for w := range h.watchers {
			if !w.opts.matches(ev.Object.Key) {
				continue
			}
			if !w.push(ev) {
				w.kill(ErrWatcherSlow)
				delete(h.watchers, w)
				delete(h.progress, w)
			}
		}
		h.last = ev.Object.Revision
	}
	if len(evs) < hubPage {
		h.last = max(h.last, current)
	}
	for w := range h.progress {
		w.push(Event{Type: Bookmark, Object: Object{Revision: h.last}})
		delete(h.progress, w)
	}
}

// bookmark sends each watcher that asked for progress the hub's position, unless its buffer is half full.
func (h *hub) bookmark() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := Event{Type: Bookmark, Object: Object{Revision: h.last}}
	for w := range h.watchers {
		if w.opts.Progress && w.backlog() < w.limit/2 {
			w.push(ev)
		}
	}
}

// backoff is a capped exponential backoff with full jitter.
type backoff struct {
	base, cap, cur time.Duration
}

func newBackoff(base, cap time.Duration) *backoff { return &backoff{base: base, cap: cap, cur: base} }

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.cap)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func (b *backoff) reset() { b.cur = b.base }
