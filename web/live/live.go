// Package live pushes re-rendered page regions to browser tabs over one websocket per tab.
//
// A tab subscribes to the regions its page shows; each region watches what it shows and, when that changes, is
// marked dirty. Dirty regions are rendered at most once per Options.Interval (a burst of a thousand changes is
// one render of the latest state), authorized by their Render at every send, and queued at most once each (a
// newer render replaces a queued one). A tab that cannot keep up is disconnected; its script reconnects and
// subscribes again, which renders every region in full. The protocol and the reasons are in
// docs/design/dashboard.md.
package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Region is one subscribed part of a page.
type Region interface {
	// Watch calls changed whenever what the region shows may have changed, until ctx ends. It returns when ctx
	// ends, or with an error when its watch broke (the hub renders the region again and restarts it).
	Watch(ctx context.Context, changed func()) error
	// Render renders the region as it is now, authorized for the connection's user: an error wrapping a *Gone
	// ends the subscription and tells the tab why; any other error is logged and the region is retried later.
	Render(ctx context.Context) ([]byte, error)
}

// Gone is a Render error that ends a subscription: the user may no longer see the region, or it no longer
// exists. Reason is shown in its place.
type Gone struct{ Reason string }

func (g *Gone) Error() string { return "live: region gone: " + g.Reason }

// Resolver turns a subscription into a Region for the connection's user; an error wrapping *Gone refuses it.
type Resolver func(ctx context.Context, kind, params string) (Region, error)

// Options tune a connection; the zero value is the defaults.
type Options struct {
	// Interval is the least time between two renders of a region (default 100 ms).
	Interval time.Duration
	// WriteTimeout closes a connection whose write blocks this long (default 10 s).
	WriteTimeout time.Duration
	// MaxQueued bounds the bytes of rendered fragments waiting to be sent (default 8 MiB); past it the tab is too
	// slow and is disconnected (it resyncs when it reconnects).
	MaxQueued int
	// MaxRegions bounds a connection's subscriptions (default 64).
	MaxRegions int
	// Check runs every CheckEvery (default 5 s) and once before the first render: an error ends the connection
	// (the session ended, the membership was removed). Nil: no check.
	Check      func(ctx context.Context) error
	CheckEvery time.Duration
	// After is the timer (default time.After); tests pass their own to decide when a coalesced render happens.
	Now    func() time.Time
	After  func(time.Duration) <-chan time.Time
	Logger *slog.Logger
	// Rendered, when set, is told of every render and its duration (metrics and the perf harness).
	Rendered func(kind string, d time.Duration)
}

func (o *Options) setDefaults() {
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxQueued == 0 {
		o.MaxQueued = 8 << 20
	}
	if o.MaxRegions == 0 {
		o.MaxRegions = 64
	}
	if o.CheckEvery == 0 {
		o.CheckEvery = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// clientMsg is a message from the tab.
type clientMsg struct {
	T      string `json:"t"` // sub, unsub, pause, resume, ping
	ID     string `json:"id,omitempty"`
	Region string `json:"region,omitempty"`
	Params string `json:"params,omitempty"`
}

// serverMsg is a message to the tab.
type serverMsg struct {
	T      string `json:"t"` // frag, gone, pong, bye
	ID     string `json:"id,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	HTML   string `json:"html,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// sub is one subscribed region of a connection.
type sub struct {
	id, kind string
	region   Region
	cancel   context.CancelFunc
	seq      uint64
	dirty    bool
	last     time.Time // last render
}

// conn is one tab's connection.
type conn struct {
	opts    Options
	ws      *websocket.Conn
	resolve Resolver

	mu      sync.Mutex
	subs    map[string]*sub
	paused  bool
	queue   map[string]serverMsg
	order   []string // ids in queue, oldest first
	queued  int      // bytes in queue
	control []serverMsg

	wake  chan struct{} // capacity 1: the render loop has work
	write chan struct{} // capacity 1: the writer has work
}

// ErrTooSlow ends a connection whose tab does not take its fragments fast enough.
var ErrTooSlow = errors.New("live: tab too slow; disconnected to resync")

var ErrBadMessage = errors.New("live: bad message from the tab")

// Serve runs one tab's connection until the tab goes, ctx ends or the connection fails; it closes ws.
func Serve(ctx context.Context, ws *websocket.Conn, resolve Resolver, opts Options) error {
	opts.setDefaults()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &conn{opts: opts, ws: ws, resolve: resolve, subs: map[string]*sub{}, queue: map[string]serverMsg{},
		wake: make(chan struct{}, 1), write: make(chan struct{}, 1)}
	defer ws.Close()
	if opts.Check != nil {
		if err := opts.Check(ctx); err != nil {
			c.bye(err)
			return err
		}
	}
	ws.SetReadLimit(64 << 10)
	done := make(chan error, 3)
	go func() { done <- c.readLoop(ctx) }()
	go func() { done <- c.writeLoop(ctx) }()
	go func() { done <- c.renderLoop(ctx) }()
	err := <-done
	cancel(err)
	c.mu.Lock()
	for _, s := range c.subs {
		s.cancel()
	}
	c.mu.Unlock()
	_ = ws.Close()
	<-done
	<-done
	return err
}

// bye tells the tab why the connection ends (best effort) before it is closed.
func (c *conn) bye(err error) {
	_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
	reason := "disconnected"
	var g *Gone
	if errors.As(err, &g) {
		reason = g.Reason
	}
	_ = c.ws.WriteJSON(serverMsg{T: "bye", Reason: reason})
}

func (c *conn) readLoop(ctx context.Context) error {
	for {
		var m clientMsg
		if err := c.ws.ReadJSON(&m); err != nil {
			return err
		}
		switch m.T {
		case "sub":
			c.subscribe(ctx, m)
		case "unsub":
			c.unsubscribe(m.ID)
		case "pause":
			c.mu.Lock()
			c.paused = true
			c.mu.Unlock()
		case "resume":
			c.mu.Lock()
			c.paused = false
			c.mu.Unlock()
			c.signal(c.wake)
		case "ping":
			c.sendControl(serverMsg{T: "pong"})
		default:
			return fmt.Errorf("%w: unknown type %q", ErrBadMessage, m.T)
		}
	}
}

func (c *conn) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *conn) sendControl(m serverMsg) {
	c.mu.Lock()
	c.control = append(c.control, m)
	c.mu.Unlock()
	c.signal(c.write)
}

func (c *conn) subscribe(ctx context.Context, m clientMsg) {
	if m.ID == "" || len(m.ID) > 64 {
		c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: "bad subscription id"})
		return
	}
	c.unsubscribe(m.ID) // a re-subscription replaces the old one
	c.mu.Lock()
	full := len(c.subs) >= c.opts.MaxRegions
	c.mu.Unlock()
	if full {
		c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: "too many live regions on this page"})
		return
	}
	region, err := c.resolve(ctx, m.Region, m.Params)
	if err != nil {
		c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: goneReason(err)})
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &sub{id: m.ID, kind: m.Region, region: region, cancel: cancel, dirty: true}
	c.mu.Lock()
	c.subs[m.ID] = s
	c.mu.Unlock()
	go c.watch(sctx, s)
	c.signal(c.wake)
}

func goneReason(err error) string {
	var g *Gone
	if errors.As(err, &g) {
		return g.Reason
	}
	return "this part of the page is not available"
}

// watch runs s's watch until its subscription ends, restarting it (and re-rendering) when it breaks.
func (c *conn) watch(ctx context.Context, s *sub) {
	changed := func() { c.markDirty(s) }
	for {
		err := s.region.Watch(ctx, changed)
		if ctx.Err() != nil {
			return
		}
		c.opts.Logger.Debug("live region watch ended; restarting", "region", s.kind, "err", err)
		changed()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (c *conn) markDirty(s *sub) {
	c.mu.Lock()
	was := s.dirty
	s.dirty = true
	c.mu.Unlock()
	if !was {
		c.signal(c.wake)
	}
}

func (c *conn) unsubscribe(id string) {
	c.mu.Lock()
	s, ok := c.subs[id]
	if ok {
		delete(c.subs, id)
		c.dropQueued(id)
	}
	c.mu.Unlock()
	if ok {
		s.cancel()
	}
}

// dropQueued removes id's queued fragment; c.mu must be held.
func (c *conn) dropQueued(id string) {
	if m, ok := c.queue[id]; ok {
		c.queued -= len(m.HTML)
		delete(c.queue, id)
		for i, o := range c.order {
			if o == id {
				c.order = append(c.order[:i], c.order[i+1:]...)
				break
			}
		}
	}
}

// renderLoop renders dirty regions, each at most once per Interval, and re-checks the connection's right to
// exist every CheckEvery.
func (c *conn) renderLoop(ctx context.Context) error {
	check := c.opts.After(c.opts.CheckEvery)
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-check:
			if c.opts.Check != nil {
				if err := c.opts.Check(ctx); err != nil {
					c.bye(err)
					return err
				}
			}
			check = c.opts.After(c.opts.CheckEvery)
			continue
		case <-timer:
			timer = nil
		case <-c.wake:
		}
		next, err := c.renderDirty(ctx)
		if err != nil {
			return err
		}
		if next > 0 && timer == nil {
			timer = c.opts.After(next)
		}
	}
}

// renderDirty renders every dirty region whose Interval has passed and returns how long until the next one may
// render (0: none waiting).
func (c *conn) renderDirty(ctx context.Context) (time.Duration, error) {
	now := c.opts.Now()
	c.mu.Lock()
	if c.paused {
		c.mu.Unlock()
		return 0, nil
	}
	var due []*sub
	var wait time.Duration
	for _, s := range c.subs {
		if !s.dirty {
			continue
		}
		if left := c.opts.Interval - now.Sub(s.last); !s.last.IsZero() && left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		s.dirty = false
		s.last = now
		due = append(due, s)
	}
	c.mu.Unlock()
	for _, s := range due {
		start := time.Now()
		html, err := s.region.Render(ctx)
		if c.opts.Rendered != nil {
			c.opts.Rendered(s.kind, time.Since(start))
		}
		var g *Gone
		switch {
		case errors.As(err, &g):
			c.unsubscribe(s.id)
			c.sendControl(serverMsg{T: "gone", ID: s.id, Reason: g.Reason})
			continue
		case err != nil:
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			c.opts.Logger.Warn("rendering a live region failed; retrying", "region", s.kind, "err", err)
			c.markDirty(s)
			if wait == 0 || time.Second < wait {
				wait = time.Second
			}
			continue
		}
		if err := c.enqueue(s, html); err != nil {
			return 0, err
		}
	}
	return wait, nil
}

// enqueue queues s's new fragment, replacing one still queued.
func (c *conn) enqueue(s *sub, html []byte) error {
	c.mu.Lock()
	if c.subs[s.id] != s { // unsubscribed while rendering
		c.mu.Unlock()
		return nil
	}
	c.dropQueued(s.id)
	s.seq++
	c.queue[s.id] = serverMsg{T: "frag", ID: s.id, Seq: s.seq, HTML: string(html)}
	c.order = append(c.order, s.id)
	c.queued += len(html)
	over := c.queued > c.opts.MaxQueued
	c.mu.Unlock()
	if over {
		c.bye(&Gone{Reason: "this tab fell behind; reconnecting"})
		return ErrTooSlow
	}
	c.signal(c.write)
	return nil
}

func (c *conn) writeLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.write:
		}
		for {
			c.mu.Lock()
			var m serverMsg
			switch {
			case len(c.control) > 0:
				m = c.control[0]
				c.control = c.control[1:]
			case len(c.order) > 0:
				id := c.order[0]
				c.order = c.order[1:]
				m = c.queue[id]
				delete(c.queue, id)
				c.queued -= len(m.HTML)
			default:
				c.mu.Unlock()
				m.T = ""
			}
			if m.T == "" {
				break
			}
			c.mu.Unlock()
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				return err
			}
		}
	}
}
