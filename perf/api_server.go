package perf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer is one `wheelhouse server` the harness started, with clients for it.
type apiServer struct {
	name string
	proc *child
	// base is https://127.0.0.1:<port>; apiBase adds the cluster prefix /clusters/default.
	base, apiBase string
	cfg           *rest.Config
	cs            *kubernetes.Clientset
	// http is a plain HTTP client with the same TLS and token as cs, for raw lists.
	http *http.Client
	// proto is the HTTP protocol the client and the server agreed on (HTTP/1.1 or HTTP/2.0).
	proto string
}

func (s *apiServer) pid() int { return s.proc.pid() }

func (s *apiServer) Stop() { s.proc.Stop(15 * time.Second) }

// clusterID is the cluster the server bootstraps; its API lives under /clusters/<id>/.
const clusterID = "default"

// buildWheelhouse builds ./cmd/wheelhouse of the repository into dir once per run, so both targets run the very
// same binary (and the code under test is the work tree's, dirty or not).
func buildWheelhouse(ctx context.Context, repo, dir string, log *slog.Logger) (string, error) {
	if _, err := os.Stat(filepath.Join(repo, "cmd", "wheelhouse")); err != nil {
		return "", fmt.Errorf("build: %s is not the wheelhouse repository (no cmd/wheelhouse): run the harness from "+
			"the repository or its perf/ directory, or pass --bin", repo)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build: no go command in PATH: %w", err)
	}
	bin := filepath.Join(dir, "bin", "wheelhouse")
	log.Info("building the server", "repo", repo, "bin", bin)
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/wheelhouse")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: go build ./cmd/wheelhouse in %s: %w\n%s", repo, err, lastLines(out, 20))
	}
	return bin, nil
}

// newToken is a random bootstrap token. Like the e2e tests' it is a plain string of at least
// tenancy.MinTokenLen characters without the "whp_" prefix of minted tokens, so it needs no checksum.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "apiperf-bootstrap-" + hex.EncodeToString(b)
}

// startAPIServer runs `wheelhouse server` on a free loopback port against dbURL, with its data (only the
// self-managed TLS CA and certificate, since the database is external) in dir, and returns once /readyz answers.
// A server that exits or never becomes ready is an error carrying the end of its log.
func startAPIServer(ctx context.Context, name, bin, dbURL, dir, token string, cache bool) (*apiServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	watchCache := "off"
	if cache {
		watchCache = "on"
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "server", "--listen", listen, "--database-url", dbURL, "--data-dir", dir,
		"--log-level", "warn", "--watch-cache", watchCache)
	// Only our WHEELHOUSE_* variables: a developer's own settings must not change what is measured.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHEELHOUSE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "WHEELHOUSE_BOOTSTRAP_TOKEN="+token)
	proc, err := startChild(name, cmd, filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s := &apiServer{name: name, proc: proc, base: "https://" + listen}
	s.apiBase = s.base + "/clusters/" + clusterID
	if err := s.waitReady(ctx, filepath.Join(dir, "tls", "ca.crt"), token, 90*time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	return s, nil
}

// waitReady waits for the server's CA file (written before it listens), builds the clients with it and polls
// /readyz until it answers 200.
func (s *apiServer) waitReady(ctx context.Context, caPath, token string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if s.proc.exited() {
			return fmt.Errorf("server exited during start-up (%v); end of its log:\n%s", s.proc.waitErr, s.proc.logTail())
		}
		if s.cs == nil {
			if ca, err := os.ReadFile(caPath); err == nil && len(ca) > 0 {
				last = s.connect(ca, token)
			} else {
				last = fmt.Errorf("no CA at %s yet", caPath)
			}
		}
		if s.cs != nil {
			if last = s.ready(ctx); last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s (%v); end of its log:\n%s", timeout, last, s.proc.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// connect builds the clients: client-go as kubectl configures it (protobuf for built-in types, no client-side
// rate limit) and, on the same transport settings, a plain HTTP client.
func (s *apiServer) connect(ca []byte, token string) error {
	cfg := &rest.Config{
		Host:            s.apiBase,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             -1, // no client-side rate limiting: the harness sets the rate
		UserAgent:       "apiperf",
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client-go: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("client-go: %w", err)
	}
	s.cfg, s.cs, s.http = cfg, cs, hc
	return nil
}

// ready asks /readyz once (unauthenticated health endpoint at the server root) and notes the protocol.
func (s *apiServer) ready(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.base+"/readyz", nil)
	if err != nil {
		return err
	}
	res, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s: %s", res.Status, strings.TrimSpace(string(body)))
	}
	s.proto = res.Proto
	return nil
}

// binaryVersion is the version and commit `wheelhouse version` prints.
func binaryVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	var parts []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (strings.TrimSpace(k) == "Version" || strings.TrimSpace(k) == "Git commit") {
			parts = append(parts, strings.TrimSpace(v))
		}
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// apiMeter measures CPU used by the server, PostgreSQL, this process and everything else on the machine
// between its creation and seconds() or cores().
type apiMeter struct {
	serverPID        int
	pg               procGroup
	t0               time.Time
	s0, p0, h0, all0 int64
}

func newAPIMeter(serverPID int, pg procGroup) *apiMeter {
	return &apiMeter{serverPID: serverPID, pg: pg, t0: time.Now(),
		s0: cpuTicks(serverPID, false), p0: pg.ticks(), h0: cpuTicks(os.Getpid(), false), all0: machineBusyTicks()}
}

// seconds is the CPU seconds used so far.
func (m *apiMeter) seconds() APICPU {
	c := APICPU{
		Server:   float64(cpuTicks(m.serverPID, false)-m.s0) / clockTick,
		Postgres: float64(m.pg.ticks()-m.p0) / clockTick,
		Harness:  float64(cpuTicks(os.Getpid(), false)-m.h0) / clockTick,
	}
	if m.all0 > 0 {
		all := float64(machineBusyTicks()-m.all0) / clockTick
		c.Other = max(0, all-c.Server-c.Postgres-c.Harness)
	}
	return c
}

// cores is the CPU used so far divided by the wall time: average cores busy.
func (m *apiMeter) cores() APICPU {
	s := m.seconds()
	el := time.Since(m.t0).Seconds()
	if el <= 0 {
		return APICPU{}
	}
	return APICPU{Server: s.Server / el, Postgres: s.Postgres / el, Harness: s.Harness / el, Other: s.Other / el}
}

// machineBusyTicks is the user and system CPU time every process on the machine has used (the "cpu" line of
// /proc/stat), in clock ticks; 0 when it cannot be read. Interrupt and softirq time (loopback networking, when
// the kernel accounts it apart) and steal are left out: they belong to no process.
func machineBusyTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "cpu" {
		return 0
	}
	var t int64
	for _, v := range f[1:4] { // user nice system
		n, _ := strconv.ParseInt(v, 10, 64)
		t += n
	}
	return t
}

// rss is the server's resident set size, 0 when it cannot be read.
func (s *apiServer) rss() int64 {
	n, _ := rssBytes(s.pid())
	return n
}

var errServerGone = errors.New("server process exited")

// alive reports an error carrying the log tail when the server died under the harness.
func (s *apiServer) alive() error {
	if s.proc.exited() {
		return fmt.Errorf("%s: %w (%v); end of its log:\n%s", s.name, errServerGone, s.proc.waitErr, s.proc.logTail())
	}
	return nil
}
