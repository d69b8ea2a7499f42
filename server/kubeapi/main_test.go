package kubeapi

import (
	"strings"

	"context"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	adminToken  = "admin-token-0123456789"
	viewerToken = "viewer-token-0123456789"
)

// fakeClusters knows clusters c1 and c2.
type fakeClusters struct{}

func (fakeClusters) Cluster(_ context.Context, id string) (Cluster, error) {
	if id == "c1" || id == "c2" {
		return Cluster{ID: id, ServiceCIDR: "10.96.0.0/12"}, nil
	}
	return Cluster{}, ErrClusterNotFound
}

// fakeAuth accepts adminToken (system:masters) and viewerToken (no groups).
type fakeAuth struct{}

func (fakeAuth) AuthenticateToken(_ context.Context, token string) (User, error) {
	switch token {
	case adminToken:
		return User{Name: "admin", Groups: []string{"system:masters"}}, nil
	case viewerToken:
		return User{Name: "viewer"}, nil
	}
	return User{}, ErrUnauthenticated
}

type mastersAuthorizer struct{}

func (mastersAuthorizer) Authorize(_ context.Context, a Attributes) (bool, string, error) {
	return slices.Contains(a.User.Groups, "system:masters"), "", nil
}

// testEnv is a real API on a real store behind a real HTTP server.
type testEnv struct {
	api   *API
	store *store.Store
	url   string
}

func newTestEnv(t *testing.T, mutate ...func(*Config)) *testEnv { return newTestEnvTB(t, mutate...) }

// newTestEnvTB is newTestEnv for tests and benchmarks.
func newTestEnvTB(t testing.TB, mutate ...func(*Config)) *testEnv {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.NewDatabase(t), PollInterval: 50 * time.Millisecond,
		ProgressInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg := Config{Storage: st, Registry: resources.Default(), Clusters: fakeClusters{}, Authenticator: fakeAuth{},
		Authorizer: mastersAuthorizer{}}
	for _, m := range mutate {
		m(&cfg)
	}
	api, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c1", "c2"} {
		if err := api.EnsureCluster(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	e := echo.New()
	api.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &testEnv{api: api, store: st, url: srv.URL}
}

// config is a client-go config for cluster as the admin.
func (env *testEnv) config(cluster, token string) *rest.Config {
	return &rest.Config{Host: env.url + Prefix(cluster), BearerToken: token, QPS: -1}
}

func (env *testEnv) client(t *testing.T, cluster string) kubernetes.Interface {
	return env.clientTB(t, cluster)
}

func (env *testEnv) clientTB(t testing.TB, cluster string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.config(cluster, adminToken))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func kubernetesFor(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

// restConfigFor is a config for a raw REST client (JSON, no group version prefix).
func restConfigFor(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = strings.TrimSuffix(c.Host, c.APIPath)
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.Host = strings.Split(c.Host, "/clusters/")[0]
	return c
}
