package rbac

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type fakePods map[string][]*corev1.Pod // by node

func (f fakePods) PodsOnNode(_ context.Context, _, node string, _ bool) ([]*corev1.Pod, error) {
	return f[node], nil
}

func TestNodeAuthorizer(t *testing.T) {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: corev1.PodSpec{
		NodeName: "n1", ServiceAccountName: "web-sa", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-pw"}, Key: "pw"}}}}}}}}
	src := newMemSource()
	src.change("c1", func(*Objects) {})
	a, err := New(Config{Source: src, Pods: fakePods{"n1": {web}}})
	if err != nil {
		t.Fatal(err)
	}
	n1 := func(r Request) Request {
		r.Cluster, r.User, r.Groups = "c1", "system:node:n1", []string{NodesGroup, "system:authenticated"}
		return r
	}
	for _, tc := range []struct {
		name string
		req  Request
		want bool
	}{
		{"read nodes", Request{Verb: "list", Resource: "nodes"}, true},
		{"watch pods", Request{Verb: "watch", Resource: "pods"}, true},
		{"read endpoint slices", Request{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
		{"update own node status", Request{Verb: "patch", Resource: "nodes", Subresource: "status", Name: "n1"}, true},
		{"register", Request{Verb: "create", Resource: "nodes"}, true},
		{"update another node", Request{Verb: "update", Resource: "nodes", Name: "n2"}, false},
		{"delete own node", Request{Verb: "delete", Resource: "nodes", Name: "n1"}, false},
		{"renew own lease", Request{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "n1"}, true},
		{"another node's lease", Request{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "n2"}, false},
		{"status of its pod", Request{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: "app", Name: "web"}, true},
		{"read its pod's status", Request{Verb: "get", Resource: "pods", Subresource: "status", Namespace: "app", Name: "web"}, true},
		{"delete its pod", Request{Verb: "delete", Resource: "pods", Namespace: "app", Name: "web"}, true},
		{"status of another pod", Request{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: "app", Name: "other"}, false},
		{"create pods", Request{Verb: "create", Resource: "pods", Namespace: "app"}, false},
		{"its pod's secret (env)", Request{Verb: "get", Resource: "secrets", Namespace: "app", Name: "db-pw"}, true},
		{"its pod's pull secret", Request{Verb: "get", Resource: "secrets", Namespace: "app", Name: "pull"}, true},
		{"its pod's configmap", Request{Verb: "get", Resource: "configmaps", Namespace: "app", Name: "web-config"}, true},
		{"another secret", Request{Verb: "get", Resource: "secrets", Namespace: "app", Name: "admin-creds"}, false},
		{"same name elsewhere", Request{Verb: "get", Resource: "secrets", Namespace: "other", Name: "db-pw"}, false},
		{"list secrets", Request{Verb: "list", Resource: "secrets", Namespace: "app"}, false},
		{"token of its pod's account", Request{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "app", Name: "web-sa"}, true},
		{"token of another account", Request{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "app", Name: "admin"}, false},
		{"events", Request{Verb: "create", Resource: "events", Namespace: "app"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := decide(t, a, n1(tc.req)); d.Allowed != tc.want {
				t.Fatalf("Allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
		})
	}
	// Another node sees nothing of n1's pod.
	n2 := Request{Cluster: "c1", User: "system:node:n2", Groups: []string{NodesGroup}, Verb: "get", Resource: "secrets", Namespace: "app", Name: "db-pw"}
	if decide(t, a, n2).Allowed {
		t.Fatal("node n2 read a secret of a pod on n1")
	}
	// A user merely named like a node, without the group, is not a node.
	fake := n1(Request{Verb: "get", Resource: "secrets", Namespace: "app", Name: "db-pw"})
	fake.Groups = nil
	if decide(t, a, fake).Allowed {
		t.Fatal("a user named system:node:n1 without the nodes group was treated as a node")
	}
}

// stalePods is a watch cache behind the store: fresh reads (which cost a query) also show the pods bound lately.
type stalePods struct {
	cached, bound map[string][]*corev1.Pod
	freshReads    int
}

func (s *stalePods) PodsOnNode(_ context.Context, _, node string, fresh bool) ([]*corev1.Pod, error) {
	if !fresh {
		return s.cached[node], nil
	}
	s.freshReads++
	return append(append([]*corev1.Pod{}, s.cached[node]...), s.bound[node]...), nil
}

// TestNodeAuthorizerReadsFreshOnlyOnMiss: a pod the cache shows is decided without catching up with the store;
// a pod bound a moment ago, not in the cache yet, is found by a fresh read.
func TestNodeAuthorizerReadsFreshOnlyOnMiss(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	pods := &stalePods{cached: map[string][]*corev1.Pod{"n1": {pod("old")}}, bound: map[string][]*corev1.Pod{"n1": {pod("new")}}}
	src := newMemSource()
	src.change("c1", func(*Objects) {})
	a, err := New(Config{Source: src, Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	status := func(name string) Request {
		return Request{Cluster: "c1", User: "system:node:n1", Groups: []string{NodesGroup}, Verb: "patch", Resource: "pods",
			Subresource: "status", Namespace: "app", Name: name}
	}
	if d := decide(t, a, status("old")); !d.Allowed || pods.freshReads != 0 {
		t.Fatalf("a cached pod: allowed %v after %d fresh reads, want allowed after none", d.Allowed, pods.freshReads)
	}
	if d := decide(t, a, status("new")); !d.Allowed || pods.freshReads != 1 {
		t.Fatalf("a pod bound a moment ago: allowed %v after %d fresh reads, want allowed after one", d.Allowed, pods.freshReads)
	}
	if d := decide(t, a, status("elsewhere")); d.Allowed {
		t.Fatal("a pod on no list was allowed")
	}
}

func TestNodeRestriction(t *testing.T) {
	groups := []string{NodesGroup}
	node := func(name string, taints []corev1.Taint, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name}}
	}
	taint := []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name     string
		user     string
		op       string
		obj, old runtime.Object
		forbid   bool
	}{
		{"register itself with taints", "system:node:n1", "CREATE", node("n1", taint, nil), nil, false},
		{"register another", "system:node:n1", "CREATE", node("n2", nil, nil), nil, true},
		{"status change", "system:node:n1", "UPDATE", node("n1", taint, map[string]string{"a": "b"}), node("n1", taint, nil), false},
		{"remove its taints", "system:node:n1", "UPDATE", node("n1", nil, nil), node("n1", taint, nil), true},
		{"add a taint", "system:node:n1", "UPDATE", node("n1", taint, nil), node("n1", nil, nil), true},
		{"restricted label", "system:node:n1", "UPDATE", node("n1", nil, map[string]string{"node-restriction.kubernetes.io/db": "yes"}), node("n1", nil, nil), true},
		{"an admin changes taints", "admin@localhost", "UPDATE", node("n1", nil, nil), node("n1", taint, nil), false},
		{"its lease", "system:node:n1", "CREATE", lease("n1"), nil, false},
		{"another lease", "system:node:n1", "CREATE", lease("n2"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := groups
			if tc.user == "admin@localhost" {
				g = nil
			}
			err := CheckNodeRestriction(tc.user, g, tc.op, tc.obj, tc.old)
			if tc.forbid != apierrors.IsForbidden(err) || (!tc.forbid && err != nil) {
				t.Fatalf("err = %v, want forbidden %v", err, tc.forbid)
			}
		})
	}
}
