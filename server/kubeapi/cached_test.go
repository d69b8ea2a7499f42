package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// countingStorage counts the store's lists and watches, to tell reads the cache served from reads of the store.
type countingStorage struct {
	*store.Store
	lists, watches atomic.Int64
}

func (c *countingStorage) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, opts)
}

func (c *countingStorage) Watch(ctx context.Context, opts store.WatchOptions) (*store.Watcher, error) {
	c.watches.Add(1)
	return c.Store.Watch(ctx, opts)
}

// withCache counts storage reads and gives the API its own cache configured by cfg.
func withCache(t *testing.T, counts **countingStorage, cfg watchcache.Config) func(*Config) {
	return func(c *Config) {
		cs := &countingStorage{Store: c.Storage.(*store.Store)}
		*counts = cs
		c.Storage = cs
		cfg.Source, cfg.Logger = cs, slog.New(slog.DiscardHandler)
		c.WatchCache = watchcache.New(cfg)
		t.Cleanup(c.WatchCache.Close)
	}
}

type listBody struct {
	Metadata metav1.ListMeta                `json:"metadata"`
	Items    []metav1.PartialObjectMetadata `json:"items"`
}

func (env *testEnv) rawList(t *testing.T, path string) listBody {
	t.Helper()
	resp := env.rawDo(t, http.MethodGet, path, "", nil)
	if resp.code != http.StatusOK {
		t.Fatalf("list %s: %d %s", path, resp.code, resp.body)
	}
	var l listBody
	if err := json.Unmarshal(resp.body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func itemNames(l listBody) []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Name)
	}
	return out
}

// TestListsFromCacheAreConsistentAndPage: consistent lists (resourceVersion "") come from memory yet always
// include the caller's own preceding writes; resourceVersion=0 lists ignore limit; a limited list pages on
// through the store at the same revision.
func TestListsFromCacheAreConsistentAndPage(t *testing.T) {
	var counts *countingStorage
	env := newTestEnv(t, withCache(t, &counts, watchcache.Config{}))
	for i := range 3 {
		env.rawCreate(t, rawCMs, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d"}}`, i))
	}
	env.rawList(t, rawCMs) // loads the collection
	loaded := counts.lists.Load()
	for i := 3; i < 23; i++ {
		name := fmt.Sprintf("cm-%d", i)
		env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"}}`)
		if l := env.rawList(t, rawCMs); !slices.Contains(itemNames(l), name) {
			t.Fatalf("a consistent list right after creating %s does not hold it: %v", name, itemNames(l))
		}
	}
	if n := counts.lists.Load(); n != loaded {
		t.Fatalf("consistent lists read the store %d times; the cache should have served them", n-loaded)
	}
	full := env.rawList(t, rawCMs+"?resourceVersion=0&limit=5")
	if len(full.Items) != 23 || full.Metadata.Continue != "" {
		t.Fatalf("resourceVersion=0 with limit 5: %d items, continue %q; want every item (limit ignored)", len(full.Items), full.Metadata.Continue)
	}
	var paged []string
	l := env.rawList(t, rawCMs+"?limit=5")
	for pages := 1; ; pages++ {
		paged = append(paged, itemNames(l)...)
		if l.Metadata.ResourceVersion != full.Metadata.ResourceVersion && pages == 1 {
			t.Logf("first page at %s, full list at %s", l.Metadata.ResourceVersion, full.Metadata.ResourceVersion)
		}
		if l.Metadata.Continue == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		l = env.rawList(t, rawCMs+"?limit=5&continue="+url.QueryEscape(l.Metadata.Continue))
	}
	if !slices.Equal(paged, itemNames(full)) {
		t.Fatalf("pages joined %v, full list %v", paged, itemNames(full))
	}
	// Pages after the first come from the cache's snapshot at the first page's revision: changes made in between
	// do not show, and the store is not read.
	before := counts.lists.Load()
	first := env.rawList(t, rawCMs+"?limit=5")
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-99-after-page-1"}}`)
	if resp := env.rawDo(t, http.MethodDelete, rawCMs+"/cm-9", "", nil); resp.code != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.code, resp.body)
	}
	joined := itemNames(first)
	for l := first; l.Metadata.Continue != ""; {
		l = env.rawList(t, rawCMs+"?limit=5&continue="+url.QueryEscape(l.Metadata.Continue))
		if l.Metadata.ResourceVersion != first.Metadata.ResourceVersion {
			t.Fatalf("page at %s, first page at %s", l.Metadata.ResourceVersion, first.Metadata.ResourceVersion)
		}
		joined = append(joined, itemNames(l)...)
	}
	if !slices.Equal(joined, itemNames(full)) {
		t.Fatalf("paged list across changes: %v, want the state of the first page %v", joined, itemNames(full))
	}
	if n := counts.lists.Load() - before; n != 0 {
		t.Fatalf("a paged list read the store %d times", n)
	}
	// A selective limited list: continue only while a later item matches.
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"zz-labelled","labels":{"pick":"me"}}}`)
	if l := env.rawList(t, rawCMs+"?limit=1&labelSelector=pick%3Dme"); len(l.Items) != 1 || l.Metadata.Continue != "" {
		t.Fatalf("selective list: %v continue %q; want the one match and no continue", itemNames(l), l.Metadata.Continue)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestListAtFutureRevisionIsTooLarge(t *testing.T) {
	var counts *countingStorage
	env := newTestEnv(t, withCache(t, &counts, watchcache.Config{FreshTimeout: 100 * time.Millisecond}))
	env.rawList(t, rawCMs)
	future := env.storeRev(t) + 1000
	resp := env.rawDo(t, http.MethodGet, rawCMs+"?resourceVersionMatch=NotOlderThan&resourceVersion="+revString(future), "", nil)
	st := resp.wantStatus(t, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
	if !strings.Contains(st.Message, "Too large resource version") {
		t.Fatalf("message %q", st.Message)
	}
	// A version the store has reached is served (after the cache catches up).
	now := env.storeRev(t)
	if l := env.rawList(t, rawCMs+"?resourceVersionMatch=NotOlderThan&resourceVersion="+revString(now)); l.Metadata.ResourceVersion == "" || mustAtoi(t, l.Metadata.ResourceVersion) < now {
		t.Fatalf("NotOlderThan %d answered at %s", now, l.Metadata.ResourceVersion)
	}
}

// TestWatchBeforeCacheWindowFallsBackToStore: a watch from inside the cache's window is served from memory; one
// from before it, still inside the store's history, is served by the store with the same events.
func TestWatchBeforeCacheWindowFallsBackToStore(t *testing.T) {
	var counts *countingStorage
	env := newTestEnv(t, withCache(t, &counts, watchcache.Config{Window: 2, MaxWindow: 2}))
	cs := env.client(t, "c1")
	ctx := t.Context()
	env.rawList(t, rawCMs)
	var revs []string
	for i := range 5 {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("w", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, cm.ResourceVersion)
	}
	watchFrom := func(rv string, want int) []string {
		t.Helper()
		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var got []string
		for range want {
			ev := next(t, w)
			if ev.Type != watch.Added {
				t.Fatalf("event %v", ev.Type)
			}
			got = append(got, ev.Object.(*corev1.ConfigMap).ResourceVersion)
		}
		return got
	}
	before := counts.watches.Load()
	if got := watchFrom(revs[2], 2); !slices.Equal(got, revs[3:]) {
		t.Fatalf("watch from %s (in the window): %v, want %v", revs[2], got, revs[3:])
	}
	if n := counts.watches.Load() - before; n != 0 {
		t.Fatalf("a watch inside the window opened %d store watches", n)
	}
	if got := watchFrom(revs[0], 4); !slices.Equal(got, revs[1:]) {
		t.Fatalf("watch from %s (before the window): %v, want %v", revs[0], got, revs[1:])
	}
	if n := counts.watches.Load() - before; n != 1 {
		t.Fatalf("a watch before the window opened %d store watches, want 1", n)
	}
}

// TestStoreFallbacksAreBounded: a watch the cache cannot serve (from before its window) waits for a store slot;
// with none free it is answered 429 with Retry-After, and served once a slot frees up.
func TestStoreFallbacksAreBounded(t *testing.T) {
	var counts *countingStorage
	env := newTestEnv(t, withCache(t, &counts, watchcache.Config{Window: 2, MaxWindow: 2}),
		func(c *Config) { c.MaxStoreFallbacks = 1 })
	env.rawList(t, rawCMs)
	var revs []string
	for i := range 4 {
		obj := env.rawCreate(t, rawCMs, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f%d"}}`, i))
		revs = append(revs, obj["metadata"].(map[string]any)["resourceVersion"].(string))
	}
	env.rawList(t, rawCMs+"?resourceVersion="+revs[3]) // the cache has every create: revs[0] is before its window
	watchOld := rawCMs + "?watch=1&timeoutSeconds=1&resourceVersion=" + revs[0]
	env.api.fallbacks <- struct{}{} // the only slot is busy
	resp := env.rawDo(t, http.MethodGet, watchOld, "", nil)
	if resp.code != http.StatusTooManyRequests || resp.header.Get("Retry-After") != "1" {
		t.Fatalf("with no store slot free: %d (Retry-After %q) %s, want 429 with Retry-After 1", resp.code, resp.header.Get("Retry-After"), resp.body)
	}
	var st metav1.Status
	if err := json.Unmarshal(resp.body, &st); err != nil || st.Reason != metav1.StatusReasonTooManyRequests {
		t.Fatalf("body %s: want a Status with reason TooManyRequests", resp.body)
	}
	<-env.api.fallbacks
	resp = env.rawDo(t, http.MethodGet, watchOld, "", nil)
	if resp.code != http.StatusOK || !bytes.Contains(resp.body, []byte(`"f1"`)) || !bytes.Contains(resp.body, []byte(`"f3"`)) {
		t.Fatalf("with a slot free: %d %s, want the events after %s", resp.code, resp.body, revs[0])
	}
	if n := len(env.api.fallbacks); n != 0 {
		t.Fatalf("%d store slots still held after the watch", n)
	}
}

// TestCreateInNewNamespaceRightAway: the namespace check reads the cache but never refuses a namespace the
// cache has not seen yet; a terminating namespace is refused.
func TestCreateInNewNamespaceRightAway(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	for i := range 10 {
		ns := fmt.Sprint("fresh-", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create in namespace %s created a moment ago: %v", ns, err)
		}
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "fresh-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CoreV1().ConfigMaps("fresh-0").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "being terminated") {
		t.Fatalf("create in a terminating namespace: %v", err)
	}
}

// TestNamespaceFinalizers: deleting a namespace makes it Terminating while spec.finalizers remain; only
// /finalize changes them, and emptying them completes the deletion.
func TestNamespaceFinalizers(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fin"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
		t.Fatalf("spec.finalizers %v, want [kubernetes]", ns.Spec.Finalizers)
	}
	ns.Spec.Finalizers = nil
	if ns, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil || len(ns.Spec.Finalizers) != 1 {
		t.Fatalf("a plain update changed spec.finalizers: %v %v", ns.Spec.Finalizers, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err = cs.CoreV1().Namespaces().Get(ctx, "fin", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("after delete: %v %+v", err, ns.Status)
	}
	err = cs.CoreV1().Namespaces().Delete(ctx, "fin", metav1.DeleteOptions{})
	if st, ok := err.(apiStatus); !ok || st.Status().Code != http.StatusConflict {
		t.Fatalf("second delete of a terminating namespace: %v, want 409", err)
	}
	ns.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "fin", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("namespace after /finalize emptied its finalizers: %v, want not found", err)
	}
}

type apiStatus interface{ Status() metav1.Status }

// frozenStorage counts single-object reads, and gives the watch cache a store watch that never delivers a change
// (only progress bookmarks): the cache keeps the state it loaded while the store moves on.
type frozenStorage struct {
	*store.Store
	gets atomic.Int64
}

func (f *frozenStorage) Get(ctx context.Context, k store.Key) (store.Object, error) {
	f.gets.Add(1)
	return f.Store.Get(ctx, k)
}

func (f *frozenStorage) Watch(ctx context.Context, opts store.WatchOptions) (*store.Watcher, error) {
	opts.Resource = "frozen-" + opts.Resource
	return f.Store.Watch(ctx, opts)
}

// newFrozenEnv is a test API whose watch cache is fed by frozenStorage: collections keep what they loaded.
func newFrozenEnv(t *testing.T) (*testEnv, *frozenStorage) {
	var fs *frozenStorage
	env := newTestEnv(t, func(c *Config) {
		fs = &frozenStorage{Store: c.Storage.(*store.Store)}
		c.Storage = fs
		c.WatchCache = watchcache.New(watchcache.Config{Source: fs, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(c.WatchCache.Close)
	})
	return env, fs
}

// TestUpdatesStartFromTheCacheAndConfirmWithTheStore: an update starts from the watch cache's copy without
// reading the store; when that copy is stale the compare-and-swap fails and the update is redone from the
// store; a conflict, a no-op or a refusal computed from a stale copy is confirmed against the store first.
func TestUpdatesStartFromTheCacheAndConfirmWithTheStore(t *testing.T) {
	env, fs := newFrozenEnv(t)
	env.rawCreate(t, rawPods, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`)
	env.rawList(t, rawPods) // the collections load now, and then never change
	env.rawList(t, rawCMs)

	bind := func(node string) rawResponse {
		return env.rawDo(t, http.MethodPost, rawPods+"/p/binding", "application/json",
			strings.NewReader(`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"`+node+`"}}`))
	}
	gets := fs.gets.Load()
	if resp := bind("n1"); resp.code != http.StatusCreated {
		t.Fatalf("binding: %d %s", resp.code, resp.body)
	}
	if n := fs.gets.Load() - gets; n != 0 {
		t.Errorf("a binding whose pod the cache holds read the store %d times", n)
	}
	// The cache still shows p unbound; the store knows better.
	st := bind("n2").wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	if !strings.Contains(st.Message, `already assigned to node "n1"`) {
		t.Errorf("second binding: %q, want the store's answer (already assigned to n1)", st.Message)
	}

	patch := func(pt, body string) map[string]any {
		t.Helper()
		return env.rawObject(t, http.MethodPatch, rawCMs+"/cm", pt, body, http.StatusOK)
	}
	get := func() map[string]any {
		t.Helper()
		return env.rawObject(t, http.MethodGet, rawCMs+"/cm", "", "", http.StatusOK)
	}
	merge := "application/merge-patch+json"
	patch(merge, `{"data":{"a":"1"}}`)
	// From the cache's copy (no data) this lost race is retried from the store's.
	if got := patch(merge, `{"data":{"b":"2"}}`)["data"]; !reflect.DeepEqual(got, map[string]any{"a": "1", "b": "2"}) {
		t.Fatalf("second patch: data %v, want a and b", got)
	}
	// A no-op on the cache's copy (no data) is not one on the store's.
	patch(merge, `{"data":{"a":null,"b":null}}`)
	if got := get()["data"]; got != nil {
		t.Fatalf("after removing a and b the store holds data %v", got)
	}
	patch(merge, `{"data":{"x":"1"}}`)
	// A JSON patch whose test fails on the cache's copy succeeds on the store's.
	if got := patch("application/json-patch+json", `[{"op":"test","path":"/data/x","value":"1"},{"op":"add","path":"/data/y","value":"2"}]`)["data"]; !reflect.DeepEqual(got, map[string]any{"x": "1", "y": "2"}) {
		t.Fatalf("JSON patch: data %v, want x and y", got)
	}
	// A PUT at the revision the cache holds is a conflict: the store moved on.
	stale := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","resourceVersion":"` +
		strconv.FormatInt(cachedRevision(t, env, "cm"), 10) + `"},"data":{"z":"1"}}`
	env.rawDo(t, http.MethodPut, rawCMs+"/cm", "application/json", strings.NewReader(stale)).
		wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	// A PUT at the store's revision works, though the cache does not have that revision.
	cur := get()["metadata"].(map[string]any)["resourceVersion"].(string)
	resp := env.rawDo(t, http.MethodPut, rawCMs+"/cm", "application/json", strings.NewReader(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","resourceVersion":"`+cur+`"},"data":{"z":"1"}}`))
	if resp.code != http.StatusOK {
		t.Fatalf("PUT at the current revision: %d %s", resp.code, resp.body)
	}
}

// cachedRevision is the revision of ConfigMap name in the c1 collection of env's cache.
func cachedRevision(t *testing.T, env *testEnv, name string) int64 {
	t.Helper()
	res, ok := env.api.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if !ok {
		t.Fatal("no configmaps in the registry")
	}
	col := env.api.cache.Peek(cacheKind("c1", res))
	if col == nil {
		t.Fatal("no running collection of configmaps")
	}
	e, ok, _ := col.Get("default", name)
	if !ok {
		t.Fatalf("configmap %s is not in the cache", name)
	}
	return e.Revision
}

// TestGetAtResourceVersionZeroReadsTheCache: GET ?resourceVersion=0 (any state, what kubelet asks for its Node)
// is served from a running collection without reading the store; a plain GET reads the store; an object the
// cache does not hold comes from the store.
func TestGetAtResourceVersionZeroReadsTheCache(t *testing.T) {
	env, fs := newFrozenEnv(t)
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"v":"1"}}`)
	env.rawList(t, rawCMs) // the collection loads now, and then never changes
	env.rawObject(t, http.MethodPatch, rawCMs+"/cm", "application/merge-patch+json", `{"data":{"v":"2"}}`, http.StatusOK)
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"later"}}`)

	gets := fs.gets.Load()
	cached := env.rawObject(t, http.MethodGet, rawCMs+"/cm?resourceVersion=0", "", "", http.StatusOK)
	if n := fs.gets.Load() - gets; n != 0 {
		t.Errorf("GET at resourceVersion 0 read the store %d times", n)
	}
	if v := cached["data"].(map[string]any)["v"]; v != "1" || cached["kind"] != "ConfigMap" ||
		cached["metadata"].(map[string]any)["resourceVersion"] != strconv.FormatInt(cachedRevision(t, env, "cm"), 10) {
		t.Errorf("GET at resourceVersion 0: %v, want the cache's copy (v=1) with its resourceVersion", cached)
	}
	if v := env.rawObject(t, http.MethodGet, rawCMs+"/cm", "", "", http.StatusOK)["data"].(map[string]any)["v"]; v != "2" {
		t.Errorf("plain GET: v=%v, want the store's 2", v)
	}
	if got := env.rawObject(t, http.MethodGet, rawCMs+"/later?resourceVersion=0", "", "", http.StatusOK); got["metadata"].(map[string]any)["name"] != "later" {
		t.Errorf("GET at resourceVersion 0 of an object the cache lacks: %v", got)
	}
	env.rawDo(t, http.MethodGet, rawCMs+"/none?resourceVersion=0", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}
