package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
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
