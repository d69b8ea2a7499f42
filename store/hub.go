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

	mu       sync.Mutex // guards last and watchers; held while pushing to watchers (push never blocks)
	last     int64      // every event at or below last has been handed to the watchers of that time
	watchers map[*Watcher]struct{}
}

const hubPage = 1000

func newHub(s *Store, start int64) *hub {
	return &hub{s: s, wake: make(chan struct{}, 1), last: start, watchers: map[*Watcher]struct{}{}}
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
	h.mu.Unlock()
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
	rows, err := h.s.pool.Query(ctx, historyQuery("rev > $1", hubPage), from)
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
	if from < compacted {
		// We were cut off for longer than the retention and history we never read is gone: nobody here can
		// be served exactly any more. Watchers resume from their last revision and get ErrCompacted (410).
		h.s.log.Error("watch hub fell behind compaction; closing every watcher", "at", from, "compacted", compacted)
		for w := range h.watchers {
			w.kill(ErrCompacted)
			delete(h.watchers, w)
		}
		h.last = current
		return
	}
	for _, ev := range evs {
		for w := range h.watchers {
			if !w.opts.matches(ev.Object.Key) {
				continue
			}
			if !w.push(ev) {
				w.kill(ErrWatcherSlow)
				delete(h.watchers, w)
			}
		}
		h.last = ev.Object.Revision
	}
	if len(evs) < hubPage {
		h.last = max(h.last, current)
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
