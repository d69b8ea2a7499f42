package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/yamux"
)

// Config configures the agent's end of the tunnel.
type Config struct {
	// URL is the server's agent endpoint: wss://<server>/clusters/<id>/agent/connect.
	URL string
	// Token is the node credential, sent as "Authorization: Bearer <Token>".
	Token string
	// TLS verifies the server (the CA pinned at join). Nil: the system roots.
	TLS *tls.Config
	// Handler serves the kubelet API to the server, one HTTP/1.1 connection per stream.
	Handler http.Handler
	Logger  *slog.Logger
	// Keepalive is the websocket ping interval (default DefaultKeepalive).
	Keepalive time.Duration
	// Backoff paces reconnections (zero value: 1 s doubling to 30 s, reset after a minute up).
	Backoff Backoff
	// HandshakeTimeout bounds dialing and the websocket handshake (default 30 s).
	HandshakeTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Keepalive <= 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 30 * time.Second
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return fmt.Errorf("tunnel: URL %q is not a ws:// or wss:// URL", c.URL)
	}
	if c.Token == "" || c.Handler == nil {
		return errors.New("tunnel: Token and Handler are required")
	}
	return nil
}

// Serve keeps the agent's tunnel up until ctx ends: it connects, serves Handler on every stream the server
// opens, and after any disconnection connects again after cfg.Backoff's delay. Connections and disconnections
// are logged. It returns nil when ctx ends, or an error for an invalid Config; a refused or failed connection is
// retried, never returned (a revoked credential shows in the log as repeated refusals).
func Serve(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger.With("url", cfg.URL)
	bo := cfg.Backoff
	for {
		start := time.Now()
		connected, err := serveOnce(ctx, cfg, log)
		if ctx.Err() != nil {
			return nil
		}
		var up time.Duration
		if connected {
			up = time.Since(start)
		}
		wait := bo.Next(up)
		if connected {
			log.Warn("agent tunnel disconnected", "err", err, "up", up.Round(time.Millisecond), "retry in", wait.Round(time.Millisecond))
		} else {
			log.Warn("agent tunnel could not connect", "err", err, "retry in", wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// serveOnce connects and serves one session until it ends; connected says whether the handshake succeeded.
func serveOnce(ctx context.Context, cfg Config, log *slog.Logger) (connected bool, err error) {
	ws, err := dial(ctx, cfg)
	if err != nil {
		return false, err
	}
	conn := newWSConn(ws, cfg.Keepalive)
	sess, err := yamux.Server(conn, yamuxConfig(cfg.Keepalive, log))
	if err != nil {
		_ = conn.Close()
		return true, err
	}
	log.Info("agent tunnel connected")
	stop := context.AfterFunc(ctx, func() { _ = sess.Close() })
	defer stop()
	srv := &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	err = srv.Serve(sessionListener{sess}) // returns when the session ends; closes it
	_ = srv.Close()                        // ends the streams still being served
	_ = conn.Close()
	if ctx.Err() != nil {
		log.Info("agent tunnel closed")
	}
	return true, err
}

// dial opens the websocket, authenticated with the node credential.
func dial(ctx context.Context, cfg Config) (*websocket.Conn, error) {
	d := websocket.Dialer{TLSClientConfig: cfg.TLS, HandshakeTimeout: cfg.HandshakeTimeout,
		Proxy: http.ProxyFromEnvironment, Subprotocols: []string{Subprotocol}}
	h := http.Header{"Authorization": {"Bearer " + cfg.Token}}
	dctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	ws, resp, err := d.DialContext(dctx, cfg.URL, h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("tunnel: connect to %s: %s: %w", cfg.URL, resp.Status, err)
		}
		return nil, fmt.Errorf("tunnel: connect to %s: %w", cfg.URL, err)
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close()
		return nil, fmt.Errorf("tunnel: %s did not agree to subprotocol %s", cfg.URL, Subprotocol)
	}
	return ws, nil
}

// yamuxConfig is the session configuration of both ends, its log at debug level. yamux's own keepalive is off:
// the websocket's (a peer silent for three intervals is dead) watches the same connection, while yamux's gave a
// pong ten seconds (its write timeout) — on a server or an agent busy enough to answer late (1,000 hollow nodes
// on two cores) it closed hundreds of live sessions at once, and their reconnections made the server busier.
func yamuxConfig(keepalive time.Duration, log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false
	c.ConnectionWriteTimeout = min(c.ConnectionWriteTimeout, 3*keepalive)
	c.StreamOpenTimeout = min(c.StreamOpenTimeout, 3*keepalive)
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return c
}

// sessionListener is the session as the http.Server's listener, with final Accept errors: a session that died
// of a read timeout reports a "temporary" net.Error, which http.Server would retry forever.
type sessionListener struct{ *yamux.Session }

func (l sessionListener) Accept() (net.Conn, error) {
	c, err := l.Session.Accept()
	if err != nil {
		return nil, fmt.Errorf("tunnel: session ended: %w", err) // not a net.Error
	}
	return c, nil
}
