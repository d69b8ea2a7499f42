package kubeapi

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// revocable authenticates tokens it was given and forgets them when revoked; users in allowed may read, and
// impersonate whoever is in impersonable.
type revocable struct {
	mu           sync.Mutex // guards the maps
	users        map[string]User
	allowed      map[string]bool
	impersonable map[string]bool
}

func (r *revocable) AuthenticateToken(_ context.Context, _, token string) (User, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.users[token]
	if !ok {
		return User{}, ErrUnauthenticated
	}
	return u, nil
}

func (r *revocable) Authorize(_ context.Context, a Attributes) (bool, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.Verb == "impersonate" {
		return r.impersonable[a.User.Name+">"+a.Name], "", nil
	}
	return r.allowed[a.User.Name] || slices.Contains(a.User.Groups, "system:masters"), "", nil
}

func (r *revocable) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func watchConfigMaps(t *testing.T, env *testEnv, token, impersonate string) watch.Interface {
	t.Helper()
	cfg := &rest.Config{Host: env.url + Prefix("c1"), BearerToken: token, QPS: -1}
	if impersonate != "" {
		cfg.Impersonate.UserName = impersonate
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	timeout := int64(100000)
	w, err := cs.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// open proves w delivers events: a ConfigMap created now reaches it.
func open(t *testing.T, env *testEnv, w watch.Interface, name string) {
	t.Helper()
	if _, err := env.client(t, "c1").CoreV1().ConfigMaps("default").Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s arrived", name)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == name {
				return
			}
		case <-deadline:
			t.Fatalf("%s did not arrive", name)
		}
	}
}

func ended(t *testing.T, w watch.Interface) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the watch did not end")
		}
	}
}

// A re-check ends exactly the long-running requests whose credential or grants no longer hold: a revoked
// token's, a caller who lost the right to read (or to impersonate), every request of a deleted cluster; it
// leaves the others, and requests it was not asked about.
func TestRecheckLongRunning(t *testing.T) {
	auth := &revocable{
		users: map[string]User{"t-ann": {Name: "ann", UID: "u-ann"}, "t-bob": {Name: "bob", UID: "u-bob"},
			"t-cat": {Name: "cat", UID: "u-cat"}, "t-dan": {Name: "dan", UID: "u-dan"},
			adminToken: {Name: "admin", Groups: []string{"system:masters"}}},
		allowed:      map[string]bool{"ann": true, "bob": true, "cat": true, "eve": true},
		impersonable: map[string]bool{"dan>eve": true},
	}
	env := newTestEnv(t, func(c *Config) { c.Authenticator, c.Authorizer = auth, auth })
	everyone := func(string, User) bool { return true }

	ann, bob := watchConfigMaps(t, env, "t-ann", ""), watchConfigMaps(t, env, "t-bob", "")
	cat, dan := watchConfigMaps(t, env, "t-cat", ""), watchConfigMaps(t, env, "t-dan", "eve")
	for i, w := range []watch.Interface{ann, bob, cat, dan} {
		open(t, env, w, "before-"+string(rune('a'+i)))
	}
	if n := env.api.RecheckLongRunning(t.Context(), everyone); n != 0 {
		t.Fatalf("a re-check with nothing revoked ended %d requests", n)
	}

	auth.set(func() { delete(auth.users, "t-ann") })          // ann's token revoked
	auth.set(func() { delete(auth.allowed, "bob") })          // bob may not read any more
	auth.set(func() { delete(auth.impersonable, "dan>eve") }) // dan may not impersonate eve any more
	// Asked about ann only: bob's and dan's requests are not checked yet.
	if n := env.api.RecheckLongRunning(t.Context(), func(_ string, u User) bool { return u.UID == "u-ann" }); n != 1 {
		t.Fatalf("re-checking ann ended %d requests, want 1", n)
	}
	ended(t, ann)
	open(t, env, bob, "still-bob")
	if n := env.api.RecheckLongRunning(t.Context(), everyone); n != 2 {
		t.Fatalf("re-checking everyone ended %d requests, want 2 (bob's and dan's)", n)
	}
	ended(t, bob)
	ended(t, dan)
	open(t, env, cat, "still-cat")

	env.api.EndCluster("c2")
	open(t, env, cat, "after-c2")
	env.api.EndCluster("c1")
	ended(t, cat)
}

// Every watch ends within upstream's 30-60 minutes; timeoutSeconds can shorten that, never lengthen it.
func TestWatchTimeoutIsCapped(t *testing.T) {
	for range 100 {
		if d := watchTimeout(); d < minWatchTimeout || d >= 2*minWatchTimeout {
			t.Fatalf("watchTimeout() = %v, want within [%v, %v)", d, minWatchTimeout, 2*minWatchTimeout)
		}
	}
	env := newTestEnv(t)
	for _, c := range []struct {
		q        string
		min, max time.Duration
	}{
		{"", minWatchTimeout, 2 * minWatchTimeout},
		{"timeoutSeconds=100000", minWatchTimeout, 2 * minWatchTimeout},
		{"timeoutSeconds=30", 30 * time.Second, 30 * time.Second},
	} {
		r, err := http.NewRequest(http.MethodGet, env.url+"/clusters/c1/api/v1/configmaps?watch=1&"+c.q, nil)
		if err != nil {
			t.Fatal(err)
		}
		rq := &request{api: env.api, r: r, ctx: t.Context(), cluster: Cluster{ID: "c1"}}
		p, err := rq.watchParams()
		if err != nil {
			t.Fatal(err)
		}
		if p.timeout < c.min || p.timeout > c.max {
			t.Errorf("%q: timeout %v, want within [%v, %v]", c.q, p.timeout, c.min, c.max)
		}
	}
}
