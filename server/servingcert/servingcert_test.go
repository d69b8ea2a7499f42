package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestEnsureCreatesThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	now := time.Now()
	cert, caPEM, err := Ensure(dir, []string{"wheelhouse.example", "10.1.2.3"}, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "wheelhouse.example", "10.1.2.3"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now}); err != nil {
			t.Errorf("certificate does not verify for %s: %v", host, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, keyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server key mode = %v, %v; want 0600", fi.Mode(), err)
	}
	again, caAgain, err := Ensure(dir, []string{"wheelhouse.example"}, now)
	if err != nil || string(caAgain) != string(caPEM) || string(again.Certificate[0]) != string(cert.Certificate[0]) {
		t.Errorf("second Ensure did not reuse the CA and certificate (err %v)", err)
	}
	other, caOther, err := Ensure(dir, []string{"new.example"}, now)
	if err != nil || string(caOther) != string(caPEM) || string(other.Certificate[0]) == string(cert.Certificate[0]) {
		t.Errorf("a new host must reissue the certificate under the same CA (err %v)", err)
	}
	late, _, err := Ensure(dir, []string{"new.example"}, now.Add(300*24*time.Hour))
	if err != nil || string(late.Certificate[0]) == string(other.Certificate[0]) {
		t.Errorf("a certificate near expiry must be renewed (err %v)", err)
	}
}

// memCAStore keeps the first CA offered, like tenancy.Store.SharedCA.
type memCAStore struct{ cert, key []byte }

func (m *memCAStore) SharedCA(_ context.Context, cert, key []byte) ([]byte, []byte, error) {
	if m.cert == nil {
		m.cert, m.key = cert, key
	}
	return m.cert, m.key, nil
}

func TestEnsureSharedGivesReplicasOneCA(t *testing.T) {
	store := &memCAStore{}
	now := time.Now()
	first, second := t.TempDir(), t.TempDir()
	cert1, ca1, err := EnsureShared(context.Background(), store, first, []string{"a.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	// The second replica had a CA of its own already: the shared one replaces it.
	if _, _, err := Ensure(second, nil, now); err != nil {
		t.Fatal(err)
	}
	cert2, ca2, err := EnsureShared(context.Background(), store, second, []string{"b.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, ca2) {
		t.Fatal("the replicas have different CAs")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca1)
	for _, c := range []struct {
		cert tls.Certificate
		host string
	}{{cert1, "a.example"}, {cert2, "b.example"}} {
		leaf, err := x509.ParseCertificate(c.cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: c.host}); err != nil {
			t.Errorf("%s's certificate does not verify against the shared CA: %v", c.host, err)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(second, CAFile))
	if err != nil || !bytes.Equal(onDisk, ca1) {
		t.Fatalf("the second replica's data dir keeps its old CA (%v)", err)
	}
}
