package agentapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ForwardedHeader marks a request one server replica forwarded to another because the other holds the node's
// tunnel. A forwarded request is never forwarded again: a replica that has lost the tunnel meanwhile answers
// 503, and the client retries.
const ForwardedHeader = "X-Wheelhouse-Forwarded-To-Tunnel"

// tunnelPeer returns the base URL of the replica to forward r to: another replica holds node's tunnel, this
// one does not, and r was not forwarded already.
func (a *API) tunnelPeer(r *http.Request, cluster, node string) (string, bool) {
	if a.cfg.Peers == nil || r.Header.Get(ForwardedHeader) != "" || a.cfg.Tunnels.Connected(cluster, node) {
		return "", false
	}
	peer, ok, err := a.cfg.Peers.TunnelPeer(r.Context(), cluster, node)
	if err != nil {
		a.log.WarnContext(r.Context(), "cannot look up which replica holds a node's tunnel", "cluster", cluster,
			"node", node, "err", err)
		return "", false
	}
	return peer, ok
}

// forward passes r, as the client sent it (credentials included), to the replica at peer, which
// authenticates, authorizes and serves it as if the client had reached it directly. Upgrades pass through.
func (a *API) forward(w http.ResponseWriter, r *http.Request, peer, node string) error {
	base, err := url.Parse(peer)
	if err != nil {
		a.log.ErrorContext(r.Context(), "bad peer URL in the tunnel directory", "url", peer, "err", err)
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's agent is not connected", node))
	}
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Host = base.Host
			pr.Out.Header.Set(ForwardedHeader, "1")
			pr.SetXForwarded()
		},
		Transport:     a.cfg.PeerTransport,
		FlushInterval: -1,
		ErrorHandler:  func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	rp.ServeHTTP(w, r)
	if proxyErr == nil {
		return nil
	}
	if r.Context().Err() != nil {
		return r.Context().Err()
	}
	a.log.WarnContext(r.Context(), "forwarding to the replica holding a node's tunnel failed", "node", node,
		"peer", peer, "err", proxyErr)
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the server replica holding node %s's tunnel cannot be reached", node))
}
