package apiproxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Port is where a node's API proxy listens on its pod gateway (kube-apiserver's secure port).
const Port = 6443

// Config configures a Proxy.
type Config struct {
	// Listen is the address pods reach it at: the node's pod gateway, Port.
	Listen netip.AddrPort
	// APIServer is the cluster's API on the server (https://host:port/clusters/<id>, as the node's identity).
	APIServer string
	// ServerTLS trusts the server (the node's pinned CA); nil: the system's roots.
	ServerTLS *tls.Config
	// Credential is the node's; it is sent only with the request for the proxy's certificate, never forwarded.
	Credential string
	// ClusterDomain adds kubernetes.default.svc.<domain> to the certificate.
	ClusterDomain string
	// Node names the node in its error answers.
	Node   string
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Proxy forwards the requests of the cluster's pods to the cluster's API on the server.
type Proxy struct {
	cfg      Config
	upstream *url.URL
	rp       *httputil.ReverseProxy
	certs    *certificates
	log      *slog.Logger
	l        net.Listener
}

// New builds a Proxy; Listen and Serve run it.
func New(cfg Config) (*Proxy, error) {
	u, err := url.Parse(cfg.APIServer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("apiproxy: the API server %q is not an http(s) URL", cfg.APIServer)
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), ""
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	serverTLS := cfg.ServerTLS
	if serverTLS == nil {
		serverTLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// Upgrades (SPDY and websocket streams of exec, attach, port-forward) need HTTP/1.1 to the server; everything
	// else shares HTTP/2 connections.
	h2 := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: serverTLS.Clone(), ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
	h1TLS := serverTLS.Clone()
	h1TLS.NextProtos = []string{"http/1.1"}
	h1 := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: h1TLS, TLSHandshakeTimeout: 10 * time.Second,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	p := &Proxy{cfg: cfg, upstream: u, log: cfg.Logger}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     upgradeSplit{h1: h1, h2: h2},
		FlushInterval: -1, // watches and logs stream
		ErrorHandler:  p.upstreamError,
		BufferPool:    bufferPool{},
	}
	p.certs = newCertificates(u.String()+"/agent/serving-certificate", cfg.Credential, cfg.ClusterDomain,
		&http.Client{Transport: h2, Timeout: 30 * time.Second}, cfg.Now)
	return p, nil
}

// bufferPool reuses the 32 KiB buffers the reverse proxy copies bodies with (one per request otherwise).
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// upgradeSplit sends upgrade requests over HTTP/1.1, the rest over HTTP/2.
type upgradeSplit struct{ h1, h2 http.RoundTripper }

func (s upgradeSplit) RoundTrip(r *http.Request) (*http.Response, error) {
	if httpguts.HeaderValuesContainsToken(r.Header["Connection"], "Upgrade") {
		return s.h1.RoundTrip(r)
	}
	return s.h2.RoundTrip(r)
}

// Handler serves the proxy's requests (Serve puts it behind TLS).
func (p *Proxy) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !clean(r.URL.Path) {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("the path %q is not clean (no ., .. or empty segments)", r.URL.Path))
			return
		}
		p.rp.ServeHTTP(w, r)
	})
}

// clean reports whether p is an absolute path with no ".", ".." or empty segments (a trailing slash is fine).
func clean(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	c := path.Clean(p)
	return c == p || c+"/" == p
}

// rewrite sends the request to the cluster's prefix on the server, keeping the caller's headers (its token);
// Rewrite has already removed hop-by-hop and X-Forwarded headers.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.URL.Path = p.upstream.Path + in.URL.Path
	out.URL.RawPath = ""
	if in.URL.RawPath != "" {
		out.URL.RawPath = p.upstream.EscapedPath() + in.URL.EscapedPath()
	}
	out.Host = ""
}

// upstreamError answers a request the server could not be reached for.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the caller went away
	}
	p.log.Warn("the cluster's API is unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
	writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable",
		fmt.Sprintf("node %s cannot reach the cluster's API server; the agent's log has the details", p.cfg.Node))
}

// writeStatus answers a Kubernetes Status.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	b, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// Listen binds the proxy's address (so the caller learns at once whether the port is free).
func (p *Proxy) Listen() error {
	l, err := net.Listen("tcp", p.cfg.Listen.String())
	if err != nil {
		return fmt.Errorf("apiproxy: %w", err)
	}
	p.l = l
	return nil
}

// Close releases the bound address of a Proxy that will not Serve (Serve closes it when it ends).
func (p *Proxy) Close() error {
	if p.l == nil {
		return nil
	}
	err := p.l.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Addr is the bound address (after Listen).
func (p *Proxy) Addr() net.Addr { return p.l.Addr() }

// Serve serves on the bound address until ctx ends, keeping the serving certificate renewed.
func (p *Proxy) Serve(ctx context.Context) error {
	if p.l == nil {
		return errors.New("apiproxy: Serve before Listen")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	certsDone := make(chan struct{})
	go func() {
		defer close(certsDone)
		p.certs.run(ctx, func(err error) { p.log.Warn("no serving certificate for the in-cluster API endpoint yet", "err", err) })
	}()
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.certs.get},
		ErrorLog:  slog.NewLogLogger(p.log.Handler(), slog.LevelDebug), BaseContext: func(net.Listener) context.Context { return ctx }}
	stopped := context.AfterFunc(ctx, func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close() // streams still open after the grace period
		}
	})
	defer stopped()
	err := srv.ServeTLS(p.l, "", "")
	cancel()
	<-certsDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
