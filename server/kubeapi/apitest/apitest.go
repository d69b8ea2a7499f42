// Package apitest starts a real Kubernetes API for the tests of its in-process clients (controllers, the
// scheduler) and for the perf harness: a store on PostgreSQL (a throwaway database from store/pgtest in
// tests), the resource registry, the built-in RBAC objects enforced by the real authorizer, and two clusters,
// c1 and c2. A test binary using New must call pgtest.Main from its TestMain.
package apitest

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// Clusters are the clusters the API serves.
var Clusters = []string{"c1", "c2"}

type clusters struct{}

func (clusters) Cluster(_ context.Context, id string) (kubeapi.Cluster, error) {
	if slices.Contains(Clusters, id) {
		return kubeapi.Cluster{ID: id, ServiceCIDR: "10.96.0.0/12", PodCIDR: "10.244.0.0/16"}, nil
	}
	return kubeapi.Cluster{}, kubeapi.ErrClusterNotFound
}

type noTokens struct{}

func (noTokens) AuthenticateToken(context.Context, string, string) (kubeapi.User, error) {
	return kubeapi.User{}, kubeapi.ErrUnauthenticated
}

// authz is the server's authorization: system:masters, then RBAC over the API's own cache.
type authz struct{ a *rbac.Authorizer }

func (z *authz) Authorize(ctx context.Context, at kubeapi.Attributes) (bool, string, error) {
	if slices.Contains(at.User.Groups, "system:masters") {
		return true, "", nil
	}
	d, err := z.a.Authorize(ctx, rbac.Request{Cluster: at.Cluster, User: at.User.Name, Groups: at.User.Groups, Verb: at.Verb,
		Namespace: at.Namespace, Group: at.Group, Resource: at.Resource, Subresource: at.Subresource, Name: at.Name})
	return d.Allowed, d.Reason, err
}

// New is a real API on a real store with the built-in RBAC objects in clusters c1 and c2.
func New(t testing.TB) (*kubeapi.API, *resources.Registry) {
	t.Helper()
	return NewWith(t, nil)
}

// NewWith is New with configure applied to the API's Config before it is built (a test's own Authenticator,
// a Connector); configure may be nil.
func NewWith(t testing.TB, configure func(*kubeapi.Config)) (*kubeapi.API, *resources.Registry) {
	t.Helper()
	api, reg, stop, err := start(t.Context(), pgtest.NewDatabase(t), slog.New(slog.DiscardHandler), configure)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return api, reg
}

// NewOn is NewWith on the migrated database at dbURL (a test that also opens other stores on it: tenancy). The
// API still serves only Clusters unless configure replaces Config.Clusters.
func NewOn(t testing.TB, dbURL string, configure func(*kubeapi.Config)) (*kubeapi.API, *resources.Registry) {
	t.Helper()
	api, reg, stop, err := start(t.Context(), dbURL, slog.New(slog.DiscardHandler), configure)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return api, reg
}

// Start is New outside tests (the perf harness): the API on the migrated database at dbURL, with the built-in
// RBAC objects in clusters c1 and c2 and the real authorizer; stop closes the API and the store.
func Start(ctx context.Context, dbURL string, log *slog.Logger) (api *kubeapi.API, reg *resources.Registry, stop func(), err error) {
	return start(ctx, dbURL, log, nil)
}

func start(ctx context.Context, dbURL string, log *slog.Logger, configure func(*kubeapi.Config)) (api *kubeapi.API, reg *resources.Registry, stop func(), err error) {
	st, err := store.Open(ctx, store.Config{URL: dbURL, PollInterval: 50 * time.Millisecond, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	z := &authz{}
	reg = resources.Default()
	cfg := kubeapi.Config{Storage: st, Registry: reg, Clusters: clusters{}, Authenticator: noTokens{},
		Authorizer: z, Logger: log, ClusterObjects: func() []runtime.Object {
			d := rbac.BootstrapDefaults()
			var out []runtime.Object
			for i := range d.ClusterRoles {
				out = append(out, &d.ClusterRoles[i])
			}
			for i := range d.ClusterRoleBindings {
				out = append(out, &d.ClusterRoleBindings[i])
			}
			return out
		}}
	if configure != nil {
		configure(&cfg)
	}
	api, err = kubeapi.New(cfg)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	stop = func() { api.Close(); st.Close() }
	src, err := api.RBACSource()
	if err == nil {
		z.a, err = rbac.New(rbac.Config{Source: src, Pods: src})
	}
	for _, c := range Clusters {
		if err == nil {
			err = api.EnsureCluster(ctx, c)
		}
	}
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return api, reg, stop, nil
}

// Admin is an in-process clientset for a cluster as a system:masters user.
func Admin(t testing.TB, api *kubeapi.API, cluster string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(api.LocalConfig(cluster, kubeapi.User{Name: "test-admin", Groups: []string{"system:masters"}}))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Eventually polls cond every 20 ms for up to 20 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
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
