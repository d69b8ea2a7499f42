package dns

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Defaults of Config.
const (
	DefaultDomain         = "cluster.local"
	DefaultTTL            = 5 * time.Second // CoreDNS's kubernetes plugin's
	DefaultForwardTimeout = 2 * time.Second
	DefaultResolvConf     = "/etc/resolv.conf"
)

// Config configures a Server.
type Config struct {
	// Domain is the cluster domain (default cluster.local), served from the Index.
	Domain string
	// Listen is the IP and port served over UDP and TCP, the nameserver in pods' resolv.conf, e.g.
	// 10.244.3.1:53. Port 0 picks a free port (the same for both); Server.Addr tells which.
	Listen string
	// Upstreams receive the queries for names outside Domain: "ip" (port 53) or "ip:port", tried in order.
	// Default: the nameservers of ResolvConf.
	Upstreams []string
	// ResolvConf is the host's resolv.conf (default /etc/resolv.conf), read only when Upstreams is empty.
	ResolvConf string
	// NoForward: names outside Domain get SERVFAIL without asking anyone (Upstreams and ResolvConf unused) — for
	// a host whose resolv.conf lists no nameserver.
	NoForward bool
	// TTL of the records of the cluster domain and of its SOA's negative answers (default 5 s); whole
	// seconds.
	TTL time.Duration
	// ForwardTimeout bounds one exchange with one upstream (default 2 s).
	ForwardTimeout time.Duration
	// Logger receives debug lines per query and per failed exchange (default: discard).
	Logger *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Domain != "" {
		if _, ok := dns.IsDomainName(c.Domain); !ok {
			return fmt.Errorf("dns: domain %q: not a domain name", c.Domain)
		}
	}
	if _, err := listenAddr(c.Listen); err != nil {
		return err
	}
	for _, u := range c.Upstreams {
		if _, err := upstreamAddr(u); err != nil {
			return err
		}
	}
	switch {
	case c.TTL < 0 || c.TTL > 0 && c.TTL < time.Second || c.TTL > math.MaxInt32*time.Second:
		return fmt.Errorf("dns: ttl %s: want 0 (the default) or 1 s to %d s", c.TTL, math.MaxInt32)
	case c.ForwardTimeout < 0:
		return fmt.Errorf("dns: forward timeout %s: want 0 (the default) or more", c.ForwardTimeout)
	}
	return nil
}

// withDefaults returns c with its defaults filled in and its names and addresses normalized; it reads
// ResolvConf when Upstreams is empty. c is valid.
func (c Config) withDefaults() (Config, error) {
	c.Domain = strings.ToLower(strings.TrimSuffix(cmp.Or(c.Domain, DefaultDomain), "."))
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.ForwardTimeout = cmp.Or(c.ForwardTimeout, DefaultForwardTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	ups, source := c.Upstreams, "config"
	if c.NoForward {
		c.Upstreams = nil
		return c, nil
	}
	if len(ups) == 0 {
		path := cmp.Or(c.ResolvConf, DefaultResolvConf)
		source = path
		rc, err := dns.ClientConfigFromFile(path)
		if err != nil {
			return c, fmt.Errorf("dns: upstreams from %s: %w", path, err)
		}
		if len(rc.Servers) == 0 {
			return c, fmt.Errorf("dns: upstreams from %s: %w", path, ErrNoUpstreams)
		}
		for _, s := range rc.Servers {
			ups = append(ups, net.JoinHostPort(s, rc.Port))
		}
	}
	listen, _ := listenAddr(c.Listen)
	c.Upstreams = make([]string, 0, len(ups))
	for _, u := range ups {
		a, err := upstreamAddr(u)
		if err != nil {
			return c, fmt.Errorf("dns: upstreams from %s: %w", source, err)
		}
		if a == listen {
			return c, fmt.Errorf("dns: upstream %s from %s is the listen address: queries would loop", a, source)
		}
		c.Upstreams = append(c.Upstreams, a.String())
	}
	return c, nil
}

// ErrNoUpstreams is returned by New when Config.Upstreams is empty and the host's resolv.conf lists no
// nameserver.
var ErrNoUpstreams = errors.New("dns: no upstream nameserver")

func listenAddr(s string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, errors.New("dns: a listen address is required")
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("dns: listen address %q: want ip:port", s)
	}
	return ap, nil
}

func upstreamAddr(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Port() != 0 {
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53), nil
	}
	return netip.AddrPort{}, fmt.Errorf("dns: upstream %q: want ip or ip:port", s)
}
