package kubeapi

import (
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

func TestRecentWritesKeepTheLatest(t *testing.T) {
	w := newRecentWrites(2)
	k := store.Key{Cluster: "c1", Resource: "configmaps", Namespace: "default", Name: "a"}
	objs := []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "3"}}}
	for i, o := range objs {
		w.put(k, int64(i+1), o)
	}
	if w.get(k, 1) != nil {
		t.Error("the oldest write outlived the ring")
	}
	if w.get(k, 2) != objs[1] || w.get(k, 3) != objs[2] {
		t.Error("the latest writes are not kept")
	}
	if w.get(store.Key{Cluster: "c2", Resource: "configmaps", Namespace: "default", Name: "a"}, 3) != nil {
		t.Error("another cluster's key found a write")
	}
}

// TestCacheTakesWrittenObjects: the watch cache holds, for a write of this process, the object the write
// decoded (not a second decode of the same bytes), and it is what decoding the stored bytes gives.
func TestCacheTakesWrittenObjects(t *testing.T) {
	env := newTestEnv(t)
	created := env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"b"}},"data":{"k":"v"}}`)
	patched := env.rawObject(t, http.MethodPatch, rawCMs+"/cm", "application/merge-patch+json", `{"data":{"k":"w"}}`, http.StatusOK)
	if created["metadata"].(map[string]any)["resourceVersion"] == patched["metadata"].(map[string]any)["resourceVersion"] {
		t.Fatal("the patch wrote nothing")
	}
	rev, err := strconv.ParseInt(patched["metadata"].(map[string]any)["resourceVersion"].(string), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The collection starts now and loads the object at the patch's revision: the object the patch decoded.
	// (A running collection takes it as well when the store's watch brings the write after the writer kept it.)
	env.rawList(t, rawCMs)
	res, _ := env.api.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("configmaps"))
	col := env.api.cache.Peek(cacheKind("c1", res))
	if err := col.WaitFor(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	e, ok, _ := col.Get("default", "cm")
	key := store.Key{Cluster: "c1", Resource: res.Storage, Namespace: "default", Name: "cm"}
	kept := env.api.written.get(key, rev)
	if !ok || kept == nil || e.Object != kept {
		t.Fatalf("the cache's object (%v) is not the one the patch decoded (%v)", ok, kept != nil)
	}
	so, err := env.api.cfg.Storage.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := decodeStored(res, so)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(fresh, e.Object) || e.Object.(*corev1.ConfigMap).Data["k"] != "w" {
		t.Fatalf("the cache's object differs from a decode of the stored bytes:\n%+v\n%+v", e.Object, fresh)
	}
}
