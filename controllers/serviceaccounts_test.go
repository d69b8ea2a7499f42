package controllers

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type clusters struct{}

func (clusters) Cluster(_ context.Context, id string) (kubeapi.Cluster, error) {
	if id == "c1" || id == "c2" {
		return kubeapi.Cluster{ID: id, ServiceCIDR: "10.96.0.0/12"}, nil
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

// newDeps is a real API on a real store with the built-in RBAC objects in clusters c1 and c2.
func newDeps(t *testing.T) Deps {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.NewDatabase(t), PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	z := &authz{}
	reg := resources.Default()
	api, err := kubeapi.New(kubeapi.Config{Storage: st, Registry: reg, Clusters: clusters{}, Authenticator: noTokens{},
		Authorizer: z, Logger: slog.New(slog.DiscardHandler), ClusterObjects: func() []runtime.Object {
			d := rbac.BootstrapDefaults()
			var out []runtime.Object
			for i := range d.ClusterRoles {
				out = append(out, &d.ClusterRoles[i])
			}
			for i := range d.ClusterRoleBindings {
				out = append(out, &d.ClusterRoleBindings[i])
			}
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	src, err := api.RBACSource()
	if err != nil {
		t.Fatal(err)
	}
	if z.a, err = rbac.New(rbac.Config{Source: src, Pods: src}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c1", "c2"} {
		if err := api.EnsureCluster(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	return Deps{API: api, Registry: reg, Logger: slog.New(slog.DiscardHandler)}
}

func admin(t *testing.T, d Deps, cluster string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(d.API.LocalConfig(cluster, kubeapi.User{Name: "test-admin", Groups: []string{"system:masters"}}))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// eventually polls cond every 20 ms for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
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

func TestDefaultServiceAccountInEveryNamespace(t *testing.T) {
	d := newDeps(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	hasDefault := func(cs kubernetes.Interface, ns string) func() bool {
		return func() bool {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{})
			return err == nil
		}
	}
	c1, c2 := admin(t, d, "c1"), admin(t, d, "c2")
	// The system namespaces of both clusters, then namespaces created later.
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		eventually(t, "default SA in c1/"+ns, hasDefault(c1, ns))
		eventually(t, "default SA in c2/"+ns, hasDefault(c2, ns))
	}
	if _, err := c2.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "default SA in a new namespace", hasDefault(c2, "apps"))
	if _, err := c1.CoreV1().ServiceAccounts("apps").Get(t.Context(), "default", metav1.GetOptions{}); err == nil {
		t.Fatal("a namespace of c2 made a service account in c1")
	}
	// A deleted default account comes back. (The controller writes as system:serviceaccount:kube-system:
	// service-account-controller, which only the built-in RBAC binding allows: the test's RBAC is the real one.)
	if err := c2.CoreV1().ServiceAccounts("apps").Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the default SA recreated", hasDefault(c2, "apps"))
}
