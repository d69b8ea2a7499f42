package live_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

const (
	interval   = 100 * time.Millisecond // Options.Interval in tests (fake time)
	checkEvery = time.Hour              // Options.CheckEvery in tests: no coalescing wait is this long
	patience   = 10 * time.Second       // how long a test waits for something before it fails
	// socketBuffer is the kernel buffer of each end of a connection started with smallBuffers: together they
	// take about 260 KiB on Linux's loopback, so a tab that does not read blocks the server's writer at a
	// fragment of bigHTML bytes. (Below loopback's 64 KiB segment size, data crawls even when the tab reads.)
	socketBuffer = 64 << 10
	bigHTML      = 2 << 20
)

// msg is a protocol message either way: the test's own copy of the wire format.
type msg struct {
	T      string `json:"t"`
	ID     string `json:"id,omitempty"`
	Region string `json:"region,omitempty"`
	Params string `json:"params,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	HTML   string `json:"html,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func frag(id string, seq uint64, html string) msg {
	return msg{T: "frag", ID: id, Seq: seq, HTML: html}
}
func gone(id, reason string) msg { return msg{T: "gone", ID: id, Reason: reason} }

// fakeClock is Options.Now and Options.After: time moves only when the test steps it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer     // not fired yet
	asked  []time.Duration // every duration After was called with
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, d)
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	return ch
}

// Step moves the clock d forward and fires the timers due by then.
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	waiting := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			waiting = append(waiting, t)
			continue
		}
		t.ch <- c.now
	}
	c.timers = waiting
}

// pending reports how many timers wait to fire d from now.
func (c *fakeClock) pending(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.at.Sub(c.now) == d {
			n++
		}
	}
	return n
}

// askedFor reports how many times After was called with d.
func (c *fakeClock) askedFor(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.asked {
		if a == d {
			n++
		}
	}
	return n
}

// waitPending waits until n timers wait to fire.
func (c *fakeClock) waitPending(tb testing.TB, n int) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("%d timers", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.timers) >= n
	})
}

// waitTimer waits until a timer waits to fire d from now.
func (c *fakeClock) waitTimer(tb testing.TB, d time.Duration) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("a timer of %v", d), func() bool { return c.pending(d) > 0 })
}

// fakeRegion is a Region whose content, failures and changes the test decides.
type fakeRegion struct {
	mu      sync.Mutex
	html    string
	errs    []error       // the next Renders return these, one each
	gate    chan struct{} // when set, the next Render waits until it is closed
	renders int
	watches []func() // the changed func of every Watch started
	running int      // Watches not returned yet
	broken  chan error
}

var _ live.Region = (*fakeRegion)(nil)

func newRegion(html string) *fakeRegion { return &fakeRegion{html: html, broken: make(chan error)} }

// Watch hands its changed func to the test and returns when ctx ends, or with the error the test sends on
// r.broken.
func (r *fakeRegion) Watch(ctx context.Context, changed func()) error {
	r.mu.Lock()
	r.watches = append(r.watches, changed)
	r.running++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.broken:
		return err
	}
}

func (r *fakeRegion) Render(ctx context.Context) ([]byte, error) {
	r.mu.Lock()
	r.renders++
	gate := r.gate
	r.gate = nil
	var err error
	if len(r.errs) > 0 {
		err, r.errs = r.errs[0], r.errs[1:]
	}
	html := r.html
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return []byte(html), nil
}

func (r *fakeRegion) set(html string) {
	r.mu.Lock()
	r.html = html
	r.mu.Unlock()
}

// fail makes the next Renders return errs, one each.
func (r *fakeRegion) fail(errs ...error) {
	r.mu.Lock()
	r.errs = append(r.errs, errs...)
	r.mu.Unlock()
}

// block makes the next Render wait until the returned func is called.
func (r *fakeRegion) block() (release func()) {
	gate := make(chan struct{})
	r.mu.Lock()
	r.gate = gate
	r.mu.Unlock()
	return func() { close(gate) }
}

func (r *fakeRegion) renderCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renders
}

func (r *fakeRegion) watching() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// waitRenders waits until Render has been called n times.
func (r *fakeRegion) waitRenders(tb testing.TB, n int) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("render %d", n), func() bool { return r.renderCount() >= n })
}

// changed waits until the region's n-th Watch (from 1) has started and returns its changed func.
func (r *fakeRegion) changed(tb testing.TB, n int) func() {
	tb.Helper()
	var f func()
	eventually(tb, fmt.Sprintf("watch %d", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.watches) >= n {
			f = r.watches[n-1]
		}
		return f != nil
	})
	return f
}

// resolver resolves the kinds in regions, "probe", and two that fail: "denied" is refused with a *live.Gone
// whose reason is the params, "broken" with an ordinary error.
func resolver(regions map[string]*fakeRegion, probe *fakeRegion) live.Resolver {
	return func(ctx context.Context, kind, params string) (live.Region, error) {
		switch kind {
		case "probe":
			return probe, nil
		case "denied":
			return nil, fmt.Errorf("resolving %s: %w", kind, &live.Gone{Reason: params})
		case "broken":
			return nil, errors.New("database on fire")
		}
		if r, ok := regions[kind]; ok {
			return r, nil
		}
		return nil, &live.Gone{Reason: "unknown region " + kind}
	}
}

// harness is one tab connected to live.Serve through a real HTTP server and websocket.
type harness struct {
	tb     testing.TB
	clock  *fakeClock
	ws     *websocket.Conn
	served chan error // Serve's result
	ended  bool       // served has been read
	probes int        // probe subscriptions so far
	// lastSeq and ordinal renumber each region's fragments 1, 2, ... (read).
	lastSeq, ordinal map[string]uint64
}

type setup struct {
	opts    live.Options // Interval and CheckEvery default to the constants; Now and After are the fake clock
	regions map[string]*fakeRegion
	// smallBuffers shrinks the kernel buffers of both ends to socketBuffer, so that a tab that does not read
	// blocks the server's writer at its first big fragment.
	smallBuffers bool
}

func start(tb testing.TB, s setup) *harness {
	tb.Helper()
	h := &harness{tb: tb, clock: newFakeClock(), served: make(chan error, 1), lastSeq: map[string]uint64{},
		ordinal: map[string]uint64{}}
	opts := s.opts
	if opts.Interval == 0 {
		opts.Interval = interval
	}
	if opts.CheckEvery == 0 {
		opts.CheckEvery = checkEvery
	}
	opts.Now, opts.After = h.clock.Now, h.clock.After
	opts.Logger = slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	resolve := resolver(s.regions, newRegion("probe"))
	ctx := tb.Context()
	var upgrader websocket.Upgrader
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			h.served <- err
			return
		}
		h.served <- live.Serve(ctx, ws, resolve, opts)
	}))
	dialer := websocket.Dialer{HandshakeTimeout: patience}
	if s.smallBuffers {
		srv.Listener = smallBuffers{srv.Listener}
		dialer.NetDialContext = dialSmallBuffers
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	ws, _, err := dialer.DialContext(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		tb.Fatalf("dialing the live endpoint: %v", err)
	}
	tb.Cleanup(func() { _ = ws.Close() })
	h.ws = ws
	tb.Cleanup(func() { // the test's context has ended: nothing of the connection may outlive the test
		if !h.ended {
			h.end()
		}
	})
	return h
}

type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketBuffer)
	}
	return c, err
}

func dialSmallBuffers(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(socketBuffer)
	}
	return c, err
}

// end waits for Serve to return and returns its error.
func (h *harness) end() error {
	h.tb.Helper()
	select {
	case err := <-h.served:
		h.ended = true
		return err
	case <-time.After(patience):
		h.tb.Fatalf("Serve did not return within %v", patience)
		return nil
	}
}

func (h *harness) send(m msg) {
	h.tb.Helper()
	if err := h.ws.WriteJSON(m); err != nil {
		h.tb.Fatalf("sending %+v: %v", m, err)
	}
}

// sub subscribes id (again: its fragments are numbered anew, as the page's script does).
func (h *harness) sub(id, kind string) {
	h.tb.Helper()
	delete(h.lastSeq, id)
	delete(h.ordinal, id)
	h.send(msg{T: "sub", ID: id, Region: kind})
}
func (h *harness) unsub(id string) { h.tb.Helper(); h.send(msg{T: "unsub", ID: id}) }

// read reads the next message. A fragment's seq is shown as its ordinal in its region (1, 2, ...): the server
// numbers fragments from one counter for every tab (shared frames), and a tab only needs them to grow.
func (h *harness) read() msg {
	h.tb.Helper()
	_ = h.ws.SetReadDeadline(time.Now().Add(patience))
	var m msg
	if err := h.ws.ReadJSON(&m); err != nil {
		h.tb.Fatalf("reading a message: %v", err)
	}
	if m.T == "frag" {
		if m.Seq <= h.lastSeq[m.ID] {
			h.tb.Fatalf("fragment %+v: seq did not grow (last %d)", m, h.lastSeq[m.ID])
		}
		h.lastSeq[m.ID] = m.Seq
		h.ordinal[m.ID]++
		m.Seq = h.ordinal[m.ID]
	}
	return m
}

func (h *harness) expect(want msg) {
	h.tb.Helper()
	if diff := cmp.Diff(want, h.read()); diff != "" {
		h.tb.Fatalf("message (-want +got):\n%s", diff)
	}
}

// readFrags reads n messages, which must be fragments for different regions, and returns them by id.
func (h *harness) readFrags(n int) map[string]msg {
	h.tb.Helper()
	got := map[string]msg{}
	for range n {
		m := h.read()
		if m.T != "frag" || got[m.ID].T != "" {
			h.tb.Fatalf("got %+v, want a first fragment for another region", m)
		}
		got[m.ID] = m
	}
	return got
}

// expectClosed reads until the server has closed the connection: the messages still in flight are discarded.
func (h *harness) expectClosed() {
	h.tb.Helper()
	_ = h.ws.SetReadDeadline(time.Now().Add(patience))
	for {
		_, _, err := h.ws.ReadMessage()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			h.tb.Fatalf("the connection is still open after %v", patience)
		}
		if err != nil {
			return
		}
	}
}

// sync sends a ping and returns the messages that arrive before its pong: the server has handled every
// message the tab sent before (its reader takes them in order).
func (h *harness) sync() []msg {
	h.tb.Helper()
	h.send(msg{T: "ping"})
	var got []msg
	for m := h.read(); m.T != "pong"; m = h.read() {
		got = append(got, m)
	}
	return got
}

// settle waits until every render due when it is called has been rendered and sent, and returns the messages
// that arrived meanwhile. It subscribes two probe regions one after the other and reads until the fragment of
// each arrives: the pass of the render loop that renders the first takes every region due at that time, and
// the second renders in a later pass; fragments are sent oldest first, control messages before them.
func (h *harness) settle() []msg {
	h.tb.Helper()
	var got []msg
	for range 2 {
		h.probes++
		id := fmt.Sprintf("probe-%d", h.probes)
		h.sub(id, "probe")
		for m := h.read(); m.ID != id; m = h.read() {
			got = append(got, m)
		}
		h.unsub(id)
	}
	return got
}

// eventually polls cond until it holds, failing tb after patience.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	timeout := time.After(patience)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			tb.Fatalf("timed out after %v waiting for %s", patience, what)
		}
	}
}

func equal[T comparable](tb testing.TB, what string, got, want T) {
	tb.Helper()
	if got != want {
		tb.Errorf("%s = %v, want %v", what, got, want)
	}
}
