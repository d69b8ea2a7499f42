package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
)

// addrRuntime is the fake runtime with the sandbox addresses a test gives (the fake reports none).
type addrRuntime struct {
	*fake.Runtime
	mu  sync.Mutex        // guards ips
	ips map[string]string // by sandbox ID
}

func (r *addrRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := r.Runtime.PodSandboxStatus(ctx, id, verbose)
	if err == nil {
		r.mu.Lock()
		resp.Status.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: r.ips[id]}
		r.mu.Unlock()
	}
	return resp, err
}

// echoed is what the test's pod server saw of a request.
type echoed struct {
	Method, Path, Query, Body, Host string
	Header                          http.Header
}

// podServer is a pod's HTTP server: it answers every request with what it saw, and counts them.
func podServer(t *testing.T, tlsServer bool) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set(ProxyErrorHeader, "a pod posing as the agent")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoed{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(b),
			Host: r.Host, Header: r.Header})
	})
	srv := httptest.NewUnstartedServer(h)
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &hits
}

func serverPort(t *testing.T, srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// newPodProxyFixture runs pod "web" (UID uid-web) at 127.0.0.1 and the host-network pod "hostnet" on a node
// whose address is 127.0.0.1 as well, and a pod "other" whose sandbox is at 127.0.0.2.
func newPodProxyFixture(t *testing.T) *apiFixture {
	rt := &addrRuntime{Runtime: fake.New(), ips: map[string]string{}}
	p := must(NewPods(nil, PodsConfig{NodeName: "n1", Runtime: rt, DataDir: t.TempDir(), NodeIP: func() string { return "127.0.0.1" }}))(t)
	srv := httptest.NewServer(p.APIHandler())
	t.Cleanup(srv.Close)
	f := &apiFixture{t: t, p: p, rt: rt.Runtime, srv: srv, sandboxes: map[types.UID]string{}}
	web, other, hostnet := testPod("web", "app"), testPod("other", "app"), testPod("hostnet", "app")
	hostnet.Spec.HostNetwork = true
	for pod, ip := range map[*corev1.Pod]string{web: "127.0.0.1", other: "127.0.0.2", hostnet: ""} {
		f.run(pod, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
		f.adopt(pod)
		rt.mu.Lock()
		rt.ips[f.sandboxes[pod.UID]] = ip
		rt.mu.Unlock()
	}
	return f
}

func proxyDo(t *testing.T, method, u, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestPodProxyReachesThePod(t *testing.T) {
	f := newPodProxyFixture(t)
	pod, _ := podServer(t, false)
	port := serverPort(t, pod)
	base := f.srv.URL + "/podProxy/default/web/uid-web/http/127.0.0.1/" + port
	for _, c := range []struct{ method, path, body, wantPath, wantQuery string }{
		{"GET", "/some/path?x=1&y=a%20b", "", "/some/path", "x=1&y=a%20b"},
		{"POST", "/create/", "payload", "/create/", ""},
		{"DELETE", "/items/7?force=true", "", "/items/7", "force=true"},
		{"PUT", "/", "put body", "/", ""},
		{"PATCH", "/p", "{}", "/p", ""},
		{"OPTIONS", "/o", "", "/o", ""},
	} {
		t.Run(c.method, func(t *testing.T) {
			resp, body := proxyDo(t, c.method, base+c.path, c.body, http.Header{"X-Forwarded-For": {"192.0.2.9"},
				"X-Forwarded-Uri": {"/api/v1/namespaces/default/pods/web/proxy" + c.path}})
			var e echoed
			if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != 200 || err != nil {
				t.Fatalf("%d %q %v", resp.StatusCode, body, err)
			}
			if e.Method != c.method || e.Path != c.wantPath || e.Query != c.wantQuery || e.Body != c.body {
				t.Errorf("the pod saw %+v, want %s %s?%s %q", e, c.method, c.wantPath, c.wantQuery, c.body)
			}
			if e.Header.Get("X-Forwarded-For") != "192.0.2.9" || e.Header.Get("X-Forwarded-Uri") == "" {
				t.Errorf("forwarded headers lost: %v", e.Header)
			}
			if got := resp.Header.Get(ProxyErrorHeader); got != "" {
				t.Errorf("the pod's %s reached the server: %q", ProxyErrorHeader, got)
			}
		})
	}
	if resp, _ := proxyDo(t, "HEAD", base+"/h", "", nil); resp.StatusCode != 200 {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}
}

func TestPodProxyTLSAndHostNetwork(t *testing.T) {
	f := newPodProxyFixture(t)
	secure, _ := podServer(t, true)
	resp, body := proxyDo(t, "GET", f.srv.URL+"/podProxy/default/web/uid-web/https/127.0.0.1/"+serverPort(t, secure)+"/tls", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"Path":"/tls"`) {
		t.Errorf("https: %d %q", resp.StatusCode, body)
	}
	// A pod on the host's network is reached at the node's address.
	plain, _ := podServer(t, false)
	resp, body = proxyDo(t, "GET", f.srv.URL+"/podProxy/default/hostnet/uid-hostnet/http/127.0.0.1/"+serverPort(t, plain)+"/", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"Path":"/"`) {
		t.Errorf("host network: %d %q", resp.StatusCode, body)
	}
}

// TestPodProxyRefuses: the endpoint dials only an address of the pod named, one of this node's; its own
// answers carry ProxyErrorHeader.
func TestPodProxyRefuses(t *testing.T) {
	f := newPodProxyFixture(t)
	pod, hits := podServer(t, false)
	port := serverPort(t, pod)
	closed := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	}()
	for _, c := range []struct {
		name, path string
		code       int
		reason     string
	}{
		{"another pod's address", "/default/web/uid-web/http/127.0.0.2/" + port + "/", 403, `127.0.0.2 is not an address of pod "web"`},
		{"an address of no pod", "/default/web/uid-web/http/10.1.2.3/" + port + "/", 403, `10.1.2.3 is not an address of pod "web"`},
		{"the node's address for a pod not on the host's network", "/default/other/uid-other/http/127.0.0.1/" + port + "/", 403,
			`127.0.0.1 is not an address of pod "other"`},
		{"a pod this node does not run", "/default/absent/uid-absent/http/127.0.0.1/" + port + "/", 404, `pod "absent" does not exist`},
		{"a stale UID", "/default/web/uid-old/http/127.0.0.1/" + port + "/", 404, `pod "web" does not exist`},
		{"a bad scheme", "/default/web/uid-web/ftp/127.0.0.1/" + port + "/", 400, `scheme "ftp" is not http or https`},
		{"a bad port", "/default/web/uid-web/http/127.0.0.1/0/", 400, `port "0" is not a valid port number`},
		{"a host name", "/default/web/uid-web/http/localhost/" + port + "/", 400, `"localhost" is not an IP address`},
		{"nothing listening", "/default/web/uid-web/http/127.0.0.1/" + closed + "/", 502, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := proxyDo(t, "GET", f.srv.URL+"/podProxy"+c.path, "", nil)
			if resp.StatusCode != c.code || !strings.Contains(body, c.reason) || !strings.Contains(resp.Header.Get(ProxyErrorHeader), c.reason) {
				t.Fatalf("%d %q (%s %q), want %d with %q", resp.StatusCode, body, ProxyErrorHeader,
					resp.Header.Get(ProxyErrorHeader), c.code, c.reason)
			}
		})
	}
	if resp, _ := proxyDo(t, "TRACE", f.srv.URL+"/podProxy/default/web/uid-web/http/127.0.0.1/"+port+"/", "", nil); resp.StatusCode != 405 {
		t.Errorf("TRACE: %d", resp.StatusCode)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the pod server was reached %d times by refused requests", n)
	}
}

// TestPodProxyStreams: the pod's answer reaches the caller as the pod writes it, never held whole.
func TestPodProxyStreams(t *testing.T) {
	f := newPodProxyFixture(t)
	release := make(chan struct{})
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first part\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "second part\n")
	}))
	t.Cleanup(pod.Close)
	defer close(release)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/podProxy/default/web/uid-web/http/127.0.0.1/"+serverPort(t, pod)+"/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("first part\n"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first part\n" {
		t.Fatalf("first part before the pod finished: %q %v", buf, err)
	}
}
