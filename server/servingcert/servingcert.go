// Package servingcert keeps the server's self-managed TLS identity: a private CA and a serving certificate
// signed by it, in a directory (<data-dir>/tls), created on first use and reused afterwards. Clients pin the CA
// (kubeconfig certificate-authority-data; the agent install script takes it from the join token). Kubernetes
// clients send bearer tokens only over TLS, so the API is served over HTTPS by default.
package servingcert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the directory.
const (
	CAFile   = "ca.crt"
	caKey    = "ca.key"
	certFile = "server.crt"
	keyFile  = "server.key"
)

// Validity of generated certificates; a serving certificate is renewed at start when less than a third is left
// or when a host is missing from it.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
)

// Ensure loads or creates the CA and a serving certificate for hosts (DNS names or IPs; localhost, 127.0.0.1
// and ::1 are always included) in dir, and returns the TLS certificate and the CA in PEM. Keys are written 0600.
func Ensure(dir string, hosts []string, now time.Time) (tls.Certificate, []byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("servingcert: %w", err)
	}
	ca, caPriv, caPEM, err := loadOrCreateCA(dir, now)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	hosts = append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	if cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile)); err == nil &&
		usable(cert, ca, hosts, now) {
		return cert, caPEM, nil
	}
	cert, err := issue(dir, ca, caPriv, hosts, now)
	return cert, caPEM, err
}

// CAStore shares one CA between replicas (tenancy.Store implements it): it keeps the first candidate it is
// offered and returns the kept one to everyone.
type CAStore interface {
	SharedCA(ctx context.Context, certPEM, keyPEM []byte) ([]byte, []byte, error)
}

// EnsureShared is Ensure with the CA shared through store: this directory's CA (created if missing) is offered;
// if another replica's was stored first, that one replaces the local CA files (and the serving certificate is
// issued again from it). So every replica presents a certificate from the same CA, and an existing
// installation's CA becomes the shared one.
func EnsureShared(ctx context.Context, store CAStore, dir string, hosts []string, now time.Time) (tls.Certificate, []byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("servingcert: %w", err)
	}
	if _, _, _, err := loadOrCreateCA(dir, now); err != nil {
		return tls.Certificate{}, nil, err
	}
	localCert, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("servingcert: %w", err)
	}
	localKey, err := os.ReadFile(filepath.Join(dir, caKey))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("servingcert: %w", err)
	}
	sharedCert, sharedKey, err := store.SharedCA(ctx, localCert, localKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("servingcert: shared CA: %w", err)
	}
	if !bytes.Equal(sharedCert, localCert) || !bytes.Equal(sharedKey, localKey) {
		if _, err := tls.X509KeyPair(sharedCert, sharedKey); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("servingcert: the shared CA is unusable: %w", err)
		}
		if err := writeAtomic(filepath.Join(dir, caKey), sharedKey, 0o600); err != nil {
			return tls.Certificate{}, nil, err
		}
		if err := writeAtomic(filepath.Join(dir, CAFile), sharedCert, 0o644); err != nil {
			return tls.Certificate{}, nil, err
		}
	}
	return Ensure(dir, hosts, now) // the serving certificate is re-issued unless signed by the shared CA
}

func loadOrCreateCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CAFile), filepath.Join(dir, caKey))
	if err == nil {
		ca, perr := x509.ParseCertificate(pair.Certificate[0])
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if perr == nil && ok {
			caPEM, rerr := os.ReadFile(filepath.Join(dir, CAFile))
			return ca, key, caPEM, rerr
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("servingcert: CA in %s is unreadable: %w", dir, err)
	}
	ca, key, err := NewCA("wheelhouse-ca", now)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := writePair(dir, CAFile, caKey, ca.Raw, key); err != nil {
		return nil, nil, nil, err
	}
	return ca, key, pemCert(ca.Raw), nil
}

// NewCA makes a self-signed P-256 CA named commonName, valid for ten years from an hour before now.
func NewCA(commonName string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: Serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func issue(dir string, ca *x509.Certificate, caPriv *ecdsa.PrivateKey, hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: Serial(), Subject: pkix.Name{CommonName: "wheelhouse"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caPriv)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writePair(dir, certFile, keyFile, der, key); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
}

// usable reports whether cert is signed by ca, covers every host and has a third of its life left.
func usable(cert tls.Certificate, ca *x509.Certificate, hosts []string, now time.Time) bool {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	if now.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 3).After(leaf.NotAfter) {
		return false
	}
	for _, h := range hosts {
		if h != "" && leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, certName), pemCert(der), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("servingcert: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("servingcert: %w", err)
	}
	return nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Serial is a random certificate serial number (126 bits).
func Serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
