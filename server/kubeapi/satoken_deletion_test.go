package kubeapi

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// testClock is a settable clock shared by the API and its token issuer.
type testClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clusterKeys gives every cluster the same fresh signing key.
type clusterKeys struct{ k *ecdsa.PrivateKey }

func (k clusterKeys) SigningKey(context.Context, string) (crypto.Signer, error) { return k.k, nil }

// allowAuthenticated lets every authenticated user do anything: these tests tell 401 from 200.
type allowAuthenticated struct{}

func (allowAuthenticated) Authorize(context.Context, Attributes) (bool, string, error) {
	return true, "", nil
}

// TestBoundTokenEndsWhileTerminating is the regression test of issue 34 item 8: a token bound to a pod (or a
// secret, or issued to a service account) kept authenticating while its object was terminating, held by a
// finalizer for as long as anyone liked. As upstream, a deletionTimestamp more than a minute ago ends it.
func TestBoundTokenEndsWhileTerminating(t *testing.T) {
	clock := &testClock{now: time.Now().Truncate(time.Second)}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, func(c *Config) {
		c.Now = clock.Now
		c.ServiceAccountTokens = satoken.New(clusterKeys{key}, clock.Now)
		c.Authorizer = allowAuthenticated{}
	})
	admin := env.client(t, "c1")
	ctx := t.Context()
	keep := []string{"example.com/keep"}
	grace := int64(30)
	mustCreate(t, func() error {
		_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
		return err
	})
	cases := []struct {
		name string
		// setup creates the object and returns what to bind the token to ("" for no binding) and its deletion.
		setup   func(t *testing.T, name string) (kind string, del func() error)
		holdFor time.Duration // how long past the delete the token still works (deletionTimestamp + leeway)
	}{
		{"pod terminating gracefully on a node", func(t *testing.T, name string) (string, func() error) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: keep}, Spec: corev1.PodSpec{
				NodeName: "n1", TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			mustCreate(t, func() error {
				_, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
				return err
			})
			return "Pod", func() error { return admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}) }
		}, 30*time.Second + satoken.DeletionLeeway},
		{"unscheduled pod held by a finalizer", func(t *testing.T, name string) (string, func() error) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: keep}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			mustCreate(t, func() error {
				_, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
				return err
			})
			return "Pod", func() error { return admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}) }
		}, satoken.DeletionLeeway},
		{"secret held by a finalizer", func(t *testing.T, name string) (string, func() error) {
			mustCreate(t, func() error {
				_, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: keep}}, metav1.CreateOptions{})
				return err
			})
			return "Secret", func() error { return admin.CoreV1().Secrets("default").Delete(ctx, name, metav1.DeleteOptions{}) }
		}, satoken.DeletionLeeway},
		{"service account held by a finalizer", func(t *testing.T, name string) (string, func() error) {
			mustCreate(t, func() error {
				_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{
					ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: keep}}, metav1.CreateOptions{})
				return err
			})
			return "", func() error {
				return admin.CoreV1().ServiceAccounts("default").Delete(ctx, name, metav1.DeleteOptions{})
			}
		}, satoken.DeletionLeeway},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "held-" + string(rune('a'+i))
			kind, del := tc.setup(t, name)
			account, tr := "robot", &authenticationv1.TokenRequest{}
			if kind == "" {
				account = name
			} else {
				tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: kind, APIVersion: "v1", Name: name}
			}
			out, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, account, tr, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(env.config("c1", out.Status.Token))
			if err != nil {
				t.Fatal(err)
			}
			use := func() error {
				_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
				return err
			}
			if err := use(); err != nil {
				t.Fatalf("the fresh token: %v", err)
			}
			if err := del(); err != nil {
				t.Fatal(err)
			}
			// Upstream's window: the grace period and a minute of leeway for replicas' clocks.
			clock.Add(tc.holdFor - time.Second)
			if err := use(); err != nil {
				t.Fatalf("within the grace period and leeway: %v", err)
			}
			clock.Add(2 * time.Second)
			if err := use(); !apierrors.IsUnauthorized(err) {
				t.Fatalf("past the deletionTimestamp and leeway the object is still terminating, its token: %v, want 401", err)
			}
		})
	}
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}
