package kubeapi

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// TestLocalClient: client-go's typed clients work in process through LocalConfig — protobuf bodies, errors as
// statuses, streaming watches — as the configured user, through authorization like any other client.
func TestLocalClient(t *testing.T) {
	env := newTestEnv(t)
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(env.api.LocalConfig("c1", User{Name: "system:kube-controller-manager",
		Groups: []string{"system:masters"}}))
	if err != nil {
		t.Fatal(err)
	}
	w, err := admin.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "local" {
			t.Fatalf("watch event %v %T", ev.Type, ev.Object)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event through the local transport")
	}
	if _, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get of a missing object: %v, want NotFound", err)
	}
	// The identity is the configured user, authorized as such.
	nobody, err := kubernetes.NewForConfig(env.api.LocalConfig("c1", User{Name: "nobody"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("an unprivileged local user: %v, want Forbidden", err)
	}
	// Another cluster's objects stay there.
	other, _ := kubernetes.NewForConfig(env.api.LocalConfig("c2", User{Name: "x", Groups: []string{"system:masters"}}))
	if _, err := other.CoreV1().ConfigMaps("default").Get(ctx, "local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("c1's object read through c2: %v", err)
	}
}
