package kubeapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Logs over WebSocket, as upstream's API server streams them (its wsstream reader): a GET of pods/log that asks to
// upgrade gets the log as a WebSocket stream, one message per chunk the kubelet sends, binary for the
// "binary.k8s.io" protocol (or none), base64 text for "base64.binary.k8s.io", and a normal close at the log's
// end. As upstream's, the upgrade happens only once the log is there: a pod without the container, a node that
// cannot be reached, are answered as any request is, with a Status.

// logProtocols are the WebSocket subprotocols of a log stream.
var logProtocols = []string{"binary.k8s.io", "base64.binary.k8s.io"}

// errLogUpgradeFailed ends the Connector's writes when the client's upgrade failed (the upgrader answered it).
var errLogUpgradeFailed = errors.New("kubeapi: the log's websocket upgrade failed")

// logUpgrader accepts any Origin. The Origin check guards credentials a browser attaches by itself (cookies);
// this API takes only an Authorization header, which no page of another site can make a browser send, so a
// foreign Origin carries no one's credentials. Clients send one anyway: upstream's e2e framework (x/net's
// websocket) sends "http://localhost".
var logUpgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 32 * 1024,
	CheckOrigin:     func(*http.Request) bool { return true },
	Subprotocols:    logProtocols,
}

// serveLogWebSocket runs the Connector for req on a plain GET and streams its answer over the WebSocket r asks
// for.
func (rq *request) serveLogWebSocket(req ConnectRequest) error {
	ctx, cancel := context.WithCancel(rq.r.Context())
	defer cancel()
	inner := rq.r.Clone(ctx)
	for _, h := range []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions"} {
		inner.Header.Del(h)
	}
	lw := &logWebSocket{w: rq.w, r: rq.r, header: http.Header{}, cancel: cancel}
	err := rq.api.cfg.Connector.Connect(lw, inner, req)
	if !lw.wroteHeader && err == nil {
		lw.WriteHeader(http.StatusOK) // an empty log: upgrade and close at once
	}
	switch {
	case lw.conn != nil:
		lw.close()
		return nil
	case lw.upgradeFailed || lw.passThrough:
		return nil // the client has its answer
	}
	return err // nothing written: the API answers with a Status
}

// logWebSocket is the ResponseWriter the Connector writes the log to: a success upgrades the client's request and
// turns every write into a message; any other answer goes to the client as it is.
type logWebSocket struct {
	w      http.ResponseWriter
	r      *http.Request
	header http.Header
	cancel context.CancelFunc

	wroteHeader   bool
	passThrough   bool // a non-success answer, written as it is
	upgradeFailed bool // the upgrader answered the client itself
	conn          *websocket.Conn
	base64        bool
	mu            sync.Mutex // guards writes to conn
}

func (l *logWebSocket) Header() http.Header {
	if l.passThrough {
		return l.w.Header()
	}
	return l.header
}

func (l *logWebSocket) WriteHeader(code int) {
	if l.wroteHeader {
		return
	}
	l.wroteHeader = true
	if code != http.StatusOK {
		l.passThrough = true
		for k, v := range l.header {
			l.w.Header()[k] = v
		}
		l.w.WriteHeader(code)
		return
	}
	conn, err := logUpgrader.Upgrade(l.w, l.r, nil)
	if err != nil {
		l.upgradeFailed = true
		l.cancel()
		return
	}
	l.conn, l.base64 = conn, conn.Subprotocol() == "base64.binary.k8s.io"
	go func() { // reads only to notice the client closing, which ends the stream
		for {
			if _, _, err := conn.NextReader(); err != nil {
				l.cancel()
				return
			}
		}
	}()
}

func (l *logWebSocket) Write(p []byte) (int, error) {
	if !l.wroteHeader {
		l.WriteHeader(http.StatusOK)
	}
	if l.passThrough {
		return l.w.Write(p)
	}
	if l.conn == nil {
		return 0, errLogUpgradeFailed
	}
	if len(p) == 0 {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	var err error
	if l.base64 {
		err = l.conn.WriteMessage(websocket.TextMessage, []byte(base64.StdEncoding.EncodeToString(p)))
	} else {
		err = l.conn.WriteMessage(websocket.BinaryMessage, p)
	}
	if err != nil {
		l.cancel()
		return 0, err
	}
	return len(p), nil
}

// Flush is a no-op: every write is a message of its own already.
func (l *logWebSocket) Flush() {
	if l.passThrough {
		if f, ok := l.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// close ends the stream with a normal closure.
func (l *logWebSocket) close() {
	if l.conn == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = l.conn.Close()
}
