package kubeapi

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"pgregory.net/rapid"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// realRBAC authorizes through rbac.Authorizer on the API's own watch cache (system:masters passes), as the
// server does; a bound after the API exists.
type realRBAC struct{ a *rbac.Authorizer }

func (r *realRBAC) Authorize(ctx context.Context, at Attributes) (bool, string, error) {
	if slices.Contains(at.User.Groups, "system:masters") {
		return true, "", nil
	}
	d, err := r.a.Authorize(ctx, rbac.Request{Cluster: at.Cluster, User: at.User.Name, Groups: at.User.Groups, Verb: at.Verb,
		Namespace: at.Namespace, Group: at.Group, Resource: at.Resource, Subresource: at.Subresource, Name: at.Name, Path: at.Path,
		MinRevision: at.MinRevision()})
	return d.Allowed, d.Reason, err
}

func rbacDefaults() []runtime.Object {
	d := rbac.BootstrapDefaults()
	var out []runtime.Object
	for i := range d.ClusterRoles {
		out = append(out, &d.ClusterRoles[i])
	}
	for i := range d.ClusterRoleBindings {
		out = append(out, &d.ClusterRoleBindings[i])
	}
	return out
}

// newRBACEnv is a test API (on dbURL, or a fresh database) whose authorizer is the real RBAC one.
func newRBACEnv(t testing.TB, dbURL string) (*testEnv, *realRBAC) {
	t.Helper()
	authz := &realRBAC{}
	env := newTestEnvStore(t, store.Config{URL: dbURL, PollInterval: 50 * time.Millisecond, ProgressInterval: 100 * time.Millisecond},
		func(c *Config) { c.Authorizer, c.ClusterObjects = authz, rbacDefaults })
	src, err := env.api.RBACSource()
	if err != nil {
		t.Fatal(err)
	}
	if authz.a, err = rbac.New(rbac.Config{Source: src}); err != nil {
		t.Fatal(err)
	}
	return env, authz
}

var readPods = rbac.Request{Cluster: "c1", User: "carl", Verb: "get", Namespace: "default", Resource: "pods"}

func allowedNow(t testing.TB, a *realRBAC, req rbac.Request) bool {
	t.Helper()
	d, err := a.a.Authorize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d.Allowed
}

func bindViewer(t testing.TB, env *testEnv, name, user string) {
	t.Helper()
	_, err := env.clientTB(t, "c1").RbacV1().RoleBindings("default").Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRBACChangeReachesSecondProcess: a binding written through one server process applies in the same process
// as soon as the write returns, and in another process (its own store, watch hub and cache on the same
// database) once its hub has read the change; a deleted binding likewise stops applying.
func TestRBACChangeReachesSecondProcess(t *testing.T) {
	a, authzA := newRBACEnv(t, "")
	_, authzB := newRBACEnv(t, a.dbURL)
	if allowedNow(t, authzA, readPods) || allowedNow(t, authzB, readPods) {
		t.Fatal("allowed before any binding")
	}
	bindViewer(t, a, "carl-view", "carl")
	if !allowedNow(t, authzA, readPods) {
		t.Fatal("the writing process did not apply its own binding before answering the write")
	}
	// A request authenticated after the write carries a revision at least as new (the server reads it with the
	// token): the other process applies the binding to that very request, without polling.
	fresh := readPods
	fresh.MinRevision = a.storeRev(t)
	if !allowedNow(t, authzB, fresh) {
		t.Fatal("the other process did not apply a binding committed before the request")
	}
	pollUntil(t, func() bool { return allowedNow(t, authzB, readPods) })
	if err := a.clientTB(t, "c1").RbacV1().RoleBindings("default").Delete(context.Background(), "carl-view", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if allowedNow(t, authzA, readPods) {
		t.Fatal("the writing process still applies a binding it deleted")
	}
	fresh.MinRevision = a.storeRev(t)
	if allowedNow(t, authzB, fresh) {
		t.Fatal("the other process still applied a binding deleted before the request")
	}
}

// BenchmarkRBACPropagation is the time from a binding's write in one process to its enforcement in another.
func BenchmarkRBACPropagation(b *testing.B) {
	a, _ := newRBACEnv(b, "")
	_, authzB := newRBACEnv(b, a.dbURL)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		user := "user-" + itoa(i)
		req := readPods
		req.User = user
		t0 := time.Now()
		bindViewer(b, a, "bind-"+itoa(i), user)
		for !allowedNow(b, authzB, req) {
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms")
}

func itoa(i int) string { return revString(int64(i)) }

// TestCanIMatchesEnforcement: for random Roles, ClusterRoles and bindings written through the API, the answer of
// a SelfSubjectAccessReview (what `kubectl auth can-i` asks) is what the server then enforces on the request
// itself, made as that user through impersonation.
func TestCanIMatchesEnforcement(t *testing.T) {
	env, _ := newRBACEnv(t, "")
	admin := env.client(t, "c1")
	ctx := t.Context()
	for _, ns := range []string{"a", "b"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	verbs := []string{"get", "list", "create", "delete"}
	resources := []string{"configmaps", "secrets", "services"}
	var next int // rapid replays cases while shrinking: every case gets fresh names
	rapid.Check(t, func(rt *rapid.T) {
		next++
		i := next
		user := fmt.Sprint("u", i)
		rule := rbacv1.PolicyRule{APIGroups: []string{""},
			Verbs:     rapid.SliceOfNDistinct(rapid.SampledFrom(verbs), 1, 3, rapid.ID[string]).Draw(rt, "verbs"),
			Resources: rapid.SliceOfNDistinct(rapid.SampledFrom(resources), 1, 2, rapid.ID[string]).Draw(rt, "resources")}
		if rapid.Bool().Draw(rt, "named") {
			rule.ResourceNames = []string{"x"}
		}
		name := fmt.Sprint("r", i)
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		var err error
		switch rapid.IntRange(0, 2).Draw(rt, "binding") {
		case 0: // Role + RoleBinding in a
			if _, err = admin.RbacV1().Roles("a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err == nil {
				_, err = admin.RbacV1().RoleBindings("a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{})
			}
		case 1: // ClusterRole + RoleBinding in b
			if _, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err == nil {
				_, err = admin.RbacV1().RoleBindings("b").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{})
			}
		default: // ClusterRole + ClusterRoleBinding
			if _, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err == nil {
				_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{})
			}
		}
		if err != nil {
			rt.Fatal(err)
		}
		cfg := env.config("c1", adminToken)
		cfg.Impersonate.UserName = user
		as, err := kubernetesFor(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		verb := rapid.SampledFrom(verbs).Draw(rt, "verb")
		res := rapid.SampledFrom(resources).Draw(rt, "resource")
		ns := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "namespace")
		objName := ""
		if verb == "get" || verb == "delete" {
			objName = rapid.SampledFrom([]string{"x", "y"}).Draw(rt, "name")
		}
		review, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Resource: res, Name: objName}}}, metav1.CreateOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		err = doAs(ctx, as, verb, res, ns, objName)
		enforced := !apierrors.IsForbidden(err)
		if review.Status.Allowed != enforced {
			rt.Fatalf("can-i %s %s %q in %s: %v; the request itself: %v (rule %+v)", verb, res, objName, ns, review.Status.Allowed, err, rule)
		}
	})
}

// doAs makes the request an access review asked about; any answer but Forbidden means it was allowed.
func doAs(ctx context.Context, c kubernetes.Interface, verb, resource, ns, name string) error {
	r := c.CoreV1().RESTClient()
	switch verb {
	case "get":
		return r.Get().Namespace(ns).Resource(resource).Name(name).Do(ctx).Error()
	case "list":
		return r.Get().Namespace(ns).Resource(resource).Do(ctx).Error()
	case "delete":
		return r.Delete().Namespace(ns).Resource(resource).Name(name).Do(ctx).Error()
	}
	body := map[string]string{"configmaps": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"g-"}}`,
		"secrets":  `{"apiVersion":"v1","kind":"Secret","metadata":{"generateName":"g-"}}`,
		"services": `{"apiVersion":"v1","kind":"Service","metadata":{"generateName":"g-"},"spec":{"ports":[{"port":80}]}}`}[resource]
	return r.Post().Namespace(ns).Resource(resource).SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
}
