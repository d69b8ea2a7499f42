package kubeapi

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

func TestRecentWritesHandOverOnce(t *testing.T) {
	w := newRecentWrites(2)
	k := store.Key{Cluster: "c1", Resource: "configmaps", Namespace: "default", Name: "a"}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	first := w.put(k, []byte("one"), cm("1"))
	// A collection gets it only for exactly those bytes, and gives it that revision for good.
	if w.take(k, 5, []byte("two"), cmGVK) != nil {
		t.Error("other bytes found the kept object")
	}
	// Nor for another kind stored alike (core/v1 and events.k8s.io/v1 Events share a storage).
	if w.take(k, 5, []byte("one"), corev1.SchemeGroupVersion.WithKind("Secret")) != nil {
		t.Error("another kind's collection found the kept object")
	}
	got := w.take(k, 5, []byte("one"), cmGVK)
	if got == nil || mustAccessor(got).GetResourceVersion() != "5" {
		t.Fatalf("take: %v", got)
	}
	if w.take(k, 6, []byte("one"), cmGVK) != nil {
		t.Error("the same bytes at another revision found the object kept for revision 5")
	}
	if obj, ok := w.written(first, 5); !ok || obj != got {
		t.Error("the writer did not get the object the collection took")
	}
	// A later write of the key replaces it; the ring drops the oldest keys.
	w.put(k, []byte("three"), cm("3"))
	if w.take(k, 7, []byte("one"), cmGVK) != nil || w.take(k, 7, []byte("three"), cmGVK) == nil {
		t.Error("the key's latest write is not the one kept")
	}
	w.put(store.Key{Name: "b"}, []byte("b"), cm("b")) // drops the first write of k, not the latest
	if w.take(k, 7, []byte("three"), cmGVK) == nil {
		t.Error("dropping a key's older write dropped its latest")
	}
	w.put(store.Key{Name: "c"}, []byte("c"), cm("c"))
	if w.take(k, 7, []byte("three"), cmGVK) != nil {
		t.Error("a write outlived the ring")
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
	// The collection starts now and loads the object at the patch's revision: the object the patch decoded
	// (a running collection takes it as well: the write keeps it before storing it).
	env.rawList(t, rawCMs)
	res, _ := env.api.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("configmaps"))
	col := env.api.cache.Peek(cacheKind("c1", res))
	if err := col.WaitFor(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	e, ok, _ := col.Get("default", "cm")
	key := store.Key{Cluster: "c1", Resource: res.Storage, Namespace: "default", Name: "cm"}
	so, err := env.api.cfg.Storage.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	kept := env.api.written.take(key, rev, so.Value, res.GVK)
	if !ok || kept == nil || e.Object != kept {
		t.Fatalf("the cache's object (%v) is not the one the patch decoded (%v)", ok, kept != nil)
	}
	fresh, err := decodeStored(res, so)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(fresh, e.Object) || e.Object.(*corev1.ConfigMap).Data["k"] != "w" {
		t.Fatalf("the cache's object differs from a decode of the stored bytes:\n%+v\n%+v", e.Object, fresh)
	}

	// The collection is running now: it takes the next write's object however fast the store brings it back.
	again := env.rawObject(t, http.MethodPatch, rawCMs+"/cm", "application/merge-patch+json", `{"data":{"k":"x"}}`, http.StatusOK)
	rev, _ = strconv.ParseInt(again["metadata"].(map[string]any)["resourceVersion"].(string), 10, 64)
	if err := col.WaitFor(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	e, _, _ = col.Get("default", "cm")
	so, _ = env.api.cfg.Storage.Get(t.Context(), key)
	if kept := env.api.written.take(key, rev, so.Value, res.GVK); kept == nil || e.Object != kept || e.Revision != rev ||
		mustAccessor(e.Object).GetResourceVersion() != strconv.FormatInt(rev, 10) {
		t.Fatalf("a running collection did not take the written object (kept %v, revision %d, want %d)", kept != nil, e.Revision, rev)
	}
}

// TestEventsAcrossGroups: an Event written through events.k8s.io/v1 is listed through core/v1 (with its field
// selectors) and the other way round: the two resources share a storage, and each one's cache collection must
// decode into its own type rather than take the object the write kept for the other (a panic, then a 500).
func TestEventsAcrossGroups(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	at := metav1.MicroTime{Time: time.Unix(1505828956, 0)}
	if _, err := cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "new"},
		Regarding: corev1.ObjectReference{Namespace: "default"}, EventTime: at, Note: "n", Action: "Do", Reason: "Test",
		Type: "Normal", ReportingController: "test-controller", ReportingInstance: "test-node"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	core, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "source=test-controller"})
	if err != nil || len(core.Items) != 1 || core.Items[0].Name != "new" {
		t.Fatalf("core/v1 list by source: %v %v", core, err)
	}
	if _, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "old"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}, Reason: "Started",
		Source: corev1.EventSource{Component: "kubelet"}, Type: "Normal"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Started"})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].Name != "old" {
		t.Fatalf("events.k8s.io/v1 list by reason: %v %v", evs, err)
	}
}
