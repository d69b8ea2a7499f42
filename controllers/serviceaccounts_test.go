package controllers

import (
	"context"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDeps is a real API on a real store with the built-in RBAC objects in clusters c1 and c2.
func newDeps(t *testing.T) Deps {
	t.Helper()
	api, reg := apitest.New(t)
	return Deps{API: api, Registry: reg, Logger: slog.New(slog.DiscardHandler)}
}

func admin(t *testing.T, d Deps, cluster string) kubernetes.Interface {
	t.Helper()
	return apitest.Admin(t, d.API, cluster)
}

// eventually polls cond every 20 ms for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	apitest.Eventually(t, what, cond)
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

func TestRootCAInEveryNamespace(t *testing.T) {
	d := newDeps(t)
	d.RootCA = []byte("-----BEGIN CERTIFICATE-----\nserver\n-----END CERTIFICATE-----\n")
	own := func(cluster string) string {
		return "-----BEGIN CERTIFICATE-----\n" + cluster + "\n-----END CERTIFICATE-----\n"
	}
	d.ClusterCA = func(_ context.Context, cluster string) ([]byte, error) { return []byte(own(cluster)), nil }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	defer func() { cancel(); <-done }()
	c1 := admin(t, d, "c1")
	// Each cluster's own CA first, then the server's.
	bundleIn := func(cs kubernetes.Interface, cluster, ns string) func() bool {
		return func() bool {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil && cm.Data["ca.crt"] == own(cluster)+string(d.RootCA)
		}
	}
	published := func(ns string) func() bool { return bundleIn(c1, "c1", ns) }
	for _, ns := range []string{"default", "kube-system"} {
		eventually(t, "kube-root-ca.crt in "+ns, published(ns))
	}
	eventually(t, "cluster c2's own kube-root-ca.crt", bundleIn(admin(t, d, "c2"), "c2", "default"))
	if _, err := c1.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kube-root-ca.crt in a new namespace", published("apps"))
	// Changed or deleted, it is put back.
	cm, err := c1.CoreV1().ConfigMaps("apps").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "tampered"
	if _, err := c1.CoreV1().ConfigMaps("apps").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tampered ConfigMap restored", published("apps"))
	if err := c1.CoreV1().ConfigMaps("apps").Delete(t.Context(), "kube-root-ca.crt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted ConfigMap recreated", published("apps"))
}
