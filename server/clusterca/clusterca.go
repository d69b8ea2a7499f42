// Package clusterca keeps each cluster's own CA (docs/design/incluster.md): it signs the certificates the
// cluster's node agents serve its API to pods with (the in-cluster endpoint behind the `kubernetes` Service) and
// is what kube-root-ca.crt publishes. One cluster's CA is never trusted by another cluster's pods.
package clusterca

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wheelhouse-dev/wheelhouse/server/servingcert"
)

// CertValidity is how long an API-proxy certificate is valid (the CAs: ten years).
const CertValidity = 30 * 24 * time.Hour

// Store keeps one CA per cluster (tenancy.Store implements it): fresh is called when the cluster has none yet,
// and the stored one is returned to every caller.
type Store interface {
	ClusterCA(ctx context.Context, cluster string, fresh func() (certPEM, keyPEM []byte, err error)) ([]byte, []byte, error)
}

// Config configures an Authority.
type Config struct {
	Store Store
	// APIServiceIP is the cluster IP of cluster's default/kubernetes Service.
	APIServiceIP func(ctx context.Context, cluster string) (netip.Addr, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authority hands out the clusters' CAs and signs with them. It caches each cluster's parsed CA for cacheFor:
// a CA does not change once stored, but a cluster deleted on another replica and made again under its id has a
// new one.
type Authority struct {
	cfg Config
	mu  sync.Mutex
	cas map[string]*ca
}

type ca struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	read    time.Time // from the store
}

// cacheFor is how long a CA read from the store is used before it is read again.
const cacheFor = time.Minute

// New returns an Authority.
func New(cfg Config) (*Authority, error) {
	if cfg.Store == nil || cfg.APIServiceIP == nil {
		return nil, errors.New("clusterca: Store and APIServiceIP are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authority{cfg: cfg, cas: map[string]*ca{}}, nil
}

// CA returns cluster's CA certificate (PEM), creating the CA on first use.
func (a *Authority) CA(ctx context.Context, cluster string) ([]byte, error) {
	c, err := a.get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return c.certPEM, nil
}

// Forget drops what the Authority caches of a cluster deleted by this replica.
func (a *Authority) Forget(cluster string) {
	a.mu.Lock()
	delete(a.cas, cluster)
	a.mu.Unlock()
}

func (a *Authority) get(ctx context.Context, cluster string) (*ca, error) {
	now := a.cfg.Now()
	a.mu.Lock()
	c := a.cas[cluster]
	a.mu.Unlock()
	if c != nil && now.Sub(c.read) < cacheFor {
		return c, nil
	}
	certPEM, keyPEM, err := a.cfg.Store.ClusterCA(ctx, cluster, func() ([]byte, []byte, error) { return newCA(cluster, a.cfg.Now()) })
	if err != nil {
		return nil, err
	}
	c, err = parseCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("clusterca: the CA of cluster %s: %w", cluster, err)
	}
	c.read = now
	a.mu.Lock()
	a.cas[cluster] = c
	a.mu.Unlock()
	return c, nil
}

// ErrBadRequest marks a certificate request the Authority refuses (the caller's mistake).
var ErrBadRequest = errors.New("clusterca: bad certificate request")

// APIServingNames are the DNS names an API-proxy certificate always holds; the cluster domain adds
// kubernetes.default.svc.<domain>.
var APIServingNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// IssueAPIServing signs, with cluster's CA, the serving certificate node's API proxy presents to the cluster's
// pods (PEM). Of the request only the public key and the cluster domain are taken (a DNS name
// kubernetes.default.svc.<domain>): the names are APIServingNames, kubernetes.default.svc.<domain> and the
// cluster IP of default/kubernetes; server authentication only, CertValidity long.
func (a *Authority) IssueAPIServing(ctx context.Context, cluster, node string, csrDER []byte) ([]byte, error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: the request's signature: %v", ErrBadRequest, err)
	}
	if len(csr.DNSNames) > 1 {
		return nil, fmt.Errorf("%w: one cluster domain at most, not %q", ErrBadRequest, csr.DNSNames)
	}
	names := append([]string(nil), APIServingNames...)
	for _, n := range csr.DNSNames {
		domain, ok := strings.CutPrefix(n, "kubernetes.default.svc.")
		if !ok || domain == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
			return nil, fmt.Errorf("%w: %q is not a name of the cluster's API (kubernetes.default.svc.<cluster domain>)", ErrBadRequest, n)
		}
		names = append(names, n)
	}
	ip, err := a.cfg.APIServiceIP(ctx, cluster)
	if err != nil {
		return nil, err
	}
	c, err := a.get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	now := a.cfg.Now()
	tmpl := &x509.Certificate{SerialNumber: servingcert.Serial(), Subject: pkix.Name{CommonName: "kubernetes", OrganizationalUnit: []string{"node " + node}},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(CertValidity), DNSNames: names, IPAddresses: []net.IP{ip.AsSlice()},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, csr.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err) // the request's key is of a kind x509 cannot sign for
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func newCA(cluster string, now time.Time) ([]byte, []byte, error) {
	cert, key, err := servingcert.NewCA("wheelhouse cluster "+cluster+" CA", now)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

func parseCA(certPEM, keyPEM []byte) (*ca, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the key is not the certificate's")
	}
	return &ca{cert: cert, certPEM: certPEM, key: key}, nil
}

// MemoryStore keeps CAs in this process's memory: for a server without a database (tests, tools). The server
// keeps them in PostgreSQL (tenancy.Store).
type MemoryStore struct {
	mu  sync.Mutex
	cas map[string][2][]byte
}

// ClusterCA implements Store.
func (m *MemoryStore) ClusterCA(_ context.Context, cluster string, fresh func() ([]byte, []byte, error)) ([]byte, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cas[cluster]; ok {
		return c[0], c[1], nil
	}
	c, k, err := fresh()
	if err != nil {
		return nil, nil, err
	}
	if m.cas == nil {
		m.cas = map[string][2][]byte{}
	}
	m.cas[cluster] = [2][]byte{c, k}
	return c, k, nil
}

// Delete forgets cluster's CA (the cluster is gone).
func (m *MemoryStore) Delete(cluster string) {
	m.mu.Lock()
	delete(m.cas, cluster)
	m.mu.Unlock()
}
