package apiproxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// certificates keeps the proxy's serving certificate: asked from the server at start, renewed at two thirds of
// its life, failures retried with back-off. A handshake before the first one waits for it.
type certificates struct {
	url, credential, domain string
	client                  *http.Client
	now                     func() time.Time

	mu    sync.Mutex
	cert  *tls.Certificate
	ready chan struct{} // closed when the first certificate is in
}

func newCertificates(url, credential, domain string, client *http.Client, now func() time.Time) *certificates {
	return &certificates{url: url, credential: credential, domain: domain, client: client, now: now, ready: make(chan struct{})}
}

// get is tls.Config.GetCertificate.
func (c *certificates) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	select {
	case <-c.ready:
	case <-hello.Context().Done():
		return nil, errors.New("apiproxy: no serving certificate yet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, nil
}

// set puts cert in use.
func (c *certificates) set(cert *tls.Certificate) {
	c.mu.Lock()
	first := c.cert == nil
	c.cert = cert
	c.mu.Unlock()
	if first {
		close(c.ready)
	}
}

// run keeps a valid certificate until ctx ends; failures are reported to onError.
func (c *certificates) run(ctx context.Context, onError func(error)) {
	const minRetry, maxRetry = time.Second, time.Minute
	retry := minRetry
	for {
		wait := retry
		cert, err := c.request(ctx)
		if err == nil {
			c.set(cert)
			retry = minRetry
			life := cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore)
			wait = cert.Leaf.NotBefore.Add(life * 2 / 3).Sub(c.now())
		} else if ctx.Err() == nil {
			onError(err)
			retry = min(retry*2, maxRetry)
			wait += mrand.N(wait / 4) // jitter: the nodes of a cluster do not all ask at once after an outage
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// request makes a key and asks the server to sign it.
func (c *certificates) request(ctx context.Context) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{}
	if c.domain != "" {
		tmpl.DNSNames = []string{"kubernetes.default.svc." + c.domain}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url,
		bytes.NewReader(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.credential)
	req.Header.Set("Content-Type", "application/x-pem-file")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: asking for a serving certificate: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("apiproxy: asking for a serving certificate: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct{ Message string }
		if json.Unmarshal(body, &st) != nil || st.Message == "" {
			st.Message = http.StatusText(resp.StatusCode)
		}
		return nil, fmt.Errorf("apiproxy: the server refused a serving certificate: %d %s", resp.StatusCode, st.Message)
	}
	block, _ := pem.Decode(body)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("apiproxy: the server's answer is not a PEM certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: the server's certificate: %w", err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("apiproxy: the server's certificate is not for the key asked for")
	}
	return &tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key, Leaf: leaf}, nil
}
