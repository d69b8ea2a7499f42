package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// replica is this server process among the replicas sharing the database: its identity (in the controller
// lease and the tunnel directory), the URL the others reach it at, and the transport it reaches them with.
type replica struct {
	id, url   string
	transport http.RoundTripper
}

// replicaSelf describes this replica listening on addr. Peers are reached over HTTPS when this replica serves
// it, trusting the shared serving CA (caPEM; nil for a given certificate: the system's roots).
func replicaSelf(cfg serverConfig, addr net.Addr, https bool, caPEM []byte) (replica, error) {
	self := replica{id: replicaIdentity(), url: strings.TrimSuffix(cfg.AdvertiseURL, "/")}
	if self.url == "" {
		host, port, err := net.SplitHostPort(addr.String())
		if err != nil {
			return replica{}, err
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if host, err = os.Hostname(); err != nil {
				return replica{}, err
			}
		}
		scheme := "http"
		if https {
			scheme = "https"
		}
		self.url = scheme + "://" + net.JoinHostPort(host, port)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 0 // streams (logs -f, exec) answer when they answer
	t.IdleConnTimeout = 90 * time.Second
	t.Proxy = nil // replicas reach each other directly
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return replica{}, errors.New("the serving CA is not PEM")
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	self.transport = t
	return self, nil
}

// tunnelDirectory is the replicas' shared record of who holds which agent tunnel, in the database.
type tunnelDirectory struct {
	ten  *tenancy.Store
	self replica
}

var _ tunnel.Directory = tunnelDirectory{}

func (d tunnelDirectory) Record(ctx context.Context, k tunnel.Key) error {
	return d.ten.RecordTunnel(ctx, k.Cluster, k.Node, d.self.id, d.self.url)
}

func (d tunnelDirectory) Forget(ctx context.Context, k tunnel.Key) error {
	return d.ten.ForgetTunnel(ctx, k.Cluster, k.Node, d.self.id)
}

// TunnelPeer is the URL of the other replica holding the tunnel of node in cluster.
func (d tunnelDirectory) TunnelPeer(ctx context.Context, cluster, node string) (string, bool, error) {
	h, ok, err := d.ten.TunnelHolder(ctx, cluster, node)
	if err != nil || !ok || h.Replica == d.self.id {
		return "", false, err
	}
	return h.URL, true, nil
}

// apiEndpoint is the address the Kubernetes API is advertised at in every cluster (default/kubernetes's
// Endpoints and EndpointSlice, kubeapi.Config.APIEndpoint): the advertise URL's host and port. A host name is
// resolved; a loopback address (a server listening on 127.0.0.1, as make run's) is no address Endpoints may
// hold, so the machine's first global unicast address stands in. The zero value when there is none.
func (r replica) apiEndpoint(ctx context.Context, log *slog.Logger) netip.AddrPort {
	u, err := url.Parse(r.url)
	if err != nil {
		return netip.AddrPort{}
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		port = 443
		if u.Scheme == "http" {
			port = 80
		}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", u.Hostname())
		cancel()
		if err != nil {
			log.Warn("the advertise URL's host does not resolve: default/kubernetes gets the machine's address", "host", u.Hostname(), "err", err)
		}
	}
	for _, a := range addrs {
		if a = a.Unmap(); a.IsGlobalUnicast() {
			return netip.AddrPortFrom(a, uint16(port))
		}
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.AddrPort{}
	}
	for _, ia := range ifaddrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
			return netip.AddrPortFrom(p.Addr(), uint16(port))
		}
	}
	return netip.AddrPort{}
}
