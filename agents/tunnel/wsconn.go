package tunnel

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Subprotocol is the websocket subprotocol of the tunnel; the server refuses clients that do not offer it.
const Subprotocol = "tunnel.wheelhouse.dev/v1"

// DefaultKeepalive is how often each side pings the other; a peer silent for three intervals is dead.
const DefaultKeepalive = 10 * time.Second

// wsConn is a net.Conn over a websocket: each Write is one binary message, Reads run across message boundaries.
// The keepalive owns the deadlines: it pings every interval and any message or pong moves the read deadline to
// three intervals ahead, so Read fails (and yamux closes the session) when the peer goes silent; each Write must
// finish within three intervals too, so a peer that stops reading cannot block the writer forever. A deadline
// set through SetDeadline and friends holds only until the next message moves it.
type wsConn struct {
	ws       *websocket.Conn
	interval time.Duration
	done     chan struct{} // closed by Close: stops the pinger
	once     sync.Once

	rmu sync.Mutex // guards r; one reader at a time (yamux's receive loop)
	r   io.Reader  // the message being read, nil between messages

	wmu sync.Mutex // guards writes of data messages (gorilla allows one writer; control frames are safe)
}

var _ net.Conn = (*wsConn)(nil)

// newWSConn wraps ws and starts its keepalive (interval > 0).
func newWSConn(ws *websocket.Conn, interval time.Duration) *wsConn {
	c := &wsConn{ws: ws, interval: interval, done: make(chan struct{})}
	c.alive()
	ws.SetPongHandler(func(string) error { c.alive(); return nil })
	ws.SetPingHandler(func(data string) error {
		c.alive()
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.interval))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	})
	go c.ping()
	return c
}

// alive moves the read deadline three intervals ahead.
func (c *wsConn) alive() {
	_ = c.ws.SetReadDeadline(time.Now().Add(3 * c.interval))
}

// ping sends a ping every interval until Close.
func (c *wsConn) ping() {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.interval)); err != nil {
				_ = c.Close()
				return
			}
		}
	}
}

func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			c.alive()
			if typ != websocket.BinaryMessage {
				continue // nothing but binary messages carry the session
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(3 * c.interval))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close sends a close message (best effort) and closes the connection.
func (c *wsConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
			time.Now().Add(time.Second))
		err = c.ws.Close()
	})
	return err
}

func (c *wsConn) LocalAddr() net.Addr  { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

func (c *wsConn) SetDeadline(t time.Time) error {
	_ = c.ws.SetReadDeadline(t)
	return c.ws.SetWriteDeadline(t)
}

func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
