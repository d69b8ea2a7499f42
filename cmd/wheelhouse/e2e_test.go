package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// End-to-end tests of the real binary: built with a version stamped in by -ldflags, run as a child process,
// probed over HTTP, stopped with a signal.

const (
	e2eVersion = "v9.8.7-e2e"
	e2eCommit  = "0123456789abcdef0123456789abcdef01234567"
)

func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	t.Run("version", func(t *testing.T) { testVersionBinary(t, bin) })
	t.Run("server with embedded PostgreSQL", func(t *testing.T) { testEmbeddedPostgres(t, bin) })
	t.Run("server with database URL", func(t *testing.T) { testDatabaseURL(t, bin) })
	t.Run("signal during initdb", func(t *testing.T) { testSignalDuringInitdb(t, bin) })
	t.Run("plain HTTP for local development", func(t *testing.T) { testPlainHTTP(t, bin) })
}

// testPlainHTTP: --tls off serves plain HTTP (and creates no CA).
func testPlainHTTP(t *testing.T, bin string) {
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t)}, "--data-dir", dataDir, "--tls", "off")
	p.waitReady(t)
	if !strings.HasPrefix(p.url, "http://") {
		t.Fatalf("server URL %q, want http://", p.url)
	}
	if res, body := httpGet(t, p.url+"/readyz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz over HTTP: %d %s", res.StatusCode, body)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tls")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a CA was created for a plain-HTTP server (%v)", err)
	}
	p.stop(t, syscall.SIGTERM)
}

func testVersionBinary(t *testing.T, bin string) {
	out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse version: %v\n%s", err, out)
	}
	for _, want := range []string{"Version:    " + e2eVersion + "\n", "Git commit: " + e2eCommit + "\n", "Go version: go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("wheelhouse version: missing %q in:\n%s", want, out)
		}
	}
}

// testEmbeddedPostgres runs the server without a database URL twice on one data directory (initdb, then reuse),
// stopping it once with SIGTERM and once with SIGINT, and checks that PostgreSQL goes with it.
func testEmbeddedPostgres(t *testing.T, bin string) {
	dataDir := filepath.Join(reachableTempDir(t), "data") // created by the server
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dataDir, "postgres", "postgres.log")); t.Failed() && err == nil {
			t.Logf("postgres.log:\n%s", b)
		}
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := startServer(t, bin, nil, "--data-dir", dataDir)
		p.waitReady(t)
		pidFile := filepath.Join(dataDir, "postgres", "data", "postmaster.pid")
		pgPID := readPID(t, pidFile)
		if err := syscall.Kill(pgPID, 0); err != nil {
			t.Fatalf("postmaster %d from %s is not running: %v", pgPID, pidFile, err)
		}
		checkVersionEndpoint(t, p.url)
		p.stop(t, sig)
		if err := syscall.Kill(pgPID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("postmaster %d still exists after the server exited (kill 0: %v)", pgPID, err)
		}
		if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after shutdown (stat: %v)", pidFile, err)
		}
		p.wantLogged(t, "PostgreSQL stopped", "wheelhouse stopped")
	}
}

// testDatabaseURL runs the server against an empty database given in WHEELHOUSE_DATABASE_URL: it must apply
// the migrations itself and start no PostgreSQL of its own.
func testDatabaseURL(t *testing.T, bin string) {
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t)}, "--data-dir", dataDir)
	p.waitReady(t)
	res, body := httpGet(t, p.url+"/readyz?verbose")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "[+]store ok") {
		t.Errorf("/readyz?verbose = %d %q", res.StatusCode, body)
	}
	p.stop(t, syscall.SIGTERM)
	p.wantLogged(t, "database schema is up to date", "wheelhouse stopped")
	if _, err := os.Stat(filepath.Join(dataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an embedded PostgreSQL was set up although a database URL was given (stat: %v)", err)
	}
}

// testSignalDuringInitdb stops the server while the embedded PostgreSQL's initdb runs (it takes about a second;
// the signal is sent when the server logs that it starts it): the server must stop promptly, exit 0 and leave a
// data directory that the next start can use.
func testSignalDuringInitdb(t *testing.T, bin string) {
	dataDir := filepath.Join(reachableTempDir(t), "data")
	p := startServer(t, bin, nil, "--data-dir", dataDir)
	p.waitLogged(t, "initialising PostgreSQL data directory")
	p.stop(t, syscall.SIGTERM)
	p.wantLogged(t, "stopped during start-up")

	p = startServer(t, bin, nil, "--data-dir", dataDir)
	p.waitReady(t)
	p.stop(t, syscall.SIGTERM)
}

func checkVersionEndpoint(t *testing.T, base string) {
	t.Helper()
	res, body := httpGet(t, base+"/version")
	var v map[string]string
	if err := json.Unmarshal([]byte(body), &v); res.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("/version = %d %q (%v)", res.StatusCode, body, err)
	}
	if v["gitVersion"] != e2eVersion || v["gitCommit"] != e2eCommit || !strings.HasPrefix(v["goVersion"], "go1.") ||
		v["platform"] == "" {
		t.Errorf("/version = %v, want gitVersion %s, gitCommit %s, goVersion and platform", v, e2eVersion, e2eCommit)
	}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "wheelhouse")
	pkg := "github.com/wheelhouse-dev/wheelhouse/version"
	cmd := exec.CommandContext(t.Context(), goBin, "build",
		"-ldflags", "-X "+pkg+".Version="+e2eVersion+" -X "+pkg+".Commit="+e2eCommit, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// reachableTempDir is a temporary directory other users can traverse (not list): as root, the embedded
// PostgreSQL runs as the postgres user, which must reach the data directory inside.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wheelhouse-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readPID(t *testing.T, pidFile string) int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("read %s: %v", pidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		t.Fatalf("%s: no pid on its first line: %q", pidFile, b)
	}
	return pid
}

// serverProcess is a running `wheelhouse server`.
type serverProcess struct {
	cmd     *exec.Cmd
	log     *logLines
	exited  chan struct{} // closed once cmd.Wait returned; then waitErr is set
	waitErr error
	url     string // base URL, known after waitReady
}

// startServer starts `wheelhouse server --listen 127.0.0.1:0 --log-format json args...` with no WHEELHOUSE_*
// variables but env. The test's cleanup kills it if it still runs, and prints its log if the test failed.
func startServer(t *testing.T, bin string, env []string, args ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"server", "--listen", "127.0.0.1:0", "--log-format", "json",
		"--log-level", "debug"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHEELHOUSE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	p := &serverProcess{cmd: cmd, log: &logLines{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("wheelhouse server log:\n%s", p.log.String())
		}
	})
	return p
}

// waitReady waits for the "serving HTTP" log line, then polls /readyz until it answers 200.
func (p *serverProcess) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second) // first start runs initdb
	for p.url == "" || !p.ready() {
		if p.url == "" {
			p.url = p.log.field("serving HTTP", "url")
		}
		select {
		case <-p.exited:
			t.Fatalf("server exited before it was ready: %v", p.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready after 90s (url %q)", p.url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogged waits until the server has logged msg.
func (p *serverProcess) waitLogged(t *testing.T, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.log.field(msg, "msg") == "" {
		select {
		case <-p.exited:
			t.Fatalf("server exited before logging %q: %v", msg, p.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not log %q in 30s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *serverProcess) ready() bool {
	res, err := testHTTP.Get(p.url + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// stop sends sig and wants the process to exit with status 0.
func (p *serverProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("server still running 60s after %v", sig)
	}
	if p.waitErr != nil {
		t.Fatalf("server exit after %v: %v, want status 0", sig, p.waitErr)
	}
}

func (p *serverProcess) wantLogged(t *testing.T, msgs ...string) {
	t.Helper()
	for _, msg := range msgs {
		if p.log.field(msg, "msg") == "" {
			t.Errorf("log has no %q message", msg)
		}
	}
}

func httpGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := testHTTP.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res, string(b)
}

// logLines collects a process's output while it runs.
type logLines struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// field returns attribute key of the first JSON log line whose message is msg ("" if none).
func (l *logLines) field(msg, key string) string {
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["msg"] != msg {
			continue
		}
		v, _ := rec[key].(string)
		return v
	}
	return ""
}

// testHTTP talks to the server under test, whose certificate comes from its own CA in the data directory: the
// probes here check health, not the certificate (the kubectl e2e test pins the CA).
var testHTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
