package kubeapi

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestConfigMapCRUD(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "x"}},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("server-owned metadata not set: %+v", created.ObjectMeta)
	}
	if len(created.ManagedFields) == 0 {
		t.Errorf("managedFields not recorded on create")
	}
	got, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := cms.Create(ctx, created, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}

	got.Data["k"] = "w"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || updated.Data["k"] != "w" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update = %+v, %v", updated, err)
	}
	got.Data["k"] = "stale"
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	// Without a resourceVersion an update is unconditional (upstream's AllowUnconditionalUpdate): it applies over
	// whatever is stored (the conformance suite's Watchers and ResourceQuota tests update this way).
	blind := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"app": "x"}},
		Data: map[string]string{"k": "blind"}}
	unconditional, err := cms.Update(ctx, blind, metav1.UpdateOptions{})
	if err != nil || unconditional.Data["k"] != "blind" || unconditional.ResourceVersion == updated.ResourceVersion {
		t.Fatalf("update without resourceVersion = %+v, %v", unconditional, err)
	}
	if unconditional.UID != created.UID {
		t.Errorf("update without resourceVersion: uid %s, want %s", unconditional.UID, created.UID)
	}

	patched, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"m":"1"}}`), metav1.PatchOptions{})
	if err != nil || patched.Data["m"] != "1" || patched.Data["k"] != "blind" {
		t.Fatalf("merge patch = %+v, %v", patched, err)
	}
	patched, err = cms.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/m"}]`), metav1.PatchOptions{})
	if err != nil || len(patched.Data) != 1 {
		t.Fatalf("json patch = %+v, %v", patched, err)
	}
	patched, err = cms.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"b":"2"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["b"] != "2" || patched.Labels["app"] != "x" {
		t.Fatalf("strategic patch = %+v, %v", patched, err)
	}

	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil || len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=y"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("list other selector = %+v, %v", list, err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

func TestClustersAreIsolated(t *testing.T) {
	env := newTestEnv(t)
	ctx := t.Context()
	c1, c2 := env.client(t, "c1"), env.client(t, "c2")
	if _, err := c1.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-c1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.CoreV1().ConfigMaps("default").Get(ctx, "only-c1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("c2 sees c1's object: %v", err)
	}
	if l, err := c2.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("c2 list = %v, %v", l, err)
	}
}

func TestCreateValidation(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}},
		metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("bad name: %v, want Invalid", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "metadata.name" {
		t.Errorf("causes = %+v, want metadata.name", st.Details)
	}
	_, err = cs.CoreV1().ConfigMaps("nope").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("create in missing namespace: %v, want NotFound", err)
	}
	if l, _ := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("failed creates wrote %d objects", len(l.Items))
	}
}

func TestAuthentication(t *testing.T) {
	env := newTestEnv(t)
	ctx := t.Context()
	for name, tc := range map[string]struct {
		token string
		check func(error) bool
	}{
		"no token":    {"", apierrors.IsUnauthorized},
		"wrong token": {"wrong-token-0123456789", apierrors.IsUnauthorized},
		"no rights":   {viewerToken, apierrors.IsForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			cs, err := kubernetesFor(env.config("c1", tc.token))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if !tc.check(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
	cs := env.client(t, "unknown")
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unknown cluster: %v, want NotFound", err)
	}
}

// TestConcurrentUnconditionalPatchesAllApply: patches without a resourceVersion never fail with a conflict
// because another writer got there first; each is applied (as upstream's GuaranteedUpdate retries).
func TestConcurrentUnconditionalPatchesAllApply(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"w%d-%d":"x"}}}`, w, i)
				if _, err := cs.CoreV1().ConfigMaps("default").Patch(ctx, "hot", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("patch: %v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hot", metav1.GetOptions{})
	if err != nil || len(cm.Annotations) != writers*each {
		t.Fatalf("%d annotations, want %d (%v)", len(cm.Annotations), writers*each, err)
	}
}
