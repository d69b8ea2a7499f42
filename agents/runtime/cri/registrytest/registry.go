// Package registrytest runs a real container registry for tests: Debian's docker-registry package (the CNCF
// distribution registry, OCI distribution / Docker v2 API) as a child process on a port of its own, with TLS from
// a CA made for the test and, when asked, htpasswd basic auth. Images are built with go-containerregistry and
// pushed with its remote package, as `crane push` would.
//
// The tests that pull from it are the node agent's (its image manager, on a real containerd) and the e2e suite's;
// the perf harness (perf/agentperf) uses it as the local registry of the pull-and-start measurement.
package registrytest

import (
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
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
)

// BinaryName is the registry's program in Debian's docker-registry package.
const BinaryName = "docker-registry"

// Options configures a registry.
type Options struct {
	// IP is the address the registry listens on (default 127.0.0.1); its certificate names it, 127.0.0.1 and
	// localhost. Tests whose containerd runs in another network namespace give an address of the host that the
	// namespace reaches.
	IP string
	// Users are the htpasswd accounts (name → password); none: anonymous pulls and pushes.
	Users map[string]string
}

// Registry is a running registry.
type Registry struct {
	// Host is the registry's host:port, as image references name it.
	Host string
	// CAFile is the PEM file of the CA that signed the registry's certificate; CAPEM its content.
	CAFile string
	CAPEM  []byte
	// Dir holds the registry's configuration, certificates and storage.
	Dir string

	users     map[string]string
	transport *http.Transport
	cmd       *exec.Cmd
	exited    chan struct{}
	logMu     sync.Mutex
	log       strings.Builder
}

// Start starts a registry and waits until it answers; it is stopped, and its storage removed, when the test ends.
// The test fails (t.Fatal) when docker-registry is not installed: `make test` installs it (scripts/ensure-tools.sh).
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	r, err := start(opts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// StartProcess is Start outside a test (the perf harness): the caller calls Stop, then removes dir.
func StartProcess(opts Options, dir string) (*Registry, error) { return start(opts, dir) }

func start(opts Options, dir string) (*Registry, error) {
	bin, err := exec.LookPath(BinaryName)
	if err != nil {
		return nil, fmt.Errorf("registrytest: %s not found (Debian's docker-registry package; make test installs it): %w", BinaryName, err)
	}
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	ip := net.ParseIP(opts.IP)
	if ip == nil {
		return nil, fmt.Errorf("registrytest: IP %q is not an IP address", opts.IP)
	}
	r := &Registry{Dir: dir, users: opts.Users, exited: make(chan struct{})}
	certFile, keyFile, err := r.writeCerts(ip)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.CAPEM)
	r.transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 8}
	port, err := freePort(opts.IP)
	if err != nil {
		return nil, err
	}
	r.Host = net.JoinHostPort(opts.IP, strconv.Itoa(port))
	var auth string
	if len(opts.Users) > 0 {
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := writeHtpasswd(htpasswd, opts.Users); err != nil {
			return nil, err
		}
		auth = "auth:\n  htpasswd:\n    realm: wheelhouse-test\n    path: " + strconv.Quote(htpasswd) + "\n"
	}
	storage := filepath.Join(dir, "storage")
	config := "version: 0.1\n" +
		"log:\n  level: warn\n  accesslog:\n    disabled: true\n" +
		"storage:\n  filesystem:\n    rootdirectory: " + strconv.Quote(storage) + "\n  delete:\n    enabled: true\n" +
		"http:\n  addr: " + strconv.Quote(r.Host) + "\n  tls:\n    certificate: " + strconv.Quote(certFile) +
		"\n    key: " + strconv.Quote(keyFile) + "\n" + auth
	configFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	r.cmd = exec.Command(bin, "serve", configFile)
	r.cmd.Stdout, r.cmd.Stderr = (*logWriter)(r), (*logWriter)(r)
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("registrytest: starting %s: %w", bin, err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	if err := r.waitReady(30 * time.Second); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// logWriter keeps the registry's output for failure messages.
type logWriter Registry

func (w *logWriter) Write(p []byte) (int, error) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if w.log.Len() < 64<<10 {
		w.log.Write(p)
	}
	return len(p), nil
}

// Log is what the registry has written so far.
func (r *Registry) Log() string {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.log.String()
}

// waitReady waits until /v2/ answers (200, or 401 with auth).
func (r *Registry) waitReady(timeout time.Duration) error {
	client := &http.Client{Transport: r.transport, Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-r.exited:
			return fmt.Errorf("registrytest: the registry exited: %s", r.Log())
		default:
		}
		resp, err := client.Get("https://" + r.Host + "/v2/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("registrytest: the registry did not answer in %v: %v\n%s", timeout, last, r.Log())
}

// Stop stops the registry (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (r *Registry) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// Ref is the reference of repo[:tag|@digest] in this registry.
func (r *Registry) Ref(repo string) string { return r.Host + "/" + repo }

// Transport is an HTTP transport that trusts the registry's CA.
func (r *Registry) Transport() http.RoundTripper { return r.transport }

// Authenticator is the credentials of user (anonymous when the registry has no users).
func (r *Registry) Authenticator(user string) authn.Authenticator {
	if len(r.users) == 0 {
		return authn.Anonymous
	}
	return &authn.Basic{Username: user, Password: r.users[user]}
}

// anyUser is one of the registry's users ("" without auth), the one pushes use.
func (r *Registry) anyUser() string {
	for u := range r.users {
		return u
	}
	return ""
}

// PushImage pushes img as repo:tag (repo relative to the registry) and returns its manifest digest.
func (r *Registry) PushImage(ctx context.Context, repoTag string, img v1.Image) (v1.Hash, error) {
	ref, err := name.NewTag(r.Ref(repoTag), name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("registrytest: %w", err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(r.transport),
		remote.WithAuth(r.Authenticator(r.anyUser()))); err != nil {
		return v1.Hash{}, fmt.Errorf("registrytest: pushing %s: %w", ref, err)
	}
	return img.Digest()
}

// Push is PushImage for tests.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) v1.Hash {
	t.Helper()
	d, err := r.PushImage(t.Context(), repoTag, img)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// writeCerts makes the test's CA and the registry's certificate for ip, 127.0.0.1 and localhost, and writes
// ca.pem, registry.pem and registry-key.pem in r.Dir.
func (r *Registry) writeCerts(ip net.IP) (certFile, keyFile string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wheelhouse test registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	ips := []net.IP{ip}
	if !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		ips = append(ips, net.IPv4(127, 0, 0, 1))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "wheelhouse test registry"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: ips, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	r.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	r.CAFile = filepath.Join(r.Dir, "ca.pem")
	certFile, keyFile = filepath.Join(r.Dir, "registry.pem"), filepath.Join(r.Dir, "registry-key.pem")
	for _, f := range []struct {
		path string
		data []byte
	}{
		{r.CAFile, r.CAPEM},
		{certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
	} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return "", "", fmt.Errorf("registrytest: %w", err)
		}
	}
	if err := os.Chmod(r.CAFile, 0o644); err != nil {
		return "", "", fmt.Errorf("registrytest: %w", err)
	}
	return certFile, keyFile, nil
}

// writeHtpasswd writes the accounts with bcrypt hashes, the form the registry's htpasswd auth reads.
func writeHtpasswd(path string, users map[string]string) error {
	var b strings.Builder
	for u, p := range users {
		if strings.ContainsAny(u, ":\n") {
			return fmt.Errorf("registrytest: user name %q has ':' or a newline", u)
		}
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			return err
		}
		b.WriteString(u + ":" + string(h) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// freePort is a TCP port free on ip now (the registry takes it a moment later: its configuration needs a port).
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("registrytest: no free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrNoRegistry is what Available says when the registry program is missing.
var ErrNoRegistry = errors.New("registrytest: " + BinaryName + " is not installed")

// Available says whether the registry program is installed.
func Available() error {
	if _, err := exec.LookPath(BinaryName); err != nil {
		return ErrNoRegistry
	}
	return nil
}
