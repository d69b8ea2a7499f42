package registries

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testPKI is a CA made for a test, with a server certificate for 127.0.0.1 and a client certificate, and the
// PEM files a configuration names.
type testPKI struct {
	CAFile, CertFile, KeyFile string // the CA's certificate, the client's certificate and key
	OtherKeyFile              string // a key that is not the client certificate's
	NotPEMFile                string // a file that holds no certificate
	Pool                      *x509.CertPool
	Server, Client            tls.Certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "registries test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"),
		KeyFile: filepath.Join(dir, "client-key.pem"), OtherKeyFile: filepath.Join(dir, "other-key.pem"),
		NotPEMFile: filepath.Join(dir, "not.pem"), Pool: x509.NewCertPool(),
	}
	p.Pool.AddCert(ca)
	writeTestFile(t, p.CAFile, pemBlock("CERTIFICATE", caDER))
	writeTestFile(t, p.NotPEMFile, []byte("not a certificate\n"))
	writeTestFile(t, p.OtherKeyFile, keyPEM(t, newKey(t)))
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("leaf %d", serial)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pemBlock("CERTIFICATE", der), keyPEM(t, key)
	}
	serverCert, serverKey := leaf(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	clientCert, clientKey := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	writeTestFile(t, p.CertFile, clientCert)
	writeTestFile(t, p.KeyFile, clientKey)
	if p.Server, err = tls.X509KeyPair(serverCert, serverKey); err != nil {
		t.Fatal(err)
	}
	if p.Client, err = tls.X509KeyPair(clientCert, clientKey); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyPEM(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", der)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeTestFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fataler is what the helpers need of testing.TB and rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// hostsDoc is a decoded hosts.toml: the keys containerd 1.6 reads, nothing else.
type hostsDoc struct {
	Server string
	TLS    docTLS
	// HostTable tells whether the file has a host table at all (containerd 1.6 needs one).
	HostTable bool
	Hosts     []docHost // in file order
}

type docTLS struct {
	CA         string
	Client     [][]string
	SkipVerify bool
}

type docHost struct {
	URL          string
	Capabilities []string
	TLS          docTLS
	OverridePath bool
}

// decodeHostsFile decodes a hosts.toml as TOML restricted to what this package may write: comments, the
// top-level keys server, ca, client and skip_verify, then [host] or [host."<url>"] tables with capabilities, ca,
// client, skip_verify and override_path. Values are basic strings, booleans and arrays of them; TOML basic
// strings with the escapes TOML allows are JSON strings, so values are decoded as JSON. Anything else fails the
// test, as do repeated keys and tables.
func decodeHostsFile(t fataler, path string) hostsDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeHosts(b)
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return doc
}

func decodeHosts(b []byte) (hostsDoc, error) {
	var doc hostsDoc
	var cur *docHost // nil: top level (or the empty [host] table)
	seenKeys := map[string]bool{}
	seenHosts := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		switch {
		case s == "" || strings.HasPrefix(s, "#"):
			continue
		case s == "[host]":
			if doc.HostTable {
				return doc, fmt.Errorf("line %d: host table defined twice", line)
			}
			doc.HostTable, cur = true, nil
			seenKeys = map[string]bool{"[host]": true}
			continue
		case strings.HasPrefix(s, "[host.") && strings.HasSuffix(s, "]"):
			u, err := strconv.Unquote(s[len("[host.") : len(s)-1])
			if err != nil || seenHosts[u] || seenKeys["[host]"] {
				return doc, fmt.Errorf("line %d: bad or repeated host table %s", line, s)
			}
			seenHosts[u] = true
			doc.HostTable = true
			doc.Hosts = append(doc.Hosts, docHost{URL: u})
			cur = &doc.Hosts[len(doc.Hosts)-1]
			seenKeys = map[string]bool{}
			continue
		case strings.HasPrefix(s, "["):
			return doc, fmt.Errorf("line %d: unexpected table %s", line, s)
		}
		key, val, ok := strings.Cut(s, " = ")
		if !ok || seenKeys[key] || (seenKeys["[host]"] && cur == nil) {
			return doc, fmt.Errorf("line %d: not a new key = value: %s", line, s)
		}
		seenKeys[key] = true
		tlsOf := &doc.TLS
		if cur != nil {
			tlsOf = &cur.TLS
		}
		var dst any
		switch key {
		case "server":
			if cur != nil {
				return doc, fmt.Errorf("line %d: server in a host table", line)
			}
			dst = &doc.Server
		case "ca":
			dst = &tlsOf.CA
		case "client":
			dst = &tlsOf.Client
		case "skip_verify":
			dst = &tlsOf.SkipVerify
		case "capabilities", "override_path":
			if cur == nil {
				return doc, fmt.Errorf("line %d: %s outside a host table", line, key)
			}
			dst = &cur.Capabilities
			if key == "override_path" {
				dst = &cur.OverridePath
			}
		default:
			return doc, fmt.Errorf("line %d: unexpected key %q", line, key)
		}
		dec := json.NewDecoder(strings.NewReader(val))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil || dec.More() {
			return doc, fmt.Errorf("line %d: value of %s: %v", line, key, err)
		}
	}
	return doc, sc.Err()
}
