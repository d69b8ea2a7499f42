package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/yamux"
	"pgregory.net/rapid"
)

// testKeepalive makes dead peers visible within a fraction of a second.
const testKeepalive = 50 * time.Millisecond

var quiet = slog.New(slog.DiscardHandler)

// server is a TLS server whose /clusters/<c>/agent/connect hands the request to a Registry, taking the bearer
// token as the node name (authentication is the caller's business, not the Registry's).
type server struct {
	keepalive time.Duration // of the Registry and of the agents startAgent runs
	reg       *Registry
	srv       *httptest.Server
	accepts   atomic.Int32
	// revoked holds the node names ("<cluster>/<node>") whose "credential" is revoked: refused at connect, and
	// invalid when a tunnel's Check runs. checkErr, when set, is what every Check fails with instead.
	revoked  sync.Map
	checkErr atomic.Pointer[error]
}

func newServer(t *testing.T, keepalive time.Duration, opts ...func(*RegistryConfig)) *server {
	t.Helper()
	cfg := RegistryConfig{Logger: quiet, Keepalive: keepalive}
	for _, o := range opts {
		o(&cfg)
	}
	s := &server{keepalive: keepalive, reg: NewRegistry(cfg)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /clusters/{cluster}/agent/connect", func(w http.ResponseWriter, r *http.Request) {
		s.accepts.Add(1)
		cluster, node := r.PathValue("cluster"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, revoked := s.revoked.Load(cluster + "/" + node); revoked {
			http.Error(w, "revoked", http.StatusUnauthorized)
			return
		}
		_ = s.reg.Accept(w, r, cluster, node, func(context.Context) (bool, error) {
			if err := s.checkErr.Load(); err != nil {
				return false, *err
			}
			_, revoked := s.revoked.Load(cluster + "/" + node)
			return !revoked, nil
		})
	})
	s.srv = httptest.NewTLSServer(mux)
	t.Cleanup(func() { s.reg.Close(); s.srv.Close() })
	return s
}

func (s *server) url(cluster string) string {
	return "wss://" + s.srv.Listener.Addr().String() + "/clusters/" + cluster + "/agent/connect"
}

func (s *server) tls() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// client is an HTTP client to node's kubelet API through the tunnel.
func (s *server) client(cluster, node string) *http.Client {
	return &http.Client{Transport: s.reg.Transport(cluster, node)}
}

// startAgent runs Serve for node of cluster until the test ends (or stop is called); done closes when Serve
// returns.
func startAgent(t *testing.T, s *server, cluster, node string, h http.Handler) (stop func(), done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		err := Serve(ctx, Config{URL: s.url(cluster), Token: node, TLS: s.tls(), Handler: h, Logger: quiet,
			Keepalive: s.keepalive, Backoff: Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}})
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-ch })
	return cancel, ch
}

// kubelet is a fake kubelet API: /name answers its name, /echo its request body, /upgrade switches to a raw
// echo of the connection.
func kubelet(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/name", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, name) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	})
	return mux
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s did not happen within 20s", what)
		}
	}
}

func get(t *testing.T, c *http.Client, path string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://kubelet"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustGet(t *testing.T, c *http.Client, path string) string {
	t.Helper()
	s, err := get(t, c, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return s
}

func waitConnected(t *testing.T, s *server, cluster, node string) {
	t.Helper()
	eventually(t, node+" connected", func() bool { return s.reg.Connected(cluster, node) })
}

// TestConcurrentStreams: every one of many concurrent requests, of any size, gets exactly its own bytes back.
func TestConcurrentStreams(t *testing.T) {
	// A keepalive of a second: with the race detector on two cores, megabytes in flight can hold a pong back
	// longer than testKeepalive's 150 ms limit.
	s := newServer(t, time.Second)
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	waitConnected(t, s, "c1", "n1")
	c := s.client("c1", "n1")
	rapid.Check(t, func(rt *rapid.T) {
		sizes := rapid.SliceOfN(rapid.IntRange(0, 300<<10), 1, 24).Draw(rt, "sizes")
		var wg sync.WaitGroup
		errs := make(chan error, len(sizes))
		for i, n := range sizes {
			wg.Go(func() {
				body := bytes.Repeat([]byte{byte(i)}, n)
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://kubelet/echo", bytes.NewReader(body))
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				got, err := io.ReadAll(resp.Body)
				if err == nil && !bytes.Equal(got, body) {
					err = fmt.Errorf("request %d: got %d bytes, want %d of %d", i, len(got), n, i)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				rt.Fatal(err)
			}
		}
	})
}

// TestUpgrade: a 101 answer hands the stream over, both ways, as kube-apiserver needs for exec and port-forward.
func TestUpgrade(t *testing.T) {
	s := newServer(t, testKeepalive)
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	waitConnected(t, s, "c1", "n1")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://kubelet/upgrade", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := s.client("c1", "n1").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	rw := resp.Body.(io.ReadWriteCloser)
	defer rw.Close()
	br := bufio.NewReader(rw)
	for _, line := range []string{"one\n", "two\n"} {
		if _, err := io.WriteString(rw, line); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != line {
			t.Fatalf("echo: %q, %v; want %q", got, err, line)
		}
	}
}

// TestReconnectAfterServerDrop: when the server drops the tunnel, the agent comes back by itself.
func TestReconnectAfterServerDrop(t *testing.T) {
	s := newServer(t, testKeepalive)
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	waitConnected(t, s, "c1", "n1")
	for range 3 {
		old := s.reg.session("c1", "n1")
		_ = old.Close()
		eventually(t, "a new tunnel", func() bool {
			cur := s.reg.session("c1", "n1")
			return cur != nil && cur != old && !cur.IsClosed()
		})
		if got := mustGet(t, s.client("c1", "n1"), "/name"); got != "n1" {
			t.Fatalf("after reconnecting: %q", got)
		}
	}
}

// TestReplacement: a new connection for the same node replaces the old one, which is closed.
func TestReplacement(t *testing.T) {
	s := newServer(t, testKeepalive)
	first := dialRaw(t, s, "c1", "n1", true)
	go func() { _ = http.Serve(first, kubelet("first")) }()
	waitConnected(t, s, "c1", "n1")
	if got := mustGet(t, s.client("c1", "n1"), "/name"); got != "first" {
		t.Fatalf("before: %q", got)
	}
	startAgent(t, s, "c1", "n1", kubelet("second"))
	select {
	case <-first.CloseChan():
	case <-time.After(20 * time.Second):
		t.Fatal("the replaced tunnel was not closed")
	}
	eventually(t, "the second agent serving", func() bool {
		got, err := get(t, s.client("c1", "n1"), "/name")
		return err == nil && got == "second"
	})
}

// TestIsolation: the same node name in two clusters is two tunnels; each cluster reaches only its own.
func TestIsolation(t *testing.T) {
	s := newServer(t, testKeepalive)
	startAgent(t, s, "c1", "n1", kubelet("c1/n1"))
	startAgent(t, s, "c2", "n1", kubelet("c2/n1"))
	waitConnected(t, s, "c1", "n1")
	waitConnected(t, s, "c2", "n1")
	for _, c := range []string{"c1", "c2"} {
		if got := mustGet(t, s.client(c, "n1"), "/name"); got != c+"/n1" {
			t.Errorf("%s: reached %q", c, got)
		}
	}
	if _, err := s.reg.DialContext(t.Context(), "c3", "n1"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("another cluster's node: %v, want ErrNotConnected", err)
	}
}

// TestGoneAgentFailsFast: once an agent is gone, dials fail at once with ErrNotConnected instead of waiting.
func TestGoneAgentFailsFast(t *testing.T) {
	s := newServer(t, testKeepalive)
	if _, err := s.reg.DialContext(t.Context(), "c1", "never"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("never connected: %v", err)
	}
	stop, done := startAgent(t, s, "c1", "n1", kubelet("n1"))
	waitConnected(t, s, "c1", "n1")
	stop()
	<-done
	eventually(t, "the tunnel to leave the registry", func() bool { return !s.reg.Connected("c1", "n1") })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := s.reg.DialContext(ctx, "c1", "n1"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("dial: %v, want ErrNotConnected", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://kubelet/name", nil)
	_, err := s.client("c1", "n1").Do(req)
	if !errors.Is(err, ErrNotConnected) {
		t.Fatalf("request: %v, want ErrNotConnected", err)
	}
}

// TestServerNoticesDeadAgent: an agent that stops answering (no pongs, no yamux pings) is dropped.
func TestServerNoticesDeadAgent(t *testing.T) {
	s := newServer(t, testKeepalive)
	dialRaw(t, s, "c1", "n1", false) // connects, then never reads again
	waitConnected(t, s, "c1", "n1")
	eventually(t, "the dead tunnel to be dropped", func() bool { return !s.reg.Connected("c1", "n1") })
	if _, err := s.reg.DialContext(t.Context(), "c1", "n1"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("dial: %v, want ErrNotConnected", err)
	}
}

// TestAgentNoticesDeadServer: a server that accepts the websocket and then goes silent is left, and the agent
// connects again.
func TestAgentNoticesDeadServer(t *testing.T) {
	var accepts atomic.Int32
	hold := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := websocket.Upgrader{Subprotocols: []string{Subprotocol}}
		ws, err := u.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		accepts.Add(1)
		defer ws.Close()
		<-hold // never reads: no pongs, no yamux answers
	}))
	defer srv.Close()
	defer close(hold)
	s := &server{keepalive: testKeepalive, srv: srv}
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	eventually(t, "a second connection", func() bool { return accepts.Load() >= 2 })
}

// TestRefusals: browsers (any Origin) and clients without the tunnel's subprotocol are turned away.
func TestRefusals(t *testing.T) {
	s := newServer(t, testKeepalive)
	for name, c := range map[string]struct {
		header http.Header
		protos []string
		code   int
	}{
		"browser origin":   {http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer n1"}}, []string{Subprotocol}, 403},
		"same-site origin": {http.Header{"Origin": {"https://" + s.srv.Listener.Addr().String()}, "Authorization": {"Bearer n1"}}, []string{Subprotocol}, 403},
		"no subprotocol":   {http.Header{"Authorization": {"Bearer n1"}}, nil, 400},
	} {
		t.Run(name, func(t *testing.T) {
			d := websocket.Dialer{TLSClientConfig: s.tls(), Subprotocols: c.protos}
			ws, resp, err := d.DialContext(t.Context(), s.url("c1"), c.header)
			if err == nil {
				ws.Close()
				t.Fatal("connected")
			}
			if resp == nil || resp.StatusCode != c.code {
				t.Fatalf("answer %v, want %d", resp, c.code)
			}
			if s.reg.Connected("c1", "n1") {
				t.Fatal("registered")
			}
		})
	}
}

// dialRaw connects as node of cluster by hand and returns the agent-side session. With read false the agent
// side never reads: a peer that has gone silent without closing.
func dialRaw(t *testing.T, s *server, cluster, node string, read bool) *yamux.Session {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: s.tls(), Subprotocols: []string{Subprotocol}}
	ws, _, err := d.DialContext(t.Context(), s.url(cluster), http.Header{"Authorization": {"Bearer " + node}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if !read {
		return nil
	}
	sess, err := yamux.Server(newWSConn(ws, testKeepalive), yamuxConfig(testKeepalive, quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// directoryLog records what a Registry tells its Directory, in order.
type directoryLog struct {
	mu     sync.Mutex
	events []string
}

func (d *directoryLog) Record(_ context.Context, k Key) error { return d.add("record " + k.Node) }
func (d *directoryLog) Forget(_ context.Context, k Key) error { return d.add("forget " + k.Node) }

func (d *directoryLog) add(e string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, e)
	return nil
}

func (d *directoryLog) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.events, ", ")
}

// TestDirectory: the Registry records a tunnel when it connects and forgets it when it goes, including at
// Close.
func TestDirectory(t *testing.T) {
	s := newServer(t, testKeepalive)
	dir := &directoryLog{}
	s.reg.cfg.Directory = dir
	stop, done := startAgent(t, s, "c1", "n1", kubelet("n1"))
	eventually(t, "n1 connected", func() bool { return s.reg.Connected("c1", "n1") })
	stop()
	<-done
	eventually(t, "n1's tunnel forgotten", func() bool { return dir.String() == "record n1, forget n1" })

	startAgent(t, s, "c1", "n2", kubelet("n2"))
	eventually(t, "n2 connected", func() bool { return s.reg.Connected("c1", "n2") })
	s.reg.Close()
	eventually(t, "n2's tunnel forgotten at Close", func() bool { return dir.String() == "record n1, forget n1, record n2, forget n2" })
}
