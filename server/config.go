package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wheelhouse-dev/wheelhouse/version"
)

// Store is what the server needs of the object store (*store.Store implements it).
type Store interface {
	// CurrentRevision is the highest committed revision; an error means the store cannot answer.
	CurrentRevision(ctx context.Context) (int64, error)
}

// Config configures a Server. Zero values take the defaults noted.
type Config struct {
	// Listen is the TCP address to serve on (default 127.0.0.1:8080). Ignored when Listener is set.
	Listen string
	// Listener, when set, is served instead of listening on Listen (tests, socket activation). Start closes it.
	Listener net.Listener
	// Store answers the readiness check and the store metrics. Required.
	Store Store
	// Version is served on /version (default version.Get()).
	Version version.Info
	// Registry receives the server's collectors and is served on /metrics (default a new registry). The server
	// registers the Go and process collectors in it, so the caller must not.
	Registry *prometheus.Registry
	// ReadyTimeout bounds each readiness check and the store query of a metrics scrape (default 2 s).
	ReadyTimeout time.Duration
	// ShutdownTimeout bounds the graceful drain of open requests when Start's context ends; connections still
	// open after it are closed (default 10 s).
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	Logger            *slog.Logger
	// TLS, when set, serves HTTPS with it (the certificates must be set); nil serves plain HTTP.
	TLS *tls.Config
	// TrustedProxies are the reverse proxies in front of the server: a request whose connection comes from one
	// of these networks is attributed to the nearest untrusted address of its X-Forwarded-For (audit records,
	// sign-in throttling). None (the default): the connection's address, whatever the headers say
	// (server/clientip).
	TrustedProxies []netip.Prefix
	// Mount registers further routes (the Kubernetes API, the platform API) on the server's Echo instance.
	Mount []func(e *echo.Echo)
}

func (c *Config) setDefaults() {
	if c.Listen == "" && c.Listener == nil {
		c.Listen = "127.0.0.1:8080"
	}
	if c.Version == (version.Info{}) {
		c.Version = version.Get()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	if c.Store == nil {
		return errors.New("server: Config.Store is required")
	}
	if c.Listener == nil {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("server: listen address %q: want host:port: %w", c.Listen, err)
		}
	}
	if c.ReadyTimeout < 0 || c.ShutdownTimeout < 0 || c.ReadHeaderTimeout < 0 {
		return errors.New("server: timeouts must not be negative")
	}
	return nil
}
