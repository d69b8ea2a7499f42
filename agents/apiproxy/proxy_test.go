package apiproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/server/agentapi"
	"github.com/wheelhouse-dev/wheelhouse/server/clusterca"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// tokens: a pod's ServiceAccount (an administrator here), a user with no rights, and node n1 of cluster c1.
type tokens map[string]kubeapi.User

func (ts tokens) AuthenticateToken(_ context.Context, cluster, token string) (kubeapi.User, error) {
	u, ok := ts[token]
	if !ok || (strings.HasPrefix(u.Name, "system:node:") && cluster != "c1") {
		return kubeapi.User{}, kubeapi.ErrUnauthenticated
	}
	return u, nil
}

var testTokens = tokens{
	"pod":     {Name: "system:serviceaccount:default:app", Groups: []string{"system:masters", "system:serviceaccounts", "system:authenticated"}},
	"nobody":  {Name: "nobody", Groups: []string{"system:authenticated"}},
	"node-n1": {Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}},
}

// env is the real Kubernetes API with the agent endpoints (and a real cluster CA) on an HTTPS server, and node
// n1's API proxy for cluster c1 in front of it.
type env struct {
	srv   *httptest.Server
	api   *kubeapi.API
	cas   *clusterca.Authority
	proxy *Proxy
}

func newEnv(t testing.TB) *env {
	t.Helper()
	api, _ := apitest.NewWith(t, func(c *kubeapi.Config) { c.Authenticator = testTokens })
	cas, err := clusterca.New(clusterca.Config{Store: &clusterca.MemoryStore{},
		APIServiceIP: func(context.Context, string) (netip.Addr, error) { return netip.MustParseAddr("10.96.0.1"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	tunnels := tunnel.NewRegistry(tunnel.RegistryConfig{Logger: quiet})
	agents, err := agentapi.New(agentapi.Config{Authenticator: testTokens, Tunnels: tunnels, Certificates: cas, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	api.Register(e)
	agents.Register(e)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(func() { tunnels.Close(); srv.Close() })
	en := &env{srv: srv, api: api, cas: cas}
	en.proxy = en.start(t, srv.URL+"/clusters/c1", "node-n1")
	return en
}

// serverTLS trusts the test server.
func (en *env) serverTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(en.srv.Certificate())
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// start runs an API proxy for apiServer with a node credential until the test ends.
func (en *env) start(t testing.TB, apiServer, credential string) *Proxy {
	t.Helper()
	p, err := New(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), APIServer: apiServer, ServerTLS: en.serverTLS(),
		Credential: credential, ClusterDomain: "cluster.local", Node: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p
}

// inCluster is what rest.InClusterConfig makes in a pod of cluster: the cluster IP's name checked against
// kube-root-ca.crt's CA (the cluster's own), the pod's token; only the address is the test's.
func (en *env) inCluster(t testing.TB, cluster, serverName, token string) *rest.Config {
	t.Helper()
	ca, err := en.cas.CA(t.Context(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: "https://" + en.proxy.Addr().String(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, ServerName: serverName}, Timeout: 20 * time.Second}
}

func clientset(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestProxy(t *testing.T) {
	en := newEnv(t)
	ctx := t.Context()

	t.Run("in-cluster client", func(t *testing.T) {
		for _, name := range []string{"10.96.0.1", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "kubernetes"} {
			cs := clientset(t, en.inCluster(t, "c1", name, "pod"))
			if _, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
				t.Fatalf("as %s: %v", name, err)
			}
		}
		// The objects are cluster c1's.
		cs := clientset(t, en.inCluster(t, "c1", "10.96.0.1", "pod"))
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "via-proxy"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := apitest.Admin(t, en.api, "c1").CoreV1().ConfigMaps("default").Get(ctx, "via-proxy", metav1.GetOptions{}); err != nil {
			t.Fatalf("not in cluster c1: %v", err)
		}
	})

	t.Run("the caller's identity, never the node's", func(t *testing.T) {
		_, err := clientset(t, en.inCluster(t, "c1", "10.96.0.1", "nobody")).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"nobody"`) {
			t.Fatalf("a user without rights: %v, want the server's Forbidden for nobody", err)
		}
		_, err = clientset(t, en.inCluster(t, "c1", "10.96.0.1", "")).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("no token: %v, want the server's answer to an anonymous caller", err)
		}
	})

	t.Run("watch streams", func(t *testing.T) {
		cs := clientset(t, en.inCluster(t, "c1", "10.96.0.1", "pod"))
		w, err := cs.CoreV1().ConfigMaps("kube-public").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cs.CoreV1().ConfigMaps("kube-public").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && cm.Name == "watched" {
				return
			}
		}
		t.Fatal("the watch ended without the ConfigMap")
	})

	t.Run("certificate", func(t *testing.T) {
		// Another cluster's pods do not trust this node's endpoint.
		_, err := clientset(t, en.inCluster(t, "c2", "10.96.0.1", "pod")).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("cluster c2's CA: %v, want an unknown authority", err)
		}
		// Nor does it serve names it was not issued for.
		_, err = clientset(t, en.inCluster(t, "c1", "wheelhouse.example.com", "pod")).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		var host x509.HostnameError
		if !errors.As(err, &host) {
			t.Fatalf("another name: %v, want a hostname error", err)
		}
	})

	t.Run("paths stay in the cluster", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for _, p := range []string{"/api/../../platform/v1/teams", "/api/v1/namespaces/default/pods/%2e%2e/%2e%2e/%2e%2e/x",
			"/./api", "/api//v1", "/api/v1/namespaces/a%2F..%2F..%2Fx"} {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+en.proxy.Addr().String()+"/", nil)
			req.URL.Opaque = p // sent as written, not cleaned by the client
			req.Header.Set("Authorization", "Bearer pod")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var st metav1.Status
			_ = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if resp.StatusCode != 400 || st.Reason != metav1.StatusReasonBadRequest || st.Kind != "Status" {
				t.Errorf("%s: %d %+v, want 400 BadRequest", p, resp.StatusCode, st)
			}
		}
	})

	t.Run("server unreachable", func(t *testing.T) {
		p, err := New(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), APIServer: "https://127.0.0.1:1/clusters/c1",
			Node: "n1", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		p.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", "/api/v1/pods", nil))
		var st metav1.Status
		_ = json.Unmarshal(rec.Body.Bytes(), &st)
		if rec.Code != 503 || st.Reason != metav1.StatusReasonServiceUnavailable || !strings.Contains(st.Message, "node n1") ||
			strings.Contains(st.Message, "127.0.0.1") {
			t.Fatalf("%d %s, want 503 ServiceUnavailable naming the node, not the error", rec.Code, rec.Body)
		}
	})

	t.Run("a refused certificate request", func(t *testing.T) {
		p, err := New(Config{APIServer: en.srv.URL + "/clusters/c1", ServerTLS: en.serverTLS(), Credential: "nobody", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.certs.request(ctx)
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "only node credentials") {
			t.Fatalf("a non-node credential: %v", err)
		}
	})
}

func TestBadConfig(t *testing.T) {
	for _, u := range []string{"", "ftp://x/clusters/c1", "https://", "::"} {
		if _, err := New(Config{APIServer: u}); err == nil {
			t.Errorf("APIServer %q accepted", u)
		}
	}
}

// TestUpgradesPassThrough: an upgraded connection (as exec's SPDY or websocket stream) reaches the server over
// HTTP/1.1 even though the server speaks HTTP/2, and bytes flow both ways.
func TestUpgradesPassThrough(t *testing.T) {
	var sawPath, sawAuth, sawProto string
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawPath, sawAuth, sawProto = r.URL.Path, r.Header.Get("Authorization"), r.Proto
		if r.Header.Get("Upgrade") != "echo" {
			fmt.Fprint(w, "plain ", r.Proto)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprint(rw, "echo: "+line)
		rw.Flush()
	}))
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	defer upstream.Close()
	pool := x509.NewCertPool()
	pool.AddCert(upstream.Certificate())
	p, err := New(Config{APIServer: upstream.URL + "/clusters/c1", ServerTLS: &tls.Config{RootCAs: pool}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p.Handler())
	defer front.Close()

	// A plain request uses HTTP/2 to the server.
	resp, err := http.Get(front.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "plain HTTP/2.0" || sawPath != "/clusters/c1/api" {
		t.Fatalf("plain request: %q at %s", b, sawPath)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /api/v1/namespaces/default/pods/web/exec?command=sh HTTP/1.1\r\nHost: x\r\n"+
		"Authorization: Bearer pod-token\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	fmt.Fprint(conn, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: hello\n" {
		t.Fatalf("through the upgraded stream: %q %v", line, err)
	}
	if sawPath != "/clusters/c1/api/v1/namespaces/default/pods/web/exec" || sawAuth != "Bearer pod-token" || sawProto != "HTTP/1.1" {
		t.Fatalf("the server saw %s %q over %s", sawPath, sawAuth, sawProto)
	}
}

// TestHandshakeWaitsForTheFirstCertificate: a handshake before the certificate is in fails once the handshake
// gives up; after it is in, handshakes succeed and present it.
func TestHandshakeWaitsForTheFirstCertificate(t *testing.T) {
	c := newCertificates("", "", "", nil, time.Now)
	// handshake returns the certificate the client was shown.
	handshake := func(ctx context.Context) ([]byte, error) {
		sc, cc := net.Pipe()
		defer sc.Close()
		defer cc.Close()
		shown := make(chan []byte, 1)
		go func() {
			tc := tls.Client(cc, &tls.Config{InsecureSkipVerify: true})
			var raw []byte
			if tc.Handshake() == nil {
				raw = tc.ConnectionState().PeerCertificates[0].Raw
			}
			shown <- raw
			cc.Close()
		}()
		err := tls.Server(sc, &tls.Config{GetCertificate: c.get}).HandshakeContext(ctx)
		sc.Close()
		return <-shown, err
	}
	gaveUp, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := handshake(gaveUp); err == nil {
		t.Fatal("a handshake without a certificate succeeded")
	}
	srv := httptest.NewTLSServer(http.NotFoundHandler()) // any certificate will do
	srv.Close()
	cert := srv.TLS.Certificates[0]
	cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	c.set(&cert)
	shown, err := handshake(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shown, cert.Certificate[0]) {
		t.Fatal("the handshake did not present the certificate set")
	}
}

// TestListenReportsATakenPort: the agent learns at Listen that the port is taken (and then gives the kubernetes
// Service no endpoint); Close frees it.
func TestListenReportsATakenPort(t *testing.T) {
	first, err := New(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), APIServer: "https://127.0.0.1:1/clusters/c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Listen(); err != nil {
		t.Fatal(err)
	}
	taken := netip.MustParseAddrPort(first.Addr().String())
	second, err := New(Config{Listen: taken, APIServer: "https://127.0.0.1:1/clusters/c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Listen(); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("a taken port: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Listen(); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if err := second.Close(); err != nil || second.Close() != nil {
		t.Fatal("Close twice", err)
	}
}
