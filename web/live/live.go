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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	// MaxQueued bounds the bytes of rendered fragments waiting to be sent (default 8 MiB); past it, or past
	// MaxRegions+64 control messages (pong, gone) waiting, the tab is too slow and is disconnected (it resyncs
	// when it reconnects).
	MaxQueued int
	// MaxRegions bounds a connection's subscriptions (default 64).
	MaxRegions int
	// Check runs every CheckEvery (default 5 s) and once before the first render: ErrRefresh re-renders every
	// region; any other error ends the connection with a bye that says why (the session ended, the membership was removed). Nil: no check.
	Check      func(ctx context.Context) error
	CheckEvery time.Duration
	// Now and After are the clock (default time.Now and time.After): a dirty region is due when Now has passed
	// its Interval, and After wakes the connection when it will be (and for checks, retries and watch restarts).
	// Tests pass a fake clock to decide when a coalesced render happens. After is called from several goroutines.
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
	// html is a frag's HTML; frame its shared wire form when Seq is the frame's (see frame).
	html  []byte
	frame *frame
}

const (
	retryAfter   = time.Second // a region whose Render failed is rendered again this much later
	restartAfter = time.Second // a broken watch is restarted this much later
	byeTimeout   = time.Second // how long the last writes of a connection ending with a bye may take
	// controlSlack is how many control messages (pong, gone) beyond MaxRegions may wait to be sent; a tab that
	// sends more pings than it reads pongs is too slow.
	controlSlack = 64
)

// sub is one subscribed region of a connection.
type sub struct {
	id, kind string
	region   Region
	cancel   context.CancelFunc
	// guarded by conn.mu
	seq   uint64
	dirty bool
	next  time.Time // the region renders no earlier than this (Options.Now's time; zero: at once)
}

// conn is one tab's connection.
type conn struct {
	opts    Options
	ws      *websocket.Conn
	resolve Resolver

	// mu guards the fields below and the guarded fields of every sub; it is never held while calling out.
	mu      sync.Mutex
	subs    map[string]*sub
	paused  bool
	queue   map[string]serverMsg
	order   []string // ids in queue, oldest first
	queued  int      // bytes in queue
	control []serverMsg

	wake     chan struct{}  // capacity 1: the render loop has work
	write    chan struct{}  // capacity 1: the writer has work
	watchers sync.WaitGroup // the subscriptions' watch goroutines
}

var (
	// ErrRefresh, returned by Options.Check, renders every region again instead of ending the connection: what
	// the user may see changed in a way no region's watch reports (their team role).
	ErrRefresh = errors.New("live: render every region again")
	// ErrTooSlow ends a connection whose tab does not take its fragments fast enough.
	ErrTooSlow = errors.New("live: tab too slow; disconnected to resync")
	// ErrBadMessage ends a connection whose tab sent a message of a type this package does not know.
	ErrBadMessage = errors.New("live: bad message from the tab")
)

// Serve runs one tab's connection until the tab goes, ctx ends or the connection fails, and returns why; it
// closes ws. Only the writer goroutine writes to ws while the connection runs. When Check fails, the tab is told
// why in a bye message (after the write in flight, if it ends within a second) and Serve returns Check's
// error; a tab too slow for its fragments is closed without one (ErrTooSlow: its socket is full).
func Serve(ctx context.Context, ws *websocket.Conn, resolve Resolver, opts Options) error {
	opts.setDefaults()
	c := &conn{opts: opts, ws: ws, resolve: resolve, subs: map[string]*sub{}, queue: map[string]serverMsg{},
		wake: make(chan struct{}, 1), write: make(chan struct{}, 1)}
	defer ws.Close()
	if opts.Check != nil {
		if err := opts.Check(ctx); err != nil && !errors.Is(err, ErrRefresh) {
			c.bye(err)
			return err
		}
	}
	ws.SetReadLimit(64 << 10)
	err := c.run(ctx)
	var b *byeError
	if errors.As(err, &b) {
		return b.err
	}
	return err
}

// byeError ends a connection with a bye message that tells the tab why.
type byeError struct{ err error }

func (e *byeError) Error() string { return e.err.Error() }
func (e *byeError) Unwrap() error { return e.err }

// run runs the reader, the writer and the render loop until one of them ends, stops the others and the
// subscriptions' watches (their contexts are children of run's), and returns the first one's error.
func (c *conn) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	read := make(chan error, 1)
	loops := make(chan error, 2) // the writer and the render loop: both end when ctx does
	go func() { read <- c.readLoop(ctx) }()
	go func() { loops <- c.writeLoop(ctx) }()
	go func() { loops <- c.renderLoop(ctx) }()
	var err error
	running := 2
	select {
	case err = <-read:
		read = nil
	case err = <-loops:
		running--
	}
	cancel(err)
	var b *byeError
	if errors.As(err, &b) {
		_ = c.ws.NetConn().SetWriteDeadline(time.Now().Add(byeTimeout)) // bounds the write in flight
	} else {
		_ = c.ws.Close() // ends a read or a write in flight at once
	}
	for ; running > 0; running-- {
		<-loops
	}
	if b != nil {
		c.bye(b.err) // the writer has ended: this is the only write
	}
	_ = c.ws.Close()
	if read != nil {
		<-read
	}
	c.watchers.Wait()
	return err
}

// bye tells the tab why the connection ends (best effort) before it is closed; nothing else may be writing.
func (c *conn) bye(err error) {
	_ = c.ws.SetWriteDeadline(time.Now().Add(byeTimeout))
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
			if err := c.subscribe(ctx, m); err != nil {
				return err
			}
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
			if err := c.sendControl(serverMsg{T: "pong"}); err != nil {
				return err
			}
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

// sendControl queues m before any fragment; a tab that lets too many of them wait is too slow.
func (c *conn) sendControl(m serverMsg) error {
	c.mu.Lock()
	full := len(c.control) >= c.opts.MaxRegions+controlSlack
	if !full {
		c.control = append(c.control, m)
	}
	c.mu.Unlock()
	if full {
		return ErrTooSlow
	}
	c.signal(c.write)
	return nil
}

func (c *conn) subscribe(ctx context.Context, m clientMsg) error {
	if m.ID == "" || len(m.ID) > 64 {
		return c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: "bad subscription id"})
	}
	c.unsubscribe(m.ID) // a re-subscription replaces the old one
	c.mu.Lock()
	full := len(c.subs) >= c.opts.MaxRegions
	c.mu.Unlock()
	if full {
		return c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: "too many live regions on this page"})
	}
	region, err := c.resolve(ctx, m.Region, m.Params)
	if err != nil {
		return c.sendControl(serverMsg{T: "gone", ID: m.ID, Reason: goneReason(err)})
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &sub{id: m.ID, kind: m.Region, region: region, cancel: cancel, dirty: true}
	c.mu.Lock()
	c.subs[m.ID] = s
	c.mu.Unlock()
	c.watchers.Add(1)
	go func() {
		defer c.watchers.Done()
		c.watch(sctx, s)
	}()
	c.signal(c.wake)
	return nil
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
		case <-c.opts.After(restartAfter):
		}
	}
}

// markAllDirty marks every region for a render (what the user may see changed).
func (c *conn) markAllDirty() {
	c.mu.Lock()
	for _, s := range c.subs {
		s.dirty = true
	}
	c.mu.Unlock()
	c.signal(c.wake)
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
	s := c.subs[id]
	c.mu.Unlock()
	if s != nil {
		c.drop(s)
	}
}

// drop ends s's subscription and drops its queued fragment, if s is still the subscription under its id (a
// render that ends after its region was unsubscribed, or subscribed again, must not touch the new one); it
// reports whether it was.
func (c *conn) drop(s *sub) bool {
	c.mu.Lock()
	ok := c.subs[s.id] == s
	if ok {
		delete(c.subs, s.id)
		c.dropQueued(s.id)
	}
	c.mu.Unlock()
	if ok {
		s.cancel()
	}
	return ok
}

// dropQueued removes id's queued fragment; c.mu must be held.
func (c *conn) dropQueued(id string) {
	if m, ok := c.queue[id]; ok {
		c.queued -= len(m.html)
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
	var check <-chan time.Time
	if c.opts.Check != nil {
		check = c.opts.After(c.opts.CheckEvery)
	}
	var timer <-chan time.Time // fires at timerAt, when a waiting region is due
	var timerAt time.Time
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-check:
			err := c.opts.Check(ctx)
			switch {
			case errors.Is(err, ErrRefresh):
				c.markAllDirty()
			case err != nil:
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return &byeError{err}
			}
			check = c.opts.After(c.opts.CheckEvery)
			if err == nil {
				continue
			}
		case <-timer:
			timer = nil
		case <-c.wake:
		}
		at, waiting, err := c.renderDirty(ctx)
		if err != nil {
			return err
		}
		// A timer set for a later region (or a retry) must not hold back one due sooner.
		if waiting && (timer == nil || at.Before(timerAt)) {
			timer, timerAt = c.opts.After(at.Sub(c.opts.Now())), at
		}
	}
}

// renderDirty renders every dirty region that is due and reports when the first dirty region still waiting
// will be (waiting false: none is, or the tab is paused).
func (c *conn) renderDirty(ctx context.Context) (at time.Time, waiting bool, err error) {
	now := c.opts.Now()
	for _, s := range c.due(now) {
		start := time.Now()
		html, err := s.region.Render(ctx)
		if c.opts.Rendered != nil {
			c.opts.Rendered(s.kind, time.Since(start))
		}
		var g *Gone
		switch {
		case errors.As(err, &g):
			if c.drop(s) {
				if err := c.sendControl(serverMsg{T: "gone", ID: s.id, Reason: g.Reason}); err != nil {
					return time.Time{}, false, err
				}
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				return time.Time{}, false, context.Cause(ctx)
			}
			c.opts.Logger.Warn("rendering a live region failed; retrying", "region", s.kind, "err", err)
			c.retry(s, now.Add(retryAfter))
			continue
		}
		if err := c.enqueue(s, html); err != nil {
			return time.Time{}, false, err
		}
	}
	at, waiting = c.nextDue()
	return at, waiting, nil
}

// due takes the dirty regions whose time has come (none while paused) and marks them clean and not due again
// before an Interval from now.
func (c *conn) due(now time.Time) []*sub {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return nil
	}
	var due []*sub
	for _, s := range c.subs {
		if s.dirty && !now.Before(s.next) {
			s.dirty = false
			s.next = now.Add(c.opts.Interval)
			due = append(due, s)
		}
	}
	return due
}

// retry marks s dirty again, not to render before at.
func (c *conn) retry(s *sub, at time.Time) {
	c.mu.Lock()
	s.dirty = true
	if s.next.Before(at) {
		s.next = at
	}
	c.mu.Unlock()
}

// nextDue reports when the first dirty region will be due (false: none is dirty, or the tab is paused).
func (c *conn) nextDue() (at time.Time, waiting bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return time.Time{}, false
	}
	for _, s := range c.subs {
		if s.dirty && (!waiting || s.next.Before(at)) {
			at, waiting = s.next, true
		}
	}
	return at, waiting
}

// enqueue queues s's new fragment, replacing one still queued.
func (c *conn) enqueue(s *sub, html []byte) error {
	c.mu.Lock()
	if c.subs[s.id] != s { // unsubscribed while rendering
		c.mu.Unlock()
		return nil
	}
	c.dropQueued(s.id)
	// The frame's number, shared by every tab sent this render, unless this region has seen a later one.
	f := frameOf(html)
	msg := serverMsg{T: "frag", ID: s.id, Seq: f.seq, html: html, frame: f}
	if f.seq <= s.seq {
		msg.Seq, msg.frame = s.seq+1, nil
	}
	s.seq = msg.Seq
	c.queue[s.id] = msg
	c.order = append(c.order, s.id)
	c.queued += len(html)
	// One fragment alone never counts as falling behind, however big: the tab would reconnect to get it again.
	over := c.queued > c.opts.MaxQueued && len(c.order) > 1
	c.mu.Unlock()
	if over {
		return ErrTooSlow
	}
	c.signal(c.write)
	return nil
}

// writeLoop sends control messages, then fragments oldest first; it alone writes to the socket while the
// connection runs.
func (c *conn) writeLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.write:
		}
		for ctx.Err() == nil {
			m, ok := c.next()
			if !ok {
				break
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
			if err := c.send(m); err != nil {
				return err
			}
		}
	}
}

// next takes the next message to send (false: none waits).
func (c *conn) next() (serverMsg, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(c.control) > 0:
		m := c.control[0]
		c.control = c.control[1:]
		return m, true
	case len(c.order) > 0:
		id := c.order[0]
		c.order = c.order[1:]
		m := c.queue[id]
		delete(c.queue, id)
		c.queued -= len(m.html)
		return m, true
	}
	return serverMsg{}, false
}

// send writes one message: a shared frame's prepared message, or the message encoded for this tab alone.
func (c *conn) send(m serverMsg) error {
	if m.frame != nil {
		pm, err := m.frame.preparedFor(m)
		if err != nil {
			return err
		}
		return c.ws.WritePreparedMessage(pm)
	}
	b, err := m.encode()
	if err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// encode is the message as the tab reads it.
func (m serverMsg) encode() ([]byte, error) {
	if m.T != "frag" {
		return json.Marshal(m)
	}
	id, err := json.Marshal(m.ID)
	if err != nil {
		return nil, err
	}
	q := frameOf(m.html).quoted
	b := make([]byte, 0, len(q)+len(id)+48)
	b = append(b, `{"t":"frag","id":`...)
	b = append(b, id...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, m.Seq, 10)
	b = append(b, `,"html":`...)
	b = append(b, q...)
	return append(b, '}'), nil
}

// Shared frames. The regions of many tabs share one render (web's render cache): 200 tabs showing one list are
// sent the same HTML. A frame is that HTML's wire form, made once: quoted as a JSON string (quoting it for each
// tab was a fifth of the server's CPU with 200 tabs), numbered from one counter for all renders (a tab's region
// still sees its numbers grow), and, per region id (tabs of the same page use the same ids), the prepared
// websocket message, compressed once for every connection (compressing it for each was the next quarter).
// Frames are kept by the address of their HTML; a frame holds the HTML, so the address cannot be reused while
// it is kept.

type frame struct {
	html   []byte
	quoted []byte
	seq    uint64

	mu       sync.Mutex
	prepared map[string]*websocket.PreparedMessage // by region id
}

var (
	frames = struct {
		sync.Mutex
		m map[*byte]*frame
	}{m: map[*byte]*frame{}}
	frameSeq atomic.Uint64
)

// maxFrames bounds the kept frames (all are dropped when it is reached).
const maxFrames = 256

// frameOf is html's frame, made on first use.
func frameOf(html []byte) *frame {
	if len(html) == 0 {
		return &frame{quoted: []byte(`""`), seq: frameSeq.Add(1)}
	}
	p := unsafe.SliceData(html)
	frames.Lock()
	defer frames.Unlock()
	if f, ok := frames.m[p]; ok && len(f.html) == len(html) {
		return f
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)     // a JSON string may hold < > & as they are; escaping them grew every tag
	_ = enc.Encode(string(html)) // a string always encodes
	f := &frame{html: html, quoted: bytes.TrimSuffix(buf.Bytes(), []byte("\n")), seq: frameSeq.Add(1)}
	if len(frames.m) >= maxFrames {
		clear(frames.m)
	}
	frames.m[p] = f
	return f
}

// preparedFor is the frame's message for region id, prepared once.
func (f *frame) preparedFor(m serverMsg) (*websocket.PreparedMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pm, ok := f.prepared[m.ID]; ok {
		return pm, nil
	}
	b, err := m.encode()
	if err != nil {
		return nil, err
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		return nil, err
	}
	if f.prepared == nil {
		f.prepared = map[string]*websocket.PreparedMessage{}
	}
	if len(f.prepared) < 64 { // ids are a page's regions: r0, r1, ...
		f.prepared[m.ID] = pm
	}
	return pm, nil
}
