package registries

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

// TestContainerdReadsHostsDir pulls through hosts directories written by WriteHostsDir with the machine's
// containerd 1.6 (Debian's): `ctr images pull --hosts-dir` resolves with the same code (remotes/docker/config)
// the CRI plugin uses with config_path, so containerd's own TOML parser and host order are what is tested. The
// registry is go-containerregistry's, over TLS from a CA made for the test, and it requires a client certificate:
// a pull succeeds only if containerd read the CA and the client pair from hosts.toml. The upstream registries
// are named under .invalid, so a pull that does not go through the mirrors fails. (Credentials are the CRI
// plugin's, which ctr does not use: see TestCredentials.)
func TestContainerdReadsHostsDir(t *testing.T) {
	c := containerdtest.Start(t, containerdtest.Options{})
	p := newTestPKI(t)
	reg := startTestRegistry(t, p)
	down := closedPort(t)

	tests := []struct {
		name, yaml, image string
		aHits, bHits      bool // whether the pull must use the registry under /a, /b
	}{{
		// The first mirror is down; the second serves; the third is never asked. A path is the API's root, as
		// k3s reads it (override_path).
		name: "mirrors in order",
		yaml: fmt.Sprintf(`
mirrors:
  upstream.invalid:
    endpoint: ["https://%[1]s", "https://%[2]s/b", "https://%[2]s/a/v2"]
configs:
  "%[2]s":
    tls: {ca_file: %[3]s, cert_file: %[4]s, key_file: %[5]s}
`, down, reg.host, p.CAFile, p.CertFile, p.KeyFile),
		image: "upstream.invalid/test/img:1",
		bHits: true,
	}, {
		// A file without mirrors: containerd 1.6 ignores a hosts.toml without a host table (then the CA and the
		// client certificate would be missing, and this loopback registry would be tried over plain HTTP).
		name: "own TLS settings, no mirrors",
		yaml: fmt.Sprintf(`
configs:
  "%[1]s":
    tls: {ca_file: %[2]s, cert_file: %[3]s, key_file: %[4]s}
`, reg.host, p.CAFile, p.CertFile, p.KeyFile),
		image: reg.host + "/test/img:1",
	}, {
		name: "wildcard, skip_verify",
		yaml: fmt.Sprintf(`
mirrors:
  "*":
    endpoint: ["https://%[1]s/a/v2"]
configs:
  "%[1]s":
    tls: {insecure_skip_verify: true, cert_file: %[2]s, key_file: %[3]s}
`, reg.host, p.CertFile, p.KeyFile),
		image: "other.invalid/test/img:1",
		aHits: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "hosts.d")
			if err := cfg.WriteHostsDir(dir); err != nil {
				t.Fatal(err)
			}
			a0, b0 := reg.aHits.Load(), reg.bHits.Load()
			if out, err := ctrPull(t, c, dir, tt.image); err != nil {
				t.Errorf("pull %s: %v\n%s", tt.image, err, out)
			}
			if a, b := reg.aHits.Load()-a0, reg.bHits.Load()-b0; (a > 0) != tt.aHits || (b > 0) != tt.bHits {
				t.Errorf("pull %s: %d requests under /a, %d under /b; want some under /a: %v, under /b: %v", tt.image, a, b, tt.aHits, tt.bHits)
			}
		})
	}

	// The control: without the mirror's TLS settings, the same pull fails (the CA is unknown, and the upstream
	// does not exist).
	t.Run("without TLS settings", func(t *testing.T) {
		cfg := &Config{Mirrors: map[string]Mirror{"upstream.invalid": {Endpoints: []string{"https://" + reg.host}}}}
		dir := filepath.Join(t.TempDir(), "hosts.d")
		if err := cfg.WriteHostsDir(dir); err != nil {
			t.Fatal(err)
		}
		image := "upstream.invalid/test/img:1"
		if out, err := ctrPull(t, c, dir, image); err == nil || !strings.Contains(out, "certificate") {
			t.Errorf("pull %s = %v, want a certificate error\n%s", image, err, out)
		}
	})
}

// pulls numbers ctrPull's namespaces.
var pulls atomic.Int64

// ctrPull pulls image into its own namespace of c with `ctr images pull --hosts-dir dir`, and returns ctr's output.
func ctrPull(t *testing.T, c *containerdtest.Containerd, dir, image string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := fmt.Sprintf("registries-%d", pulls.Add(1))
	out, err := exec.CommandContext(ctx, "ctr", "--address", c.Socket, "--namespace", ns,
		"images", "pull", "--hosts-dir", dir, image).CombinedOutput()
	return string(out), err
}

// testRegistry is a registry holding test/img:1 (one small layer, for this machine's platform), served over TLS
// with a server certificate of a testPKI and requiring a client certificate from its CA. It serves the registry
// API at /v2 as usual, as /a/v2 too, and with /b as the API's root (/b/test/img/... is /v2/test/img/...), and
// counts the requests under /a and /b.
type testRegistry struct {
	host         string
	aHits, bHits atomic.Int64
}

func startTestRegistry(t *testing.T, p *testPKI) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	counted := func(prefix, root string, n *atomic.Int64) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			n.Add(1)
			req = req.Clone(req.Context())
			req.URL.Path = root + strings.TrimPrefix(req.URL.Path, prefix)
			req.URL.RawPath = ""
			h.ServeHTTP(w, req)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/a/", counted("/a", "", &r.aHits))
	mux.Handle("/b/", counted("/b", "/v2", &r.bHits))
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.Server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.Pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "https://")

	layer, err := random.Layer(256, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	cf.Config = v1.Config{Cmd: []string{"/nothing"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host + "/test/img:1")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, Certificates: []tls.Certificate{p.Client}}}
	if err := remote.Write(ref, img, remote.WithTransport(tr), remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	return r
}

// closedPort is 127.0.0.1:<a port nothing listens on>.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
