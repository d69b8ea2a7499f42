package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
)

// idleTimeout closes keep-alive connections that sit unused this long.
const idleTimeout = 2 * time.Minute

// Server is Wheelhouse's HTTP server. Create it with New and run it with Start.
type Server struct {
	cfg     Config
	log     *slog.Logger
	echo    *echo.Echo
	metrics *httpMetrics
	quiet   map[string]bool // routes of probes and scrapes, logged at debug level unless they fail; set by New
}

// New builds a Server from cfg and registers its metrics in cfg.Registry. It does not listen yet.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := registerMetrics(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: m, quiet: map[string]bool{}}
	s.echo = s.newEcho()
	return s, nil
}

func (s *Server) newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// The one place the client's address is worked out; handlers read it with clientip.Of (or c.RealIP()).
	extract := clientip.Extractor(s.cfg.TrustedProxies)
	e.IPExtractor = extract
	// Outermost first: every request gets an ID and its client address, is logged and counted, and no panic
	// gets past recoverPanic.
	e.Use(s.requestID, clientip.Middleware(extract), s.observe, s.recoverPanic)
	s.routes(e)
	return e
}

func (s *Server) routes(e *echo.Echo) {
	live := []check{{name: "ping", fn: ping}}
	ready := []check{{name: "ping", fn: ping}, {name: "store", fn: s.storeCheck}}
	s.healthRoutes(e, "/healthz", live)
	s.healthRoutes(e, "/livez", live)
	s.healthRoutes(e, "/readyz", ready)
	s.quietGET(e, "/metrics", echo.WrapHandler(s.metrics.handler))
	e.GET("/version", s.getVersion)
	for _, mount := range s.cfg.Mount {
		mount(e)
	}
}

// quietGET registers a probe or scrape route: logged at debug level unless it fails, as they come every few
// seconds.
func (s *Server) quietGET(e *echo.Echo, path string, h echo.HandlerFunc) {
	e.GET(path, h)
	s.quiet[path] = true
}

// Handler is the server's HTTP handler, for tests (httptest) and for embedding.
func (s *Server) Handler() http.Handler { return s.echo }

// Start listens (unless Config.Listener is set) and serves until ctx is done, then stops accepting connections,
// waits up to Config.ShutdownTimeout for open requests to finish, closes whatever is still open and returns nil.
// It returns an error when it cannot listen or the listener fails.
func (s *Server) Start(ctx context.Context) error {
	l := s.cfg.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", s.cfg.Listen); err != nil {
			return fmt.Errorf("server: listen on %s: %w", s.cfg.Listen, err)
		}
	}
	scheme := "http"
	if s.cfg.TLS != nil {
		// Offer HTTP/2: client-go multiplexes its requests and watches over one connection instead of one TLS
		// connection per watch. net/http serves h2 on the connections that negotiate it.
		cfg := s.cfg.TLS.Clone()
		for _, p := range []string{"h2", "http/1.1"} {
			if !slices.Contains(cfg.NextProtos, p) {
				cfg.NextProtos = append(cfg.NextProtos, p)
			}
		}
		l, scheme = tls.NewListener(l, cfg), "https"
	}
	hs := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Requests keep ctx's values but not its cancellation: shutdown lets them finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	s.log.Info("serving HTTP", "url", scheme+"://"+l.Addr().String())
	select {
	case err := <-served:
		return fmt.Errorf("server: serve on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	return s.shutdown(ctx, hs, served)
}

func (s *Server) shutdown(ctx context.Context, hs *http.Server, served <-chan error) error {
	s.log.Info("shutting down HTTP server", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("open requests did not finish in time; closing their connections", "err", err)
		_ = hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: serve: %w", err)
	}
	s.log.Info("HTTP server stopped")
	return nil
}

func (s *Server) getVersion(c echo.Context) error {
	return c.JSON(http.StatusOK, s.cfg.Version)
}
