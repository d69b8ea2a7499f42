package agentapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// seen is what a test pod server saw of a request, and which server it was.
type seen struct {
	Server, Method, Path, Query, Body, Host string
	Header                                  http.Header
}

// podHTTP is a test server standing for one port of a pod: it echoes each request as a seen, and serves a few
// pages for the link rewriting (/html, /gzip, /redirect, /cors, /slow).
func podHTTP(t *testing.T, name string, release <-chan struct{}) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{Server: name, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Body: string(b), Host: r.Host, Header: r.Header})
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, testPage)
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `<a href="/zipped">z</a>`)
		_ = zw.Close()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere/", http.StatusFound)
	})
	mux.HandleFunc("/cors", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("X-Pod", name)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><a href=\"/first\">first</a>\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "<a href=\"/second\">second</a></html>\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

const testPage = `<!DOCTYPE html><html><head><link rel="stylesheet" href="/style.css"></head>` +
	`<body><a href="/rewriteme">test</a> <A HREF="http://10.244.1.10:8080/abs?q=1">abs</A> <a href="rel/x">rel</a> ` +
	`<a href="https://example.com/x">away</a> <img src="/i.png"/> <form action="/post/"></form>` +
	`<script>var s = "<a href='/not/a/link'>";</script><a href="/api/v1/namespaces/default/pods/web-pod/proxy/done">done</a></body></html>`

const webPrefix = "/api/v1/namespaces/default/pods/web-pod/proxy"

// podProxyFixtures creates, in c1, the pods, services, EndpointSlices, RBAC and agents of the pod and service
// proxy tests: web-pod (10.244.1.10, ports web 8080 and alt 9090 served by the fake kubelet n1), notready
// (10.244.1.11), a pod without an address, one on a node whose agent is away, and two on node n5 whose agent is
// the real kubelet API over a fake runtime that runs only "elsewhere" (with no address).
func podProxyFixtures(t *testing.T, en *env) (release chan struct{}) {
	ctx, cs := t.Context(), apitest.Admin(t, en.api, "c1")
	release = make(chan struct{})
	for ipPort, name := range map[string]string{"10.244.1.10:8080": "web-pod:8080", "10.244.1.10:9090": "web-pod:9090",
		"10.244.1.10:8443": "web-pod:8443", "10.244.1.11:8080": "notready:8080"} {
		en.k.servePod(ipPort, strings.TrimPrefix(podHTTP(t, name, release).URL, "http://"))
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n5"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for _, p := range []struct{ name, node, ip string }{{"web-pod", "n1", "10.244.1.10"}, {"notready", "n1", "10.244.1.11"},
		{"noip", "n1", ""}, {"far", "n9", "10.244.9.9"}, {"elsewhere", "n5", "10.244.5.5"}, {"ghost", "n5", "10.244.5.6"}} {
		pod := pod(p.name, p.node, "app")
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}, {Name: "alt", ContainerPort: 9090}}
		created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[p.name] = string(created.UID)
		if p.ip == "" {
			continue
		}
		created.Status.PodIP, created.Status.PodIPs = p.ip, []corev1.PodIP{{IP: p.ip}}
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svcPorts := map[string][]corev1.ServicePort{
		"svc":   {{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}},
		"plain": {{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		"empty": {{Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}
	for name, ports := range svcPorts {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
		if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ep := func(ip string, ready bool, pod string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}
		}
		return e
	}
	for _, s := range []*discoveryv1.EndpointSlice{{
		ObjectMeta:  metav1.ObjectMeta{Name: "svc-1", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)},
			{Name: ptr.To("https"), Port: ptr.To[int32](8443)}},
		// Only web-pod's is one to proxy to: not ready, no pod, an address that is not the pod's.
		Endpoints: []discoveryv1.Endpoint{ep("10.244.1.11", false, "notready"), ep("10.244.1.12", true, ""),
			ep("10.244.1.99", true, "web-pod"), ep("10.244.1.10", true, "web-pod")},
	}, {
		ObjectMeta:  metav1.ObjectMeta{Name: "plain-1", Labels: map[string]string{discoveryv1.LabelServiceName: "plain"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{ep("10.244.1.10", true, "web-pod")},
	}} {
		if _, err := cs.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "proxier"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/proxy", "services/proxy"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proxier"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "proxier"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "proxier"}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	en.startAgent("c1", "node-c1-n5", realKubelet(t, "elsewhere", uids["elsewhere"]))
	waitFor(t, "agent n5 connected", func() bool { return en.tunnels.Connected("c1", "n5") })
	return release
}

// realKubelet is the agent's kubelet API over a fake runtime running one pod, whose sandbox has no address.
func realKubelet(t *testing.T, name, uid string) http.Handler {
	rt := fake.New()
	p, err := kubelet.NewPods(nil, kubelet.PodsConfig{NodeName: "n5", Runtime: rt, DataDir: t.TempDir(),
		NodeIP: func() string { return "10.0.5.1" }})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default",
		"io.kubernetes.pod.uid": uid}
	if _, err := rt.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{Labels: labels,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid}}, ""); err != nil {
		t.Fatal(err)
	}
	return p.APIHandler()
}

// raw sends a request as the user of token without following redirects.
func (en *env) raw(method, path, token string, header http.Header, body string) (*http.Response, string) {
	en.t.Helper()
	req, err := http.NewRequestWithContext(en.t.Context(), method, en.srv.URL+path, strings.NewReader(body))
	if err != nil {
		en.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Transport: en.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		en.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		en.t.Fatal(err)
	}
	return resp, string(b)
}

// echo sends a request through the proxy and decodes what the pod server saw.
func (en *env) echo(method, path, token, body string) seen {
	en.t.Helper()
	resp, b := en.raw(method, path, token, nil, body)
	var s seen
	if err := json.Unmarshal([]byte(b), &s); resp.StatusCode != 200 || err != nil {
		en.t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, b)
	}
	return s
}

const c1NS = "/clusters/c1/api/v1/namespaces/default"

func podAndServiceProxy(t *testing.T, en *env) {
	release := podProxyFixtures(t, en)
	defer close(release)
	for name, f := range map[string]func(*testing.T, *env){
		"methods, paths and queries": proxyMethods,
		"ports and schemes":          proxyPorts,
		"root redirect":              proxyRootRedirect,
		"clean paths":                proxyCleanPaths,
		"headers":                    proxyHeaders,
		"links rewritten":            proxyLinks,
		"services":                   serviceProxy,
		"errors":                     proxyErrors,
		"authorization":              proxyAuthorization,
	} {
		t.Run(name, func(t *testing.T) { f(t, en) })
	}
	t.Run("streams", func(t *testing.T) { proxyStreams(t, en, release) })
}

func proxyMethods(t *testing.T, en *env) {
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		s := en.echo(m, c1NS+"/pods/web-pod/proxy/some/path/with/"+m+"?a=1&b=x%20y&a=2", "admin", "body of "+m)
		if s.Server != "web-pod:8080" || s.Method != m || s.Path != "/some/path/with/"+m || s.Query != "a=1&b=x%20y&a=2" ||
			s.Body != "body of "+m {
			t.Errorf("%s: the pod saw %+v", m, s)
		}
	}
	// A body larger than the API's limit for objects streams through whole.
	big := strings.Repeat("0123456789abcdef", 5<<16)
	if s := en.echo("PUT", c1NS+"/pods/web-pod/proxy/upload", "admin", big); s.Body != big {
		t.Errorf("a %d-byte body reached the pod as %d bytes", len(big), len(s.Body))
	}
	if resp, body := en.raw("HEAD", c1NS+"/pods/web-pod/proxy/head", "admin", nil, ""); resp.StatusCode != 200 || body != "" {
		t.Errorf("HEAD: %d %q", resp.StatusCode, body)
	}
	// A trailing slash stays; an encoded "?" is part of the path, not the query.
	if s := en.echo("GET", c1NS+"/pods/web-pod/proxy/dir/", "admin", ""); s.Path != "/dir/" {
		t.Errorf("trailing slash: %q", s.Path)
	}
	if s := en.echo("GET", c1NS+"/pods/web-pod/proxy/what%3Fnot?real=1", "admin", ""); s.Path != "/what?not" || s.Query != "real=1" {
		t.Errorf("encoded ?: %q %q", s.Path, s.Query)
	}
	// client-go's way (the PreStop conformance test's).
	b, err := en.client("c1", "admin").CoreV1().RESTClient().Get().Namespace("default").Resource("pods").
		SubResource("proxy").Name("web-pod").Suffix("read").DoRaw(t.Context())
	if err != nil || !strings.Contains(string(b), `"Path":"/read"`) {
		t.Errorf("client-go: %s %v", b, err)
	}
}

func proxyPorts(t *testing.T, en *env) {
	for _, c := range []struct{ name, want string }{
		{"web-pod", "web-pod:8080"}, // the first container port
		{"web-pod:9090", "web-pod:9090"},
		{"web-pod:alt", "web-pod:9090"}, // a container port's name
		{"http:web-pod:9090", "web-pod:9090"},
	} {
		if s := en.echo("GET", c1NS+"/pods/"+c.name+"/proxy/", "admin", ""); s.Server != c.want {
			t.Errorf("%s: reached %s, want %s", c.name, s.Server, c.want)
		}
	}
	en.echo("GET", c1NS+"/pods/https:web-pod:8443/proxy/tls", "admin", "")
	if p := en.k.last().URL.Path; !strings.HasPrefix(p, "/podProxy/default/web-pod/") || !strings.HasSuffix(p, "/https/10.244.1.10/8443/tls") {
		t.Errorf("the agent was asked for %q", p)
	}
}

// proxyRootRedirect: upstream redirects a GET or HEAD of the proxy's root without its slash; other methods
// reach the pod's "/" (the Proxy conformance test's ?method=).
func proxyRootRedirect(t *testing.T, en *env) {
	for _, base := range []string{c1NS + "/pods/web-pod/proxy", c1NS + "/services/svc:http/proxy"} {
		for _, m := range []string{"GET", "HEAD"} {
			resp, _ := en.raw(m, base+"?method="+m, "admin", nil, "")
			if resp.StatusCode != 301 || resp.Header.Get("Location") != base+"/?method="+m {
				t.Errorf("%s %s: %d %q", m, base, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if s := en.echo(m, base+"?method="+m, "admin", ""); s.Path != "/" || s.Method != m || s.Query != "method="+m {
				t.Errorf("%s %s: the pod saw %+v", m, base, s)
			}
		}
	}
}

func proxyCleanPaths(t *testing.T, en *env) {
	for path, want := range map[string]string{
		"/a/../../b":                          "/b",
		"/%2e%2e/%2E%2E/c":                    "/c",
		"/x//y/./z/":                          "/x/y/z/",
		"/../../other/proxy/../../../healthz": "/healthz",
	} {
		if s := en.echo("GET", c1NS+"/pods/web-pod/proxy"+path, "admin", ""); s.Path != want || s.Server != "web-pod:8080" {
			t.Errorf("%s: the pod saw %q on %s, want %q", path, s.Path, s.Server, want)
		}
		if p := en.k.last().URL.Path; strings.Contains(p, "..") || strings.Contains(p, "//") {
			t.Errorf("%s: the agent was asked for %q", path, p)
		}
	}
}

func proxyHeaders(t *testing.T, en *env) {
	resp, b := en.raw("GET", c1NS+"/pods/web-pod/proxy/h", "admin", http.Header{"Cookie": {"session=secret"},
		"X-Remote-User": {"someone"}, "X-Custom": {"kept"}}, "")
	var s seen
	if err := json.Unmarshal([]byte(b), &s); resp.StatusCode != 200 || err != nil {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	for _, h := range []string{"Authorization", "Cookie", "X-Remote-User", "X-Wheelhouse-Forwarded-To-Tunnel"} {
		if v := s.Header.Get(h); v != "" {
			t.Errorf("the pod received %s: %q", h, v)
		}
	}
	u, _ := url.Parse(en.srv.URL)
	if s.Header.Get("X-Custom") != "kept" || s.Header.Get("X-Forwarded-Uri") != webPrefix+"/h" ||
		s.Header.Get("X-Forwarded-For") != "127.0.0.1" || s.Host != u.Host {
		t.Errorf("the pod saw host %q, headers %v", s.Host, s.Header)
	}
	resp, _ = en.raw("GET", c1NS+"/pods/web-pod/proxy/cors", "admin", nil, "")
	if resp.Header.Get("X-Pod") != "web-pod:8080" || resp.Header.Get("Access-Control-Allow-Origin") != "" ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("CORS headers of the pod reached the client: %v", resp.Header)
	}
}

func proxyLinks(t *testing.T, en *env) {
	want := `<!DOCTYPE html><html><head><link rel="stylesheet" href="` + webPrefix + `/style.css"></head>` +
		`<body><a href="` + webPrefix + `/rewriteme">test</a> <a href="` + webPrefix + `/abs?q=1">abs</a> <a href="rel/x">rel</a> ` +
		`<a href="https://example.com/x">away</a> <img src="` + webPrefix + `/i.png"/> <form action="` + webPrefix + `/post/"></form>` +
		`<script>var s = "<a href='/not/a/link'>";</script><a href="` + webPrefix + `/done">done</a></body></html>`
	want = strings.Replace(want, "abs</a>", "abs</A>", 1) // only tags whose links change are written again
	if resp, body := en.raw("GET", c1NS+"/pods/web-pod/proxy/html", "admin", nil, ""); resp.StatusCode != 200 || body != want {
		t.Errorf("page: %d\n%s\nwant\n%s", resp.StatusCode, body, want)
	}
	// The prefix is the URL's name as the client wrote it (the Proxy conformance test's expectations).
	portPrefix := "/api/v1/namespaces/default/pods/web-pod:8080/proxy"
	if _, body := en.raw("GET", c1NS+"/pods/web-pod:8080/proxy/html", "admin", nil, ""); !strings.Contains(body, `<a href="`+portPrefix+`/rewriteme">`) {
		t.Errorf("page through web-pod:8080: %s", body)
	}
	resp, _ := en.raw("GET", c1NS+"/pods/web-pod/proxy/redirect", "admin", nil, "")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != webPrefix+"/elsewhere/" {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := en.raw("GET", c1NS+"/pods/web-pod/proxy/gzip", "admin", http.Header{"Accept-Encoding": {"gzip"}}, "")
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip page: %v %v", err, resp.Header)
	}
	if page, _ := io.ReadAll(zr); string(page) != `<a href="`+webPrefix+`/zipped">z</a>` {
		t.Errorf("gzip page: %q", page)
	}
}

// proxyStreams: a page reaches the client as the pod writes it, links rewritten, never held whole.
func proxyStreams(t *testing.T, en *env, release chan<- struct{}) {
	req, err := http.NewRequestWithContext(t.Context(), "GET", en.srv.URL+c1NS+"/pods/web-pod/proxy/slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := en.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first tags arrive while the pod still holds the rest (the text after them is one token that only the
	// next tag or the end completes).
	br := bufio.NewReader(resp.Body)
	var first string
	for !strings.HasSuffix(first, "</a>") {
		part, err := br.ReadString('>')
		if err != nil {
			t.Fatalf("before the pod finished: %q %v", first+part, err)
		}
		first += part
	}
	if first != `<html><a href="`+webPrefix+`/first">first</a>` {
		t.Fatalf("before the pod finished: %q", first)
	}
	release <- struct{}{}
	rest, _ := io.ReadAll(br)
	if !bytes.Contains(rest, []byte(webPrefix+"/second")) {
		t.Errorf("rest: %q", rest)
	}
}

func serviceProxy(t *testing.T, en *env) {
	// Only web-pod's endpoint is ready and holds its pod's address: every request goes there.
	for range 12 {
		if s := en.echo("GET", c1NS+"/services/svc:http/proxy/x?y=1", "admin", ""); s.Server != "web-pod:8080" || s.Path != "/x" || s.Query != "y=1" {
			t.Fatalf("svc:http reached %+v", s)
		}
	}
	for _, name := range []string{"svc:80", "http:svc:http", "http:svc:80"} {
		if s := en.echo("POST", c1NS+"/services/"+name+"/proxy/p", "admin", "b"); s.Server != "web-pod:8080" || s.Method != "POST" || s.Body != "b" {
			t.Errorf("%s reached %+v", name, s)
		}
	}
	en.echo("DELETE", c1NS+"/services/https:svc:443/proxy/tls", "admin", "")
	if p := en.k.last().URL.Path; !strings.HasSuffix(p, "/https/10.244.1.10/8443/tls") {
		t.Errorf("https:svc:443: the agent was asked for %q", p)
	}
	// A service port without a name (the ProxyWithPath conformance test's).
	if s := en.echo("PUT", c1NS+"/services/plain/proxy/some/path", "admin", ""); s.Server != "web-pod:8080" || s.Path != "/some/path" {
		t.Errorf("plain reached %+v", s)
	}
	resp, body := en.raw("GET", c1NS+"/services/svc:http/proxy/html", "admin", nil, "")
	if resp.StatusCode != 200 || !strings.Contains(body, `<a href="/api/v1/namespaces/default/services/svc:http/proxy/rewriteme">`) {
		t.Errorf("service page: %d %s", resp.StatusCode, body)
	}
}

func proxyErrors(t *testing.T, en *env) {
	for _, c := range []struct {
		name, path string
		code       int
		reason     metav1.StatusReason
		message    string
	}{
		{"no such pod", "/pods/absent/proxy/", 404, metav1.StatusReasonNotFound, `pods "absent" not found`},
		{"no such service", "/services/absent/proxy/", 404, metav1.StatusReasonNotFound, `services "absent" not found`},
		{"a pod without an address", "/pods/noip/proxy/", 400, metav1.StatusReasonBadRequest, "address not allowed"},
		{"a bad name", "/pods/a:b:c:d/proxy/", 400, metav1.StatusReasonBadRequest, `invalid pod request "a:b:c:d"`},
		{"a bad scheme", "/services/ftp:svc:80/proxy/", 400, metav1.StatusReasonBadRequest, `invalid service request "ftp:svc:80"`},
		{"no such container port", "/pods/web-pod:nope/proxy/", 400, metav1.StatusReasonBadRequest, `pod web-pod has no port "nope"`},
		{"a service without endpoints", "/services/empty/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			`no endpoints available for service "empty"`},
		{"no such service port", "/services/svc:99/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			`no service port 99 found for service "svc"`},
		{"no endpoint for the port", "/services/svc:other/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			`no endpoints available for service "svc:other"`},
		{"the agent away", "/pods/far/proxy/", 503, metav1.StatusReasonServiceUnavailable, "node n9's agent is not connected"},
		{"a port nothing serves", "/pods/web-pod:7070/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			"error trying to reach service: dial tcp 10.244.1.10:7070: connect: connection refused"},
		// The real agent's refusals: the address is not its pod's; the pod is not one it runs.
		{"an address the agent does not give the pod", "/pods/elsewhere/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			`error trying to reach service: 10.244.5.5 is not an address of pod "elsewhere"`},
		{"a pod the agent does not run", "/pods/ghost/proxy/", 503, metav1.StatusReasonServiceUnavailable,
			`error trying to reach service: pod "ghost" does not exist`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := en.do("GET", c1NS+c.path, "admin", nil)
			if a.code != c.code || a.status.Reason != c.reason || a.status.Message != c.message {
				t.Fatalf("%d %s, want %d %s %q", a.code, a.body, c.code, c.reason, c.message)
			}
		})
	}
}

func proxyAuthorization(t *testing.T, en *env) {
	for _, c := range []struct{ method, path, token, want string }{
		{"GET", "/pods/web-pod/proxy/", "reader", `cannot get resource "pods/proxy"`},
		{"POST", "/pods/web-pod/proxy/", "reader", `cannot create resource "pods/proxy"`},
		{"GET", "/services/svc/proxy/", "reader", `cannot get resource "services/proxy"`},
		{"DELETE", "/pods/web-pod/proxy/x", "proxier", `cannot delete resource "pods/proxy"`},
		{"PUT", "/services/svc/proxy/x", "proxier", `cannot update resource "services/proxy"`},
		{"PATCH", "/pods/web-pod/proxy/x", "proxier", `cannot patch resource "pods/proxy"`},
		// OPTIONS has no verb, as upstream's: only a rule for every verb allows it.
		{"OPTIONS", "/pods/web-pod/proxy/x", "proxier", `resource "pods/proxy"`},
	} {
		a := en.doBody(c.method, c1NS+c.path, c.token, nil, nil)
		if a.code != 403 || a.status.Reason != metav1.StatusReasonForbidden || !strings.Contains(a.status.Message, c.want) {
			t.Errorf("%s %s as %s: %d %s, want 403 with %q", c.method, c.path, c.token, a.code, a.body, c.want)
		}
	}
	// get pods/proxy and services/proxy is enough for GET and HEAD, on any port and scheme (RBAC names the
	// resource by the URL's name).
	if s := en.echo("GET", c1NS+"/pods/web-pod:9090/proxy/x", "proxier", ""); s.Server != "web-pod:9090" {
		t.Errorf("proxier: %+v", s)
	}
	if resp, _ := en.raw("HEAD", c1NS+"/services/svc:http/proxy/x", "proxier", nil, ""); resp.StatusCode != 200 {
		t.Errorf("proxier HEAD of a service: %d", resp.StatusCode)
	}
}
