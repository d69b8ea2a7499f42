package servingcert

import (
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
