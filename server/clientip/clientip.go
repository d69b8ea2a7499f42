// Package clientip decides which address a request comes from, for audit records and per-address sign-in
// throttling.
//
// By default it is the connection's peer address: X-Forwarded-For and X-Real-IP are ignored, since any client can
// send them. An operator who puts reverse proxies in front of the server names them (Extractor's trusted
// networks: the server's --trusted-proxies): a request whose connection comes from a trusted proxy is attributed
// to the nearest address of its X-Forwarded-For that is not itself a trusted proxy (Echo's
// ExtractIPFromXFFHeader, with none of Echo's default trusted ranges: loopback, link-local and private networks
// are trusted only when named). X-Real-IP is never read.
//
// The server works the address out once per request (Middleware, with the one extractor it has) and keeps it
// in the request's context, where requests made in process on the caller's behalf (the dashboard's calls of
// the platform API) find it; Of reads it there. Every Echo instance that serves requests sets its IPExtractor
// to Of, so that echo.Context.RealIP agrees.
package clientip

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// Extractor is the server's IP extractor: the connection's address, or, from a trusted proxy, the nearest
// untrusted address of X-Forwarded-For. With no trusted networks it never reads a header.
func Extractor(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		p = p.Masked()
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(),
			Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

type addrKey struct{}

// Middleware puts extract's answer in each request's context, for Of.
func Middleware(extract echo.IPExtractor) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			c.SetRequest(r.WithContext(WithAddr(r.Context(), extract(r))))
			return next(c)
		}
	}
}

// WithAddr is ctx carrying addr as the client address of the requests made with it.
func WithAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, addrKey{}, addr)
}

// Of is the address r comes from: the one the server's Middleware worked out, else the connection's address
// (without its port). It never reads a header. It has the type of an echo.IPExtractor.
func Of(r *http.Request) string {
	if addr, ok := r.Context().Value(addrKey{}).(string); ok {
		return addr
	}
	return echo.ExtractIPDirect()(r)
}

// ParseNetworks parses a comma-separated list of networks in CIDR notation ("10.0.0.0/8, 192.0.2.7"); a bare
// address is a network of that one address. An empty list is nil.
func ParseNetworks(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("clientip: %q is neither a network in CIDR notation nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
