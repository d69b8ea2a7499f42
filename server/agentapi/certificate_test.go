package agentapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/clusterca"
)

// newAuthority is a real clusterca.Authority: every test cluster's API service is at 10.96.0.1.
func newAuthority(t *testing.T) *clusterca.Authority {
	a, err := clusterca.New(clusterca.Config{Store: &clusterca.MemoryStore{},
		APIServiceIP: func(context.Context, string) (netip.Addr, error) { return netip.MustParseAddr("10.96.0.1"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func csrPEM(t *testing.T, names ...string) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func servingCertificate(t *testing.T, en *env) {
	const path = "/clusters/c2/agent/serving-certificate"
	a := en.doBody("POST", path, "node-c2-n3", nil, bytes.NewReader(csrPEM(t, "kubernetes.default.svc.cluster.local")))
	if a.code != 200 {
		t.Fatalf("a node's request: %d %s", a.code, a.body)
	}
	b, _ := pem.Decode([]byte(a.body))
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("the answer is not a PEM certificate: %q", a.body)
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(leaf.Subject.OrganizationalUnit, ","), "node n3") ||
		leaf.VerifyHostname("kubernetes.default.svc.cluster.local") != nil || leaf.VerifyHostname("10.96.0.1") != nil {
		t.Errorf("certificate for %v %v %v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
	}

	for _, c := range []struct {
		name, path, token string
		body              []byte
		code              int
		reason            metav1.StatusReason
	}{
		{"no credential", path, "", csrPEM(t), 401, metav1.StatusReasonUnauthorized},
		{"not a node", path, "admin", csrPEM(t), 403, metav1.StatusReasonForbidden},
		{"another cluster's node", path, "node-c1-n1", csrPEM(t), 401, metav1.StatusReasonUnauthorized},
		{"not PEM", path, "node-c2-n3", []byte("hello"), 400, metav1.StatusReasonBadRequest},
		{"a certificate, not a request", path, "node-c2-n3", []byte(a.body), 400, metav1.StatusReasonBadRequest},
		{"too big", path, "node-c2-n3", bytes.Repeat([]byte("x"), 70<<10), 400, metav1.StatusReasonBadRequest},
		{"a foreign name", path, "node-c2-n3", csrPEM(t, "wheelhouse.example.com"), 400, metav1.StatusReasonBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := en.doBody("POST", c.path, c.token, nil, bytes.NewReader(c.body))
			if a.code != c.code || a.status.Reason != c.reason || a.status.Kind != "Status" {
				t.Fatalf("%d %s, want %d %s", a.code, a.body, c.code, c.reason)
			}
		})
	}
}
