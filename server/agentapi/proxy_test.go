package agentapi_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	//lint:ignore SA1019 client-go's portforward still takes and returns this package's Dialer
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"
)

// One environment (a database, an API, an agent) serves every subtest.
func TestProxy(t *testing.T) {
	en := newEnv(t)
	for name, f := range map[string]func(*testing.T, *env){
		"logs":                  logs,
		"logs follow":           logsFollow,
		"exec spdy":             execSPDY,
		"exec websocket":        execWebSocket,
		"attach":                attach,
		"port-forward":          portForward,
		"authorization":         authorization,
		"unbound pod":           unbound,
		"no agent":              noAgent,
		"container choice":      containerChoice,
		"cross-cluster":         crossCluster,
		"node proxy":            nodeProxy,
		"connect endpoint":      connectEndpoint,
		"discovery":             discovery,
		"agent reconnects":      agentReconnects,
		"credentials dropped":   credentialsDropped,
		"serving certificate":   servingCertificate,
		"pod and service proxy": podAndServiceProxy,
	} {
		t.Run(name, func(t *testing.T) { f(t, en) })
	}
}

func streamLogs(t *testing.T, en *env, token, name string, opts *corev1.PodLogOptions) (string, error) {
	t.Helper()
	rc, err := en.client("c1", token).CoreV1().Pods("default").GetLogs(name, opts).Stream(t.Context())
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func logs(t *testing.T, en *env) {
	got, err := streamLogs(t, en, "logger", "web", &corev1.PodLogOptions{TailLines: ptr.To[int64](2), Timestamps: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "c1/n1 default/web/app line 1\nc1/n1 default/web/app line 2\nc1/n1 default/web/app line 3\n"
	if got != want {
		t.Fatalf("logs %q, want %q", got, want)
	}
	q := en.k.last().URL.Query()
	if q.Get("tailLines") != "2" || q.Get("timestamps") != "true" || q.Has("follow") {
		t.Errorf("kubelet query %v", q)
	}
	a := en.do("GET", "/clusters/c1/api/v1/namespaces/default/pods/web/log?tailLines=-1", "admin", nil)
	if a.code != 422 || a.status.Reason != metav1.StatusReasonInvalid {
		t.Errorf("tailLines=-1: %d %s", a.code, a.body)
	}
}

func logsFollow(t *testing.T, en *env) {
	rc, err := en.client("c1", "logger").CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Follow: true}).
		Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	for i := 1; i <= 3; i++ {
		if l, err := br.ReadString('\n'); err != nil || !strings.HasSuffix(l, fmt.Sprintf("line %d\n", i)) {
			t.Fatalf("line %d: %q %v", i, l, err)
		}
	}
	for _, l := range []string{"later 1", "later 2"} { // each arrives while the stream stays open
		en.k.follow <- l
		if got, err := br.ReadString('\n'); err != nil || got != l+"\n" {
			t.Fatalf("followed line: %q %v", got, err)
		}
	}
}

func execURL(en *env, cluster, token, pod string, opts *corev1.PodExecOptions) *url.URL {
	return en.client(cluster, token).CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).URL()
}

func runSPDY(t *testing.T, en *env, token, pod, sub string, opts *corev1.PodExecOptions, stdin string) (string, error) {
	t.Helper()
	u := execURL(en, "c1", token, pod, opts)
	if sub == "attach" {
		u = en.client("c1", token).CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).
			SubResource(sub).VersionedParams(&corev1.PodAttachOptions{Container: opts.Container, Stdin: opts.Stdin,
			Stdout: opts.Stdout}, scheme.ParameterCodec).URL()
	}
	ex, err := remotecommand.NewSPDYExecutor(en.config("c1", token), "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	so := remotecommand.StreamOptions{Stdout: &out}
	if opts.Stdin {
		so.Stdin = strings.NewReader(stdin)
	}
	err = ex.StreamWithContext(t.Context(), so)
	return out.String(), err
}

func execSPDY(t *testing.T, en *env) {
	out, err := runSPDY(t, en, "admin", "web", "exec", &corev1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true}, "hello\nworld\n")
	if err != nil || out != "hello\nworld\n" {
		t.Fatalf("cat: %q %v", out, err)
	}
	out, err = runSPDY(t, en, "admin", "two", "exec", &corev1.PodExecOptions{Container: "b", Command: []string{"whoami"}, Stdout: true}, "")
	if err != nil || out != "c1/n1 two/b\n" {
		t.Fatalf("whoami: %q %v", out, err)
	}
	_, err = runSPDY(t, en, "admin", "web", "exec", &corev1.PodExecOptions{Command: []string{"fail"}, Stdout: true}, "")
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Fatalf("fail: %v, want exit code 3", err)
	}
}

func execWebSocket(t *testing.T, en *env) {
	u := execURL(en, "c1", "admin", "web", &corev1.PodExecOptions{Command: []string{"echo", "over", "websocket"},
		Stdout: true})
	// The kubelet's streaming server speaks v4 over websockets; the proxy passes the protocol through.
	ex, err := remotecommand.NewWebSocketExecutorForProtocols(en.config("c1", "admin"), "GET", u.String(), "v4.channel.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "over websocket\n" {
		t.Fatalf("stdout %q", out.String())
	}
}

func attach(t *testing.T, en *env) {
	out, err := runSPDY(t, en, "admin", "web", "attach", &corev1.PodExecOptions{Stdin: true, Stdout: true}, "typed\n")
	if err != nil || out != "attached app\ntyped\n" {
		t.Fatalf("attach: %q %v", out, err)
	}
}

// portForward: through client-go's SPDY dialer, and its SPDY-over-websocket tunneling dialer (kubectl's
// default since 1.31), which the server bridges to the kubelet's SPDY port-forward.
func portForward(t *testing.T, en *env) {
	cfg := en.config("c1", "admin")
	u := en.client("c1", "admin").CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").
		SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, dialer := range map[string]httpstream.Dialer{
		"spdy":      spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u),
		"websocket": wsDialer,
	} {
		t.Run(name, func(t *testing.T) { forwardAndTalk(t, dialer) })
	}

	// A pod whose agent is away: the websocket client gets the API's Status, not an upgrade.
	lost := en.client("c1", "admin").CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("lost").
		SubResource("portforward").URL()
	d, err := portforward.NewSPDYOverWebsocketDialer(lost, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Dial(portforward.PortForwardProtocolV1Name); err == nil || !strings.Contains(err.Error(), "node n9's agent is not connected") {
		t.Errorf("websocket port-forward to a pod whose agent is away: %v", err)
	}
}

// forwardAndTalk forwards a local port to the pod's 8080 with dialer and talks to the fake kubelet's echo.
func forwardAndTalk(t *testing.T, dialer httpstream.Dialer) {
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	defer func() { close(stop); <-done }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // two connections through one port-forward
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for _, l := range []string{"ping\n", "pong\n"} {
			if _, err := io.WriteString(c, l); err != nil {
				t.Fatal(err)
			}
			if got, err := br.ReadString('\n'); err != nil || got != "8080:"+l {
				t.Fatalf("forwarded: %q %v", got, err)
			}
		}
		c.Close()
	}
}

// wsHeaders ask for a websocket upgrade.
var wsHeaders = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
	"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {"v4.channel.k8s.io"}}

func authorization(t *testing.T, en *env) {
	const execPath = "/clusters/c1/api/v1/namespaces/default/pods/web/exec?command=echo&stdout=true"
	for _, c := range []struct {
		name, method, path, token string
		header                    http.Header
		want                      string // in the 403's message
	}{
		{"get pods cannot read logs", "GET", "/clusters/c1/api/v1/namespaces/default/pods/web/log", "reader", nil, `cannot get resource "pods/log"`},
		{"get pods cannot exec", "POST", execPath, "reader", nil, `cannot create resource "pods/exec"`},
		{"get pods cannot exec over websocket", "GET", execPath, "reader", wsHeaders, `cannot get resource "pods/exec"`},
		{"get pods/exec is not enough for a websocket", "GET", execPath, "wsonly", wsHeaders, `cannot create resource "pods/exec"`},
		{"get pods cannot port-forward", "POST", "/clusters/c1/api/v1/namespaces/default/pods/web/portforward", "reader", nil, `cannot create resource "pods/portforward"`},
		{"get pods cannot attach", "POST", "/clusters/c1/api/v1/namespaces/default/pods/web/attach?stdout=true", "reader", nil, `cannot create resource "pods/attach"`},
		{"get nodes cannot proxy", "GET", "/clusters/c1/api/v1/nodes/n1/proxy/healthz", "reader", nil, `cannot get resource "nodes/proxy"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := en.do(c.method, c.path, c.token, c.header)
			if a.code != 403 || a.status.Reason != metav1.StatusReasonForbidden || !strings.Contains(a.status.Message, c.want) {
				t.Fatalf("%d %s, want 403 with %q", a.code, a.body, c.want)
			}
		})
	}
	_, err := runSPDY(t, en, "reader", "web", "exec", &corev1.PodExecOptions{Command: []string{"echo"}, Stdout: true}, "")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("client-go exec as reader: %v", err)
	}
}

func unbound(t *testing.T, en *env) {
	a := en.do("POST", "/clusters/c1/api/v1/namespaces/default/pods/pending/exec?command=echo&stdout=true", "admin", nil)
	if a.code != 400 || a.status.Message != "pod pending does not have a host assigned" {
		t.Fatalf("exec: %d %s", a.code, a.body)
	}
	a = en.do("POST", "/clusters/c1/api/v1/namespaces/default/pods/pending/portforward", "admin", nil)
	if a.code != 400 || a.status.Message != "pod pending does not have a host assigned" {
		t.Fatalf("port-forward: %d %s", a.code, a.body)
	}
	// Logs of a pod without a node are an empty stream, as upstream's.
	if got, err := streamLogs(t, en, "admin", "pending", &corev1.PodLogOptions{}); err != nil || got != "" {
		t.Fatalf("logs: %q %v", got, err)
	}
	if a := en.do("GET", "/clusters/c1/api/v1/namespaces/default/pods/absent/log", "admin", nil); a.code != 404 {
		t.Fatalf("missing pod: %d %s", a.code, a.body)
	}
}

func noAgent(t *testing.T, en *env) {
	a := en.do("GET", "/clusters/c1/api/v1/namespaces/default/pods/lost/log", "admin", nil)
	if a.code != 503 || a.status.Reason != metav1.StatusReasonServiceUnavailable || a.status.Message != "node n9's agent is not connected" {
		t.Fatalf("%d %s", a.code, a.body)
	}
	_, err := runSPDY(t, en, "admin", "lost", "exec", &corev1.PodExecOptions{Command: []string{"echo"}, Stdout: true}, "")
	if err == nil || !strings.Contains(err.Error(), "agent is not connected") {
		t.Fatalf("exec: %v", err)
	}
}

func containerChoice(t *testing.T, en *env) {
	for _, c := range []struct{ name, query, code, want string }{
		{"ambiguous", "", "400", "a container name must be specified for pod two, choose one of: [a b] or one of the init containers: [init]"},
		{"unknown", "?container=zz", "400", "container zz is not valid for pod two"},
		{"named", "?container=b", "200", "c1/n1 default/two/b line 1"},
		{"init container", "?container=init", "200", "c1/n1 default/two/init line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := en.do("GET", "/clusters/c1/api/v1/namespaces/default/pods/two/log"+c.query, "admin", nil)
			if fmt.Sprint(a.code) != c.code {
				t.Fatalf("%d %s, want %s", a.code, a.body, c.code)
			}
			if got := a.status.Message; a.code != 200 && got != c.want {
				t.Fatalf("message %q, want %q", got, c.want)
			}
			if a.code == 200 && !strings.HasPrefix(a.body, c.want) {
				t.Fatalf("logs %q, want %q...", a.body, c.want)
			}
		})
	}
	got, err := streamLogs(t, en, "admin", "annotated", &corev1.PodLogOptions{})
	if err != nil || !strings.HasPrefix(got, "c1/n1 default/annotated/b line 1") {
		t.Fatalf("annotated default container: %q %v", got, err)
	}
}

func crossCluster(t *testing.T, en *env) {
	// c2 has a pod bound to a node named n1 too, but only c1's n1 is connected: c2 never reaches it.
	a := en.do("GET", "/clusters/c2/api/v1/namespaces/default/pods/web/log", "admin", nil)
	if a.code != 503 || strings.Contains(a.body, "c1/n1") {
		t.Fatalf("c2's pod on n1: %d %s", a.code, a.body)
	}
	a = en.do("GET", "/clusters/c2/api/v1/nodes/n1/proxy/healthz", "admin", nil)
	if a.code != 503 || strings.Contains(a.body, "c1/n1") {
		t.Fatalf("c2's node n1: %d %s", a.code, a.body)
	}
	// c1's node credential does not open a tunnel into c2.
	if a := en.do("GET", "/clusters/c2/agent/connect", "node-c1-n1", wsHeaders); a.code != 401 {
		t.Fatalf("c1's node connecting to c2: %d %s", a.code, a.body)
	}
	if en.tunnels.Connected("c2", "n1") {
		t.Fatal("c2/n1 connected")
	}
}

func nodeProxy(t *testing.T, en *env) {
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/clusters/c1/api/v1/nodes/n1/proxy/stats/summary?only=cpu", "proxy c1/n1 GET /stats/summary?only=cpu"},
		{"GET", "/clusters/c1/api/v1/nodes/n1/proxy", "proxy c1/n1 GET /?"},
		{"POST", "/clusters/c1/api/v1/nodes/n1/proxy/run", "proxy c1/n1 POST /run?"},
	} {
		a := en.do(c.method, c.path, "admin", nil)
		if a.code != 200 || a.body != c.want {
			t.Errorf("%s %s: %d %q, want %q", c.method, c.path, a.code, a.body, c.want)
		}
	}
	if a := en.do("GET", "/clusters/c1/api/v1/nodes/n7/proxy/healthz", "admin", nil); a.code != 404 {
		t.Errorf("missing node: %d %s", a.code, a.body)
	}
}

func connectEndpoint(t *testing.T, en *env) {
	for _, c := range []struct {
		name, token string
		header      http.Header
		code        int
	}{
		{"no credential", "", wsHeaders, 401},
		{"unknown token", "nope", wsHeaders, 401},
		{"not a node", "admin", wsHeaders, 403},
		{"unknown cluster", "node-c1-n1", wsHeaders, 401},
		{"browser origin", "node-c2-n3", http.Header{"Origin": {"https://evil.example"}, "Connection": {"Upgrade"},
			"Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
			"Sec-Websocket-Protocol": {"tunnel.wheelhouse.dev/v1"}}, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := "/clusters/c2/agent/connect"
			if c.name == "unknown cluster" {
				path = "/clusters/c9/agent/connect"
			}
			if a := en.do("GET", path, c.token, c.header); a.code != c.code {
				t.Fatalf("%d %s, want %d", a.code, a.body, c.code)
			}
		})
	}
	if en.tunnels.Connected("c2", "n3") {
		t.Fatal("a refused agent is connected")
	}
}

func discovery(t *testing.T, en *env) {
	l, err := en.client("c1", "admin").Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	verbs := map[string]string{}
	for _, r := range l.APIResources {
		verbs[r.Name] = strings.Join(r.Verbs, ",") + " " + r.Kind
	}
	for name, want := range map[string]string{"pods/log": "get Pod", "pods/exec": "create,get PodExecOptions",
		"pods/attach": "create,get PodAttachOptions", "pods/portforward": "create,get PodPortForwardOptions",
		"nodes/proxy":    "create,delete,get,patch,update NodeProxyOptions",
		"pods/proxy":     "create,delete,get,patch,update PodProxyOptions",
		"services/proxy": "create,delete,get,patch,update ServiceProxyOptions"} {
		if verbs[name] != want {
			t.Errorf("%s verbs and kind %q, want %q", name, verbs[name], want)
		}
	}
}

func agentReconnects(t *testing.T, en *env) {
	// A second agent for c2/n2 comes and goes; the proxy follows it.
	k := newFakeKubelet("c2/n2")
	a := en.do("GET", "/clusters/c2/api/v1/nodes/n2/proxy/x", "admin", nil)
	if a.code != 404 { // no Node object n2 in c2 yet
		t.Fatalf("before the node exists: %d %s", a.code, a.body)
	}
	cs := en.client("c2", "admin")
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := en.do("GET", "/clusters/c2/api/v1/nodes/n2/proxy/x", "admin", nil); a.code != 503 {
		t.Fatalf("before the agent connects: %d %s", a.code, a.body)
	}
	en.startAgent("c2", "node-c2-n2", k)
	waitFor(t, "c2/n2 through the proxy", func() bool {
		return en.do("GET", "/clusters/c2/api/v1/nodes/n2/proxy/x", "admin", nil).body == "proxy c2/n2 GET /x?"
	})
}

func credentialsDropped(t *testing.T, en *env) {
	if a := en.do("GET", "/clusters/c1/api/v1/nodes/n1/proxy/secret", "admin", http.Header{"Cookie": {"a=b"}}); a.code != 200 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	h := en.k.last().Header
	for _, k := range []string{"Authorization", "Cookie"} {
		if h.Get(k) != "" {
			t.Errorf("the kubelet received %s: %q", k, h.Get(k))
		}
	}
}
