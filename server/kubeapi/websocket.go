package kubeapi

import (
	"bytes"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/runtime"
)

// Watches over WebSocket (for browsers and simple clients): the same events as the chunked stream, one JSON
// WatchEvent per text message. Browsers send an Origin; it must be the server's own host, so another site
// cannot open a watch with a user's credentials. Clients without an Origin (kubectl, scripts) are allowed; they
// authenticate with their bearer token like any request.
var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 32 * 1024,
	CheckOrigin:     sameOrigin,
}

// wsWriteTimeout bounds writing one message to a WebSocket client.
const wsWriteTimeout = 10 * time.Second

func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// wsEncoder writes each encoded object as one text message.
type wsEncoder struct {
	conn *websocket.Conn
	enc  runtime.Encoder
}

func (e *wsEncoder) Encode(obj runtime.Object) error {
	var buf bytes.Buffer
	if err := e.enc.Encode(obj, &buf); err != nil {
		return err
	}
	_ = e.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return e.conn.WriteMessage(websocket.TextMessage, bytes.TrimRight(buf.Bytes(), "\n"))
}

// startWebSocket upgrades the watch request; the watch ends when the client closes the socket.
func (ws *watchStream) startWebSocket() error {
	rq := ws.rq
	info, _ := serializerFor("application/json")
	conn, err := upgrader.Upgrade(rq.w, rq.r, nil)
	if err != nil {
		return errWebSocketHandled // the upgrader has answered the client
	}
	ws.enc, ws.encKey = info.Serializer, info.MediaType
	ws.out = &wsEncoder{conn: conn, enc: info.Serializer}
	ws.closer = conn.Close
	go func() { // reads only to notice the client closing
		for {
			if _, _, err := conn.NextReader(); err != nil {
				ws.cancel()
				return
			}
		}
	}()
	return nil
}
