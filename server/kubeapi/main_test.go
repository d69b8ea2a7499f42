package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
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

func (fakeAuth) AuthenticateToken(_ context.Context, _, token string) (User, error) {
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
	api      *API
	store    *store.Store
	dbURL    string // the database, for a second "process" (another store and API on it)
	url      string
	srv      *httptest.Server
	mu       sync.Mutex   // guards watchRVs
	watchRVs []string     // resourceVersion of every watch request, in arrival order
	reads    atomic.Int64 // full reads: gets, lists and WatchList watches (sendInitialEvents)
}

func newTestEnv(t *testing.T, mutate ...func(*Config)) *testEnv { return newTestEnvTB(t, mutate...) }

// newTestEnvTB is newTestEnv for tests and benchmarks.
func newTestEnvTB(t testing.TB, mutate ...func(*Config)) *testEnv {
	return newTestEnvStore(t, store.Config{PollInterval: 50 * time.Millisecond, ProgressInterval: 100 * time.Millisecond}, mutate...)
}

// newTestEnvStore is newTestEnv with a chosen store configuration (without a URL: a fresh database).
func newTestEnvStore(t testing.TB, scfg store.Config, mutate ...func(*Config)) *testEnv {
	t.Helper()
	if scfg.URL == "" {
		scfg.URL = pgtest.NewDatabase(t)
	}
	st, err := store.Open(t.Context(), scfg)
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
	t.Cleanup(api.Close)
	for _, c := range []string{"c1", "c2"} {
		if err := api.EnsureCluster(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	e := echo.New()
	api.Register(e)
	env := &testEnv{api: api, store: st, dbURL: scfg.URL}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); r.Method == http.MethodGet && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
			env.reads.Add(1)
		}
		if q := r.URL.Query(); q.Get("watch") != "" {
			env.mu.Lock()
			env.watchRVs = append(env.watchRVs, q.Get("resourceVersion"))
			env.mu.Unlock()
		}
		e.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env.url, env.srv = srv.URL, srv
	return env
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

// readPaths runs f twice: with the watch cache (the default) and with every read sent to the store, so both
// paths keep the same behaviour.
func readPaths(t *testing.T, f func(t *testing.T, path func(*Config))) {
	t.Run("cache", func(t *testing.T) { f(t, func(*Config) {}) })
	t.Run("store", func(t *testing.T) { f(t, func(c *Config) { c.DisableWatchCache = true }) })
}
