package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/yamux"
)

// ErrNotConnected is returned by DialContext when the node has no tunnel to this server.
var ErrNotConnected = errors.New("tunnel: the node's agent is not connected")

// ErrBrowserOrigin is returned by Accept for a request with an Origin header.
var ErrBrowserOrigin = errors.New("tunnel: a browser origin may not connect as an agent")

// RegistryConfig configures the server's end of the tunnels.
type RegistryConfig struct {
	Logger *slog.Logger
	// Keepalive is the websocket ping interval (default DefaultKeepalive).
	Keepalive time.Duration
	// Directory, when set, learns which tunnels this server holds, so other server replicas can forward
	// requests for those nodes here.
	Directory Directory
	// RecheckEvery is how often every tunnel's Check runs (default DefaultRecheckEvery; negative: never, only
	// when Recheck is called).
	RecheckEvery time.Duration
}

// DefaultRecheckEvery is how often a tunnel's credential is checked again by default.
const DefaultRecheckEvery = time.Minute

// Check tells whether the credential a tunnel was accepted with is still good: valid false closes the tunnel;
// an error (the check could not be made, say the database is away) keeps it and is logged.
type Check func(ctx context.Context) (valid bool, err error)

// checkTimeout bounds one Check.
const checkTimeout = 10 * time.Second

// Directory records the tunnels a server holds (server replicas share one, in the database).
type Directory interface {
	// Record says this server now holds k's tunnel.
	Record(ctx context.Context, k Key) error
	// Forget says this server no longer holds k's tunnel (if another server has it by now, that stays).
	Forget(ctx context.Context, k Key) error
}

// directoryTimeout bounds a Directory call.
const directoryTimeout = 5 * time.Second

// Key names one node of one cluster.
type Key struct{ Cluster, Node string }

// Registry is the server's end: the live tunnel of each (cluster, node), through which it opens streams to the
// node's kubelet API. Safe for concurrent use.
type Registry struct {
	cfg      RegistryConfig
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu       sync.Mutex // guards sessions and closed; held only for map operations, never across I/O
	sessions map[Key]session
	closed   bool
	stop     context.CancelFunc // ends the recheck loop
	done     chan struct{}      // closed when the recheck loop has ended
}

// session is one live tunnel and how to check its credential again (nil: never).
type session struct {
	*yamux.Session
	check Check
}

// NewRegistry makes an empty Registry.
func NewRegistry(cfg RegistryConfig) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.RecheckEvery == 0 {
		cfg.RecheckEvery = DefaultRecheckEvery
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &Registry{cfg: cfg, log: cfg.Logger, sessions: map[Key]session{}, stop: stop, done: make(chan struct{})}
	r.upgrader = websocket.Upgrader{Subprotocols: []string{Subprotocol}, HandshakeTimeout: 10 * time.Second,
		ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10,
		CheckOrigin: func(r *http.Request) bool { return r.Header.Get("Origin") == "" }}
	go r.recheckLoop(ctx)
	return r
}

// recheckLoop runs every tunnel's Check each RecheckEvery until ctx ends.
func (r *Registry) recheckLoop(ctx context.Context) {
	defer close(r.done)
	if r.cfg.RecheckEvery < 0 {
		return
	}
	t := time.NewTicker(r.cfg.RecheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Recheck(ctx, func(Key) bool { return true })
		}
	}
}

// Accept upgrades an agent's connect request, already authenticated as node of cluster, to the tunnel of
// (cluster, node), replacing (and closing) any tunnel the key had. check (nil: none) tells later whether the
// credential the agent connected with is still good: it runs every RecheckEvery and at Recheck, and the tunnel
// is closed once it says no. Accept blocks until the tunnel closes and returns nil then. A request with an
// Origin header gets 403 and ErrBrowserOrigin; one that does not offer Subprotocol gets 400; a failed upgrade
// has been answered by the upgrader and its error is returned.
func (r *Registry) Accept(w http.ResponseWriter, req *http.Request, cluster, node string, check Check) error {
	if req.Header.Get("Origin") != "" {
		http.Error(w, "a browser origin may not connect as an agent", http.StatusForbidden)
		return ErrBrowserOrigin
	}
	if !offers(req, Subprotocol) {
		http.Error(w, "the tunnel needs websocket subprotocol "+Subprotocol, http.StatusBadRequest)
		return fmt.Errorf("tunnel: node %s of cluster %s did not offer subprotocol %s", node, cluster, Subprotocol)
	}
	ws, err := r.upgrader.Upgrade(w, req, nil)
	if err != nil {
		return fmt.Errorf("tunnel: upgrade for node %s of cluster %s: %w", node, cluster, err)
	}
	k := Key{cluster, node}
	log := r.log.With("cluster", cluster, "node", node, "remote", req.RemoteAddr)
	conn := newWSConn(ws, r.cfg.Keepalive)
	sess, err := yamux.Client(conn, yamuxConfig(r.cfg.Keepalive, log))
	if err != nil {
		_ = conn.Close()
		return err
	}
	if !r.register(k, session{sess, check}) {
		_ = sess.Close()
		return nil
	}
	log.Info("agent connected")
	r.tellDirectory(req.Context(), k, true, log)
	start := time.Now()
	<-sess.CloseChan()
	_ = conn.Close()
	if r.remove(k, sess) {
		r.tellDirectory(req.Context(), k, false, log)
	}
	log.Info("agent disconnected", "up", time.Since(start).Round(time.Millisecond))
	return nil
}

// tellDirectory records (or forgets) k's tunnel in the Directory, if there is one. A failure is logged: the
// tunnel works on this server regardless, only forwarding from other replicas misses it.
func (r *Registry) tellDirectory(ctx context.Context, k Key, connected bool, log *slog.Logger) {
	if r.cfg.Directory == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), directoryTimeout)
	defer cancel()
	var err error
	if connected {
		err = r.cfg.Directory.Record(ctx, k)
	} else {
		err = r.cfg.Directory.Forget(ctx, k)
	}
	if err != nil {
		log.Warn("cannot update the tunnel directory", "connected", connected, "err", err)
	}
}

// register makes sess the tunnel of k, closing the one it replaces; false once the Registry is closed.
func (r *Registry) register(k Key, sess session) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	old, had := r.sessions[k]
	r.sessions[k] = sess
	r.mu.Unlock()
	if had {
		r.log.Info("agent reconnected; closing its previous tunnel", "cluster", k.Cluster, "node", k.Node)
		_ = old.Close()
	}
	return true
}

// remove forgets sess as k's tunnel unless a newer one replaced it, and reports whether it did.
func (r *Registry) remove(k Key, sess *yamux.Session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[k].Session == sess {
		delete(r.sessions, k)
		return true
	}
	return false
}

func (r *Registry) session(cluster, node string) *yamux.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[Key{cluster, node}].Session
}

// matching returns the sessions whose keys match.
func (r *Registry) matching(match func(Key) bool) map[Key]session {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Key]session{}
	for k, s := range r.sessions {
		if match(k) {
			out[k] = s
		}
	}
	return out
}

// CloseCluster closes every tunnel of cluster (a deleted cluster; its agents are refused when they reconnect).
func (r *Registry) CloseCluster(cluster string) {
	for k, s := range r.matching(func(k Key) bool { return k.Cluster == cluster }) {
		r.log.Info("closing the tunnel of a deleted cluster's node", "cluster", k.Cluster, "node", k.Node)
		_ = s.Close()
	}
}

// Recheck runs the Check of every tunnel whose key matches, one after another, and closes those whose
// credential is no longer good (see Check). It returns once every check has answered or ctx has ended.
func (r *Registry) Recheck(ctx context.Context, match func(Key) bool) {
	for k, s := range r.matching(match) {
		if s.check == nil || s.IsClosed() || ctx.Err() != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		valid, err := s.check(cctx)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn("cannot check an agent's credential again; keeping its tunnel", "cluster", k.Cluster, "node", k.Node, "err", err)
			}
		case !valid:
			r.log.Info("closing the tunnel of an agent whose credential is no longer valid", "cluster", k.Cluster, "node", k.Node)
			_ = s.Close()
		}
	}
}

// Connected reports whether (cluster, node) has a tunnel to this server.
func (r *Registry) Connected(cluster, node string) bool {
	s := r.session(cluster, node)
	return s != nil && !s.IsClosed()
}

// DialContext opens a stream to the kubelet API of node in cluster: a net.Conn carrying one HTTP/1.1
// connection. Without a tunnel for the key (or when it has just closed) it fails at once with an error that
// wraps ErrNotConnected; it never waits for an agent to connect.
func (r *Registry) DialContext(ctx context.Context, cluster, node string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.session(cluster, node)
	if s == nil {
		return nil, fmt.Errorf("node %s of cluster %s: %w", node, cluster, ErrNotConnected)
	}
	c, err := s.OpenStream()
	if errors.Is(err, yamux.ErrSessionShutdown) {
		return nil, fmt.Errorf("node %s of cluster %s: %w", node, cluster, ErrNotConnected)
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel: open a stream to node %s of cluster %s: %w", node, cluster, err)
	}
	return c, nil
}

// Transport is an HTTP transport to the kubelet API of node in cluster: each request runs on a stream of its
// own (streams cost one frame, so nothing is pooled) and upgrades (SPDY, websocket) work. Request URLs need a
// host, which is ignored. Errors wrap ErrNotConnected when the node has no tunnel.
func (r *Registry) Transport(cluster, node string) http.RoundTripper {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return r.DialContext(ctx, cluster, node)
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		Proxy:              nil,
	}
}

// Close closes every tunnel and refuses new ones (at server shutdown; agents reconnect to another replica).
func (r *Registry) Close() {
	r.stop()
	<-r.done
	r.mu.Lock()
	r.closed = true
	sessions := make([]*yamux.Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		sessions = append(sessions, s.Session)
	}
	r.mu.Unlock()
	// Each Accept then removes its session (and tells the Directory).
	for _, s := range sessions {
		_ = s.Close()
	}
}

// offers reports whether the websocket request offers subprotocol p.
func offers(req *http.Request, p string) bool {
	for _, o := range websocket.Subprotocols(req) {
		if o == p {
			return true
		}
	}
	return false
}
