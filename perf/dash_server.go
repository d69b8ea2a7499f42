package perf

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/server/platform"
)

// dashServer is the `wheelhouse server` of a dashperf run: the API server with its clients, the dashboard's
// bootstrap admin password, the profiler's address (memory readings) and a signed-in session.
type dashServer struct {
	*apiServer
	password string
	debug    string // host:port of --debug-listen
	ca       *x509.CertPool
	cookie   string // the session cookie's value, after signIn
}

// dashAdmin is the server's bootstrap admin.
const dashAdmin = "admin@localhost"

// startDashServer runs `wheelhouse server` on a free loopback port with a bootstrap token and admin password and
// the profiler on another loopback port, and returns once /readyz answers.
func startDashServer(ctx context.Context, bin, dbURL, dir string) (*dashServer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	s := &dashServer{password: "dashperf-" + hex.EncodeToString(b), debug: "127.0.0.1:" + strconv.Itoa(ports[1])}
	token := newToken()
	listen := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(bin, "server", "--listen", listen, "--database-url", dbURL, "--data-dir", dir,
		"--log-level", "warn", "--debug-listen", s.debug)
	cmd.Env = cleanEnv("WHEELHOUSE_BOOTSTRAP_TOKEN="+token, "WHEELHOUSE_BOOTSTRAP_PASSWORD="+s.password)
	proc, err := startChild("server", cmd, filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s.apiServer = &apiServer{name: "server", proc: proc, base: "https://" + listen}
	s.apiBase = s.base + "/clusters/" + clusterID
	caPath := filepath.Join(dir, "tls", "ca.crt")
	if err := s.waitReady(ctx, caPath, token, 90*time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	pem, err := os.ReadFile(caPath)
	if err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	s.ca = x509.NewCertPool()
	s.ca.AppendCertsFromPEM(pem)
	return s, nil
}

// freePorts finds n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var out []int
	for len(out) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// tlsConfig trusts the server's own CA.
func (s *dashServer) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: s.ca, MinVersion: tls.VersionTLS12}
}

// browserClient is an HTTP client as a browser tab uses one: keep-alive, HTTP/2 when offered, no redirects
// followed (the sign-in answers with one), no client-side timeout beyond each request's context.
func (s *dashServer) browserClient() *http.Client {
	tr := &http.Transport{TLSClientConfig: s.tlsConfig(), ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: time.Minute}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// signIn posts the sign-in form as the bootstrap admin and keeps the session cookie.
func (s *dashServer) signIn(ctx context.Context, hc *http.Client) error {
	form := url.Values{"email": {dashAdmin}, "password": {s.password}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/ui/signin", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	for _, c := range res.Cookies() {
		if c.Name == platform.SessionCookie && c.Value != "" {
			s.cookie = c.Value
			return nil
		}
	}
	return fmt.Errorf("sign in as %s: %s without a %s cookie", dashAdmin, res.Status, platform.SessionCookie)
}

// cookieHeader is the Cookie header of the signed-in session.
func (s *dashServer) cookieHeader() string { return platform.SessionCookie + "=" + s.cookie }

// goMemory is what the server's profiler says about its Go heap: the heap in use after a collection it forces
// (/debug/pprof/heap?gc=1&debug=1 ends with runtime.MemStats) and the number of goroutines.
type goMemory struct {
	HeapInuse  int64
	Goroutines int
}

var errNoMemStats = errors.New("no HeapInuse in the heap profile")

// memory reads goMemory from the server's profiler.
func (s *dashServer) memory(ctx context.Context) (goMemory, error) {
	var m goMemory
	heap, err := s.debugGet(ctx, "/debug/pprof/heap?gc=1&debug=1", 30*time.Second)
	if err != nil {
		return m, err
	}
	if m.HeapInuse, err = memStat(heap, "HeapInuse"); err != nil {
		return m, err
	}
	g, err := s.debugGet(ctx, "/debug/pprof/goroutine?debug=1", 30*time.Second)
	if err != nil {
		return m, err
	}
	first, _, _ := strings.Cut(g, "\n")
	_, total, _ := strings.Cut(first, "total ")
	m.Goroutines, err = strconv.Atoi(strings.TrimSpace(total))
	return m, err
}

// memStat finds "# <name> = <n>" in a debug=1 heap profile.
func memStat(profile, name string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(profile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# "+name+" = "); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("%w (%s)", errNoMemStats, name)
}

// debugGet GETs path from the server's profiler.
func (s *dashServer) debugGet(ctx context.Context, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.debug+path, nil)
	if err != nil {
		return "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("server profiler: %w", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("server profiler %s: %s", path, res.Status)
	}
	return string(b), nil
}

// cpuProfile writes a CPU profile of the server over the next d to path (for go tool pprof). It blocks for d.
func (s *dashServer) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second).Seconds()))
	prof, err := s.debugGet(ctx, "/debug/pprof/profile?seconds="+strconv.Itoa(secs), d+time.Minute)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(prof), 0o644)
}
