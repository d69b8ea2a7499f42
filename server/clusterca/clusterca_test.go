package clusterca

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// countingStore is a MemoryStore that counts the CAs it makes and knows no cluster "gone".
type countingStore struct {
	MemoryStore
	fresh int
}

func (m *countingStore) ClusterCA(ctx context.Context, cluster string, fresh func() ([]byte, []byte, error)) ([]byte, []byte, error) {
	if cluster == "gone" {
		return nil, nil, errors.New("not found")
	}
	return m.MemoryStore.ClusterCA(ctx, cluster, func() ([]byte, []byte, error) {
		m.fresh++
		return fresh()
	})
}

func newAuthority(t *testing.T, now time.Time) (*Authority, *countingStore) {
	t.Helper()
	st := &countingStore{}
	ips := map[string]string{"a": "10.96.0.1", "b": "172.20.0.1"}
	a, err := New(Config{Store: st, Now: func() time.Time { return now },
		APIServiceIP: func(_ context.Context, cluster string) (netip.Addr, error) {
			return netip.ParseAddr(ips[cluster])
		}})
	if err != nil {
		t.Fatal(err)
	}
	return a, st
}

func csr(t *testing.T, key any, names ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "whatever"},
		DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		t.Fatalf("not a PEM certificate: %q", pemData)
	}
	return p
}

func parse(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemData)
	if b == nil {
		t.Fatalf("not PEM: %q", pemData)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPIServingCertificateIsTheClustersOwn(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a, st := newAuthority(t, now)
	ctx := t.Context()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	certPEM, err := a.IssueAPIServing(ctx, "a", "node-1", csr(t, key, "kubernetes.default.svc.cluster.local"))
	if err != nil {
		t.Fatal(err)
	}
	caA, err := a.CA(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	leaf := parse(t, certPEM)
	if !leaf.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		t.Fatal("the certificate is not for the request's key")
	}
	// Every name an in-cluster client uses verifies against the cluster's CA, for server authentication.
	for _, name := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "10.96.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool(t, caA), CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Not a client certificate, not for other names, not past its life.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool(t, caA), CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the certificate authenticates clients")
	}
	for _, name := range []string{"wheelhouse.example.com", "10.96.0.10", "kubernetes.default.svc.other.domain"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool(t, caA), CurrentTime: now}); err == nil {
			t.Errorf("the certificate is valid for %s", name)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool(t, caA), CurrentTime: now.Add(CertValidity + time.Minute)}); err == nil {
		t.Error("the certificate is valid past CertValidity")
	}
	if leaf.IsCA {
		t.Error("the certificate is a CA")
	}

	// Another cluster's pods do not trust it; its own certificate has its own cluster IP.
	caB, err := a.CA(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "kubernetes.default.svc", Roots: pool(t, caB), CurrentTime: now}); err == nil {
		t.Error("cluster b's CA trusts cluster a's certificate")
	}
	certB, err := a.IssueAPIServing(ctx, "b", "node-9", csr(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parse(t, certB).Verify(x509.VerifyOptions{DNSName: "172.20.0.1", Roots: pool(t, caB), CurrentTime: now}); err != nil {
		t.Error(err)
	}
	if st.fresh != 2 {
		t.Errorf("%d CAs made for two clusters", st.fresh)
	}

	// An RSA key is signed as well (the request's key type is the agent's choice).
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	if _, err := a.IssueAPIServing(ctx, "a", "node-2", csr(t, rsaKey)); err != nil {
		t.Errorf("an RSA request: %v", err)
	}
}

func TestAPIServingRefusesBadRequests(t *testing.T) {
	a, st := newAuthority(t, time.Now())
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tampered := csr(t, key)
	tampered[len(tampered)-3] ^= 0xff // the signature
	for name, req := range map[string][]byte{
		"not DER":           []byte("hello"),
		"bad signature":     tampered,
		"foreign name":      csr(t, key, "wheelhouse.example.com"),
		"bad domain":        csr(t, key, "kubernetes.default.svc.Not_A_Domain"),
		"two domains":       csr(t, key, "kubernetes.default.svc.a.local", "kubernetes.default.svc.b.local"),
		"empty domain":      csr(t, key, "kubernetes.default.svc."),
		"another service":   csr(t, key, "web.default.svc.cluster.local"),
		"prefix not suffix": csr(t, key, "evil.kubernetes.default.svc"),
	} {
		if _, err := a.IssueAPIServing(t.Context(), "a", "n", req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	if _, err := a.IssueAPIServing(t.Context(), "gone", "n", csr(t, key)); err == nil || errors.Is(err, ErrBadRequest) {
		t.Errorf("an unknown cluster: %v", err)
	}
	if st.fresh != 0 {
		t.Errorf("refused requests made %d CAs", st.fresh)
	}
}

func TestCAIsCachedAndForgotten(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st := &MemoryStore{}
	a, err := New(Config{Store: st, Now: func() time.Time { return now },
		APIServiceIP: func(context.Context, string) (netip.Addr, error) { return netip.MustParseAddr("10.96.0.1"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.CA(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	st.Delete("a") // the cluster was deleted and made again by another replica
	if again, _ := a.CA(t.Context(), "a"); string(again) != string(first) {
		t.Fatal("the cached CA was not used")
	}
	now = now.Add(cacheFor)
	second, _ := a.CA(t.Context(), "a")
	if string(second) == string(first) {
		t.Fatal("the CA is cached past cacheFor")
	}
	st.Delete("a") // deleted by this replica
	a.Forget("a")
	if third, _ := a.CA(t.Context(), "a"); string(third) == string(second) {
		t.Fatal("a forgotten cluster's CA is still served")
	}
}
