package agentapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/server/agentapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// tokenUser is who a test token authenticates, and in which cluster ("" for any).
type tokenUser struct {
	cluster string
	user    kubeapi.User
}

// fakeAuth authenticates the test tokens, for the Kubernetes API and the agent endpoint alike (as the server
// shares one authenticator between them).
type fakeAuth map[string]tokenUser

func (f fakeAuth) AuthenticateToken(_ context.Context, cluster, token string) (kubeapi.User, error) {
	u, ok := f[token]
	if !ok || (u.cluster != "" && u.cluster != cluster) {
		return kubeapi.User{}, kubeapi.ErrUnauthenticated
	}
	return u.user, nil
}

func user(name string, groups ...string) tokenUser {
	return tokenUser{user: kubeapi.User{Name: name, Groups: append(groups, "system:authenticated")}}
}

func node(cluster, name string) tokenUser {
	return tokenUser{cluster: cluster, user: kubeapi.User{Name: "system:node:" + name,
		Groups: []string{"system:nodes", "system:authenticated"}}}
}

var tokens = fakeAuth{
	"admin":      user("admin", "system:masters"),
	"reader":     user("reader"),  // get and list pods and nodes
	"logger":     user("logger"),  // reader's rights and get pods/log
	"wsonly":     user("wsonly"),  // get pods and pods/exec, not create
	"proxier":    user("proxier"), // get pods/proxy and services/proxy
	"node-c1-n1": node("c1", "n1"),
	"node-c1-n5": node("c1", "n5"),
	"node-c2-n2": node("c2", "n2"),
	"node-c2-n3": node("c2", "n3"),
}

// env is the real Kubernetes API (clusters c1 and c2, on PostgreSQL) with the agent endpoints on an HTTPS
// server, a connected agent n1 in cluster c1 whose kubelet is k, and a set of pods.
type env struct {
	t       *testing.T
	api     *kubeapi.API
	tunnels *tunnel.Registry
	srv     *httptest.Server
	k       *fakeKubelet
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tunnels := tunnel.NewRegistry(tunnel.RegistryConfig{Logger: quiet, Keepalive: time.Second})
	agents, err := agentapi.New(agentapi.Config{Authenticator: tokens, Tunnels: tunnels, Certificates: newAuthority(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api, _ := apitest.NewWith(t, func(c *kubeapi.Config) { c.Authenticator, c.Connector = tokens, agents })
	e := echo.New()
	api.Register(e)
	agents.Register(e)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(func() { tunnels.Close(); srv.Close() })
	en := &env{t: t, api: api, tunnels: tunnels, srv: srv, k: newFakeKubelet("c1/n1")}
	en.startAgent("c1", "node-c1-n1", en.k)
	apitest.Eventually(t, "agent n1 connected", func() bool { return tunnels.Connected("c1", "n1") })
	en.setup()
	return en
}

// startAgent runs an agent with the node credential token for cluster until the test ends.
func (en *env) startAgent(cluster, token string, h http.Handler) {
	ctx, cancel := context.WithCancel(en.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tunnel.Serve(ctx, tunnel.Config{URL: en.wsURL(cluster), Token: token, TLS: en.tls(), Handler: h,
			Logger: quiet, Keepalive: time.Second, Backoff: tunnel.Backoff{Initial: 10 * time.Millisecond,
				Max: 50 * time.Millisecond}})
	}()
	en.t.Cleanup(func() { cancel(); <-done })
}

func (en *env) wsURL(cluster string) string {
	return "wss" + strings.TrimPrefix(en.srv.URL, "https") + "/clusters/" + cluster + "/agent/connect"
}

func (en *env) tls() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(en.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// config is a client-go configuration for cluster as the user of token, over HTTPS.
func (en *env) config(cluster, token string) *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: en.srv.Certificate().Raw})
	return &rest.Config{Host: en.srv.URL + kubeapi.Prefix(cluster), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func (en *env) client(cluster, token string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(en.config(cluster, token))
	if err != nil {
		en.t.Fatal(err)
	}
	return cs
}

func pod(name, node string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	return p
}

// setup creates the nodes, pods and RBAC objects of the tests.
func (en *env) setup() {
	t, ctx := en.t, en.t.Context()
	two := pod("two", "n1", "a", "b")
	two.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	annotated := pod("annotated", "n1", "a", "b")
	annotated.Annotations = map[string]string{agentapi.DefaultContainerAnnotation: "b"}
	objs := map[string][]*corev1.Pod{
		"c1": {pod("web", "n1", "app"), two, annotated, pod("pending", "", "app"), pod("lost", "n9", "app")},
		"c2": {pod("web", "n1", "app")},
	}
	for cluster, pods := range objs {
		cs := apitest.Admin(t, en.api, cluster)
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
		}
	}
	read := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods", "nodes"}}
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"reader": {read},
		"logger": {read, {Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}},
		"wsonly": {read, {Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/exec"}}},
	} {
		cs := apitest.Admin(t, en.api, "c1")
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: name}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// answer is a raw HTTP answer: its code, body and the Status it decodes to (if it is one).
type answer struct {
	code   int
	body   string
	status metav1.Status
}

// do sends a raw request to path (below the server URL) with the token and extra headers.
func (en *env) do(method, path, token string, header http.Header) answer {
	en.t.Helper()
	return en.doBody(method, path, token, header, nil)
}

// doBody is do with a request body.
func (en *env) doBody(method, path, token string, header http.Header, body io.Reader) answer {
	en.t.Helper()
	req, err := http.NewRequestWithContext(en.t.Context(), method, en.srv.URL+path, body)
	if err != nil {
		en.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := en.srv.Client().Do(req)
	if err != nil {
		en.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, body: string(b)}
	_ = json.Unmarshal(b, &a.status)
	return a
}

// waitFor polls cond every 20 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	apitest.Eventually(t, what, cond)
}
