package perf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// liveTab is one websocket client of /ui/live subscribed to one list region, as a browser tab's live.js is: the
// session cookie, the server's Origin, permessage-deflate offered (browsers offer it; the server accepts).
// Its reader goroutine counts fragments and bytes and, for churn pods, notes when each first appeared.
type liveTab struct {
	ws   *websocket.Conn
	wire atomic.Int64 // bytes read from the TCP connection (TLS records)
	// frames and payload count fragments and their message bytes (uncompressed).
	frames, payload atomic.Int64
	first           chan struct{} // closed at the first fragment
	done            chan struct{} // closed when the reader ends
	err             error         // why the reader ended early; read after done

	// Owned by the reader goroutine until done.
	churn *churnLog
	seen  []bool
	lat   []time.Duration
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// listParams is the list region's params as the pods page of ns writes them (web's listQuery.regionParams).
func listParams(ns string) string {
	return url.Values{"cluster": {clusterID}, "resource": {"pods"}, "ns": {ns}}.Encode()
}

// dialTab connects one tab and subscribes it to the pods list of ns; log receives the churn pods it sees.
func (s *dashServer) dialTab(ctx context.Context, ns string, log *churnLog) (*liveTab, error) {
	t := &liveTab{first: make(chan struct{}), done: make(chan struct{}), churn: log}
	d := websocket.Dialer{
		TLSClientConfig:   s.tlsConfig(),
		HandshakeTimeout:  30 * time.Second,
		EnableCompression: true,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, n: &t.wire}, nil
		},
	}
	hdr := http.Header{"Origin": {s.base}, "Cookie": {s.cookieHeader()}}
	ws, res, err := d.DialContext(ctx, "wss"+strings.TrimPrefix(s.base, "https")+"/ui/live", hdr)
	if err != nil {
		if res != nil {
			err = fmt.Errorf("%w (%s)", err, res.Status)
		}
		return nil, fmt.Errorf("open /ui/live: %w", err)
	}
	t.ws = ws
	sub := map[string]string{"t": "sub", "id": "r1", "region": "list", "params": listParams(ns)}
	_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := ws.WriteJSON(sub); err != nil {
		ws.Close()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	go t.read()
	return t, nil
}

var (
	fragPrefix = []byte(`{"t":"frag"`)
	errTabGone = errors.New("the server ended the subscription")
)

// read runs until the connection ends: counting fragments, noting churn pods.
func (t *liveTab) read() {
	defer close(t.done)
	var once sync.Once
	for {
		_, msg, err := t.ws.ReadMessage()
		now := time.Now()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure) && !errors.Is(err, net.ErrClosed) {
				t.err = err
			}
			return
		}
		if !bytes.HasPrefix(msg, fragPrefix) {
			if bytes.HasPrefix(msg, []byte(`{"t":"gone"`)) || bytes.HasPrefix(msg, []byte(`{"t":"bye"`)) {
				t.err = fmt.Errorf("%w: %s", errTabGone, msg)
				return
			}
			continue
		}
		t.frames.Add(1)
		t.payload.Add(int64(len(msg)))
		once.Do(func() { close(t.first) })
		if t.churn != nil {
			t.note(msg, now)
		}
	}
}

// note records, for each churn pod the fragment names for the first time, the time since its create started.
func (t *liveTab) note(msg []byte, now time.Time) {
	rowNames(msg, func(name []byte) {
		i, ok := t.churn.index(name)
		if !ok {
			return
		}
		for len(t.seen) <= i {
			t.seen = append(t.seen, false)
		}
		if t.seen[i] {
			return
		}
		t.seen[i] = true
		if start := t.churn.start(i); start > 0 {
			t.lat = append(t.lat, time.Duration(now.UnixNano()-start))
		}
	})
}

// close ends the connection with a normal closure and waits for the reader (at most a few seconds).
func (t *liveTab) close() {
	_ = t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	select {
	case <-t.done:
	case <-time.After(3 * time.Second):
	}
	t.ws.Close()
	<-t.done
}

// rowNameMarker starts a row's name in a fragment as the wire carries it: the region's HTML is a JSON string,
// so the attribute's quotes are escaped.
var rowNameMarker = []byte(`data-name=\"`)

// rowNames calls fn with the data-name of every element of a fragment message that has one (the list's rows).
func rowNames(msg []byte, fn func(name []byte)) {
	for {
		i := bytes.Index(msg, rowNameMarker)
		if i < 0 {
			return
		}
		msg = msg[i+len(rowNameMarker):]
		j := bytes.IndexByte(msg, '\\')
		if j < 0 {
			return
		}
		fn(msg[:j])
		msg = msg[j:]
	}
}

// churnLog names the churn pods and holds when each create started (Unix ns; 0 for a pod created outside the
// measured window). Names count down so that the newest pod sorts first in the list.
type churnLog struct {
	starts []atomic.Int64
}

const (
	churnPrefix = "aaa-churn-"
	churnTop    = 99_999_999 // churnName(i) is churnPrefix + (churnTop - i), eight digits
)

func newChurnLog(max int) *churnLog { return &churnLog{starts: make([]atomic.Int64, max)} }

func churnName(i int) string { return fmt.Sprintf("%s%08d", churnPrefix, churnTop-i) }

// index is the churn pod number of name, when name is one of this log's pods.
func (l *churnLog) index(name []byte) (int, bool) {
	digits, ok := bytes.CutPrefix(name, []byte(churnPrefix))
	if !ok || len(digits) != 8 {
		return 0, false
	}
	n, err := strconv.Atoi(string(digits))
	if err != nil {
		return 0, false
	}
	i := churnTop - n
	return i, i >= 0 && i < len(l.starts)
}

// start is when pod i's create started (Unix ns), 0 when it is not measured.
func (l *churnLog) start(i int) int64 { return l.starts[i].Load() }

// started records that pod i's create starts now.
func (l *churnLog) started(i int, at time.Time) { l.starts[i].Store(at.UnixNano()) }
