package watchcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"pgregory.net/rapid"

	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// decode turns stored JSON into a ConfigMap whose data["v"] is the stored value.
func decode(so store.Object) (runtime.Object, error) {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(so.Value, &cm); err != nil {
		return nil, err
	}
	cm.ResourceVersion = fmt.Sprint(so.Revision)
	return &cm, nil
}

func value(v string) []byte {
	b, _ := json.Marshal(corev1.ConfigMap{Data: map[string]string{"v": v}})
	return b
}

func valueOf(e *Entry) string { return e.Object.(*corev1.ConfigMap).Data["v"] }

type env struct {
	st    *store.Store
	cache *Cache
	kind  Kind
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.NewDatabase(t), Retention: -1,
		PollInterval: 100 * time.Millisecond, ProgressInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg.Source = st
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := New(cfg)
	t.Cleanup(c.Close)
	return &env{st: st, cache: c, kind: Kind{Cluster: "c1", Resource: "configmaps", Type: "v1/ConfigMap"}}
}

func (e *env) key(ns, name string) store.Key {
	return store.Key{Cluster: e.kind.Cluster, Resource: e.kind.Resource, Namespace: ns, Name: name}
}

func (e *env) create(t testing.TB, ns, name, v string) store.Object {
	t.Helper()
	o, err := e.st.Create(t.Context(), e.key(ns, name), value(v))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (e *env) collection(t testing.TB) *Collection {
	t.Helper()
	col, err := e.cache.Collection(t.Context(), e.kind, decode)
	if err != nil {
		t.Fatal(err)
	}
	return col
}

// next waits for at least one event (bookmarks skipped) and returns the changes.
func next(t testing.TB, w *Watch, want int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []Event
	for len(out) < want {
		evs, err := w.Next(ctx, nil)
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		for _, ev := range evs {
			if ev.Type != store.Bookmark {
				out = append(out, ev)
			}
		}
	}
	return out
}

func names(es []*Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	return out
}

func TestLoadListsInKeyOrderAndFollowsWrites(t *testing.T) {
	e := newEnv(t, Config{})
	// Byte order, not a locale's: "a-b" < "a.b" < "a/…" ordering by namespace first.
	for _, k := range [][2]string{{"b", "x"}, {"a-b", "z"}, {"a", "y"}, {"a", "x"}, {"a", "x-1"}, {"a", "x.1"}} {
		e.create(t, k[0], k[1], "1")
	}
	col := e.collection(t)
	items, rev := col.List("")
	if want := []string{"a/x", "a/x-1", "a/x.1", "a/y", "a-b/z", "b/x"}; !slices.Equal(names(items), want) {
		t.Fatalf("List = %v, want %v", names(items), want)
	}
	// The store pages the same keys in the same order.
	page, err := e.st.List(t.Context(), store.ListOptions{Cluster: "c1", Resource: "configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	var storeNames []string
	for _, o := range page.Items {
		storeNames = append(storeNames, o.Namespace+"/"+o.Name)
	}
	if !slices.Equal(names(items), storeNames) || rev != page.Revision {
		t.Fatalf("cache %v at %d, store %v at %d", names(items), rev, storeNames, page.Revision)
	}
	if items, _ := col.List("a"); !slices.Equal(names(items), []string{"a/x", "a/x-1", "a/x.1", "a/y"}) {
		t.Fatalf("List(a) = %v", names(items))
	}
	o := e.create(t, "a", "new", "2")
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, ok, rev := col.Get("a", "new")
	if !ok || got.Revision != o.Revision || valueOf(got) != "2" || rev < o.Revision {
		t.Fatalf("Get after Fresh = %+v %v at %d, want revision %d", got, ok, rev, o.Revision)
	}
	if _, err := e.st.Delete(t.Context(), e.key("a", "new"), 0); err != nil {
		t.Fatal(err)
	}
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := col.Get("a", "new"); ok {
		t.Fatal("deleted object still cached after Fresh")
	}
}

func TestWatchEventsCarryPreviousState(t *testing.T) {
	e := newEnv(t, Config{})
	col := e.collection(t)
	w, err := col.Watch(t.Context(), WatchOptions{Namespace: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.create(t, "b", "other", "x") // another namespace: not delivered
	c := e.create(t, "a", "x", "1")
	u, err := e.st.Update(t.Context(), e.key("a", "x"), value("2"), c.Revision)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.st.Delete(t.Context(), e.key("a", "x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := next(t, w, 3)
	type seen struct {
		typ        store.EventType
		rev        int64
		val, prevV string
	}
	var got []seen
	for _, ev := range evs {
		s := seen{typ: ev.Type, rev: ev.Revision, val: valueOf(ev.Object)}
		if ev.Prev != nil {
			s.prevV = valueOf(ev.Prev)
		}
		got = append(got, s)
	}
	want := []seen{{store.Added, c.Revision, "1", ""}, {store.Modified, u.Revision, "2", "1"}, {store.Deleted, d.Revision, "2", "2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

func TestWatchFromThePast(t *testing.T) {
	e := newEnv(t, Config{Window: 4, MaxWindow: 4})
	e.create(t, "a", "first", "v") // revision 0 would mean "now"
	col := e.collection(t)
	start := col.Revision()
	var revs []int64
	for i := range 6 {
		revs = append(revs, e.create(t, "a", fmt.Sprint("n", i), "v").Revision)
	}
	if err := col.WaitFor(t.Context(), revs[5]); err != nil {
		t.Fatal(err)
	}
	// The window holds the last 4 events: a watch from revs[1] replays revs[2..5].
	w, err := col.Watch(t.Context(), WatchOptions{Revision: revs[1]})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, ev := range next(t, w, 4) {
		got = append(got, ev.Revision)
	}
	w.Stop()
	if !slices.Equal(got, revs[2:]) {
		t.Fatalf("replayed %v, want %v", got, revs[2:])
	}
	if _, err := col.Watch(t.Context(), WatchOptions{Revision: start}); !errors.Is(err, ErrTooOld) {
		t.Fatalf("watch from before the window: %v, want ErrTooOld", err)
	}
	// Compaction inside the window also sends the watch to the store (which answers 410).
	if err := e.st.Compact(t.Context(), revs[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Watch(t.Context(), WatchOptions{Revision: revs[2]}); !errors.Is(err, ErrTooOld) {
		t.Fatalf("watch from a compacted revision: %v, want ErrTooOld", err)
	}
	if _, err := col.Watch(t.Context(), WatchOptions{Revision: revs[3]}); err != nil {
		t.Fatalf("watch from the compaction revision: %v", err)
	}
}

func TestWatchInitialStateThenChanges(t *testing.T) {
	e := newEnv(t, Config{})
	e.create(t, "a", "x", "1")
	e.create(t, "a", "y", "1")
	e.create(t, "b", "z", "1")
	col := e.collection(t)
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := col.Watch(t.Context(), WatchOptions{Namespace: "a", Initial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if !slices.Equal(names(w.Initial), []string{"a/x", "a/y"}) || w.Start != col.Revision() {
		t.Fatalf("initial %v at %d", names(w.Initial), w.Start)
	}
	o := e.create(t, "a", "w", "1")
	if evs := next(t, w, 1); evs[0].Revision != o.Revision || evs[0].Type != store.Added {
		t.Fatalf("event after initial state: %+v", evs[0])
	}
}

func TestSlowWatchEnds(t *testing.T) {
	e := newEnv(t, Config{WatchBuffer: 2})
	col := e.collection(t)
	w, err := col.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last store.Object
	for i := range 3 {
		last = e.create(t, "a", fmt.Sprint("n", i), "v")
	}
	if err := col.WaitFor(t.Context(), last.Revision); err != nil { // all three pushed before anyone reads
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var n int
	for {
		evs, err := w.Next(ctx, nil)
		if errors.Is(err, ErrSlow) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
	}
	if n > 2 {
		t.Fatalf("a watch with a 2-event buffer received %d events before ending", n)
	}
	// The collection itself carries on.
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if items, _ := col.List(""); len(items) != 3 {
		t.Fatalf("collection holds %d objects, want 3", len(items))
	}
}

func TestIdleCollectionsAreDroppedWatchedOnesKept(t *testing.T) {
	e := newEnv(t, Config{Idle: time.Minute})
	col := e.collection(t)
	other := e.kind
	other.Resource = "secrets"
	watched, err := e.cache.Collection(t.Context(), other, decode)
	if err != nil {
		t.Fatal(err)
	}
	w, err := watched.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.cache.dropIdle(time.Now().Add(2 * time.Minute))
	if e.cache.Len() != 1 {
		t.Fatalf("%d collections after dropping idle ones, want 1 (the watched one)", e.cache.Len())
	}
	if col.failed() == nil || watched.failed() != nil {
		t.Fatalf("idle collection err %v, watched collection err %v", col.failed(), watched.failed())
	}
	w.Stop()
	// A new read starts a new collection with the current state.
	e.create(t, "a", "x", "1")
	col2 := e.collection(t)
	if col2 == col {
		t.Fatal("dropped collection handed out again")
	}
	if err := col2.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if items, _ := col2.List(""); len(items) != 1 {
		t.Fatalf("new collection holds %d objects, want 1", len(items))
	}
}

func TestCloseEndsWatches(t *testing.T) {
	e := newEnv(t, Config{})
	col := e.collection(t)
	w, err := col.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.cache.Close()
	if _, err := w.Next(t.Context(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := e.cache.Collection(t.Context(), e.kind, decode); !errors.Is(err, ErrClosed) {
		t.Fatalf("Collection after Close: %v, want ErrClosed", err)
	}
}

// TestCacheMatchesStore: after any sequence of writes, a fresh collection equals a consistent store list, and
// every watch, whenever it started, sees the same events in the same order.
func TestCacheMatchesStore(t *testing.T) {
	e := newEnv(t, Config{Window: 64, MaxWindow: 64})
	e.create(t, "seed", "x", "v") // so that no watch starts at revision 0 ("now")
	col := e.collection(t)
	rapid.Check(t, func(rt *rapid.T) {
		w1, err := col.Watch(t.Context(), WatchOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		defer w1.Stop()
		from := w1.Start
		nOps := rapid.IntRange(1, 20).Draw(rt, "ops")
		var changes int
		var w2 *Watch
		for i := range nOps {
			if i == nOps/2 {
				if w2, err = col.Watch(t.Context(), WatchOptions{Revision: from}); err != nil {
					rt.Fatal(err)
				}
				defer w2.Stop()
			}
			k := e.key(rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "ns"), rapid.SampledFrom([]string{"x", "y", "z"}).Draw(rt, "name"))
			var err error
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				_, err = e.st.Create(t.Context(), k, value(fmt.Sprint(i)))
			case 1:
				_, err = e.st.Update(t.Context(), k, value(fmt.Sprint(i)), 0)
			case 2:
				_, err = e.st.Delete(t.Context(), k, 0)
			}
			if err == nil {
				changes++
			} else if !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrNotFound) {
				rt.Fatal(err)
			}
		}
		if err := col.Fresh(t.Context()); err != nil {
			rt.Fatal(err)
		}
		items, rev := col.List("")
		page, err := e.st.List(t.Context(), store.ListOptions{Cluster: "c1", Resource: "configmaps", Revision: rev})
		if err != nil {
			rt.Fatal(err)
		}
		if len(items) != len(page.Items) {
			rt.Fatalf("cache has %d objects, store %d", len(items), len(page.Items))
		}
		for i, o := range page.Items {
			if items[i].Namespace != o.Namespace || items[i].Name != o.Name || items[i].Revision != o.Revision {
				rt.Fatalf("item %d: cache %s/%s@%d, store %s/%s@%d", i, items[i].Namespace, items[i].Name,
					items[i].Revision, o.Namespace, o.Name, o.Revision)
			}
		}
		if changes == 0 {
			return
		}
		a, b := next(t, w1, changes), next(t, w2, changes)
		for i := range a {
			if a[i].Revision != b[i].Revision || a[i].Type != b[i].Type {
				rt.Fatalf("event %d: watch 1 %v@%d, watch 2 %v@%d", i, a[i].Type, a[i].Revision, b[i].Type, b[i].Revision)
			}
		}
	})
}

func TestSnapshotsFreezeAndPage(t *testing.T) {
	e := newEnv(t, Config{})
	for _, n := range []string{"a", "b", "c", "d"} {
		e.create(t, "ns", n, "1")
	}
	e.create(t, "other", "z", "1")
	col := e.collection(t)
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	snap := col.Snapshot()
	if again, ok := col.SnapshotAt(snap.Revision); !ok || again != snap {
		t.Fatal("the snapshot is not kept for its revision")
	}
	e.create(t, "ns", "b2", "1") // after the snapshot
	last, err := e.st.Delete(t.Context(), e.key("ns", "c"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := col.WaitFor(t.Context(), last.Revision); err != nil {
		t.Fatal(err)
	}
	collect := func(ns, afterNS, after string) []string {
		var out []string
		snap.Ascend(ns, afterNS, after, func(e *Entry) bool {
			out = append(out, e.Namespace+"/"+e.Name)
			return true
		})
		return out
	}
	if got := collect("ns", "", ""); !slices.Equal(got, []string{"ns/a", "ns/b", "ns/c", "ns/d"}) {
		t.Fatalf("snapshot of ns: %v (later changes must not show)", got)
	}
	if got := collect("ns", "ns", "b"); !slices.Equal(got, []string{"ns/c", "ns/d"}) {
		t.Fatalf("after ns/b: %v", got)
	}
	if got := collect("", "ns", "d"); !slices.Equal(got, []string{"other/z"}) {
		t.Fatalf("all namespaces after ns/d: %v", got)
	}
	if items, _ := col.List("ns"); !slices.Equal(names(items), []string{"ns/a", "ns/b", "ns/b2", "ns/d"}) {
		t.Fatalf("the live collection: %v", names(items))
	}
	if _, ok := col.SnapshotAt(snap.Revision + 12345); ok {
		t.Fatal("a snapshot at a revision never taken")
	}
}

// TestCrossClusterCollection: Kind{Cluster: ""} holds every cluster's objects of the resource (for the
// controllers and the scheduler), listed and watched per cluster or all together.
func TestCrossClusterCollection(t *testing.T) {
	e := newEnv(t, Config{})
	create := func(cluster, ns, name string) store.Object {
		t.Helper()
		o, err := e.st.Create(t.Context(), store.Key{Cluster: cluster, Resource: "configmaps", Namespace: ns, Name: name}, value("1"))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	create("c1", "a", "x")
	create("c2", "a", "x")
	create("c2", "b", "y")
	all, err := e.cache.Collection(t.Context(), Kind{Resource: "configmaps", Type: "v1/ConfigMap"}, decode)
	if err != nil {
		t.Fatal(err)
	}
	key := func(es []*Entry) []string {
		var out []string
		for _, en := range es {
			out = append(out, en.Cluster+"/"+en.Namespace+"/"+en.Name)
		}
		return out
	}
	if got, _ := all.ListIn("c2", ""); !slices.Equal(key(got), []string{"c2/a/x", "c2/b/y"}) {
		t.Fatalf("ListIn(c2) = %v", key(got))
	}
	if got, _ := all.ListIn("c1", "a"); !slices.Equal(key(got), []string{"c1/a/x"}) {
		t.Fatalf("ListIn(c1, a) = %v", key(got))
	}
	if _, ok, _ := all.GetIn("c2", "b", "y"); !ok {
		t.Fatal("GetIn(c2, b, y) missed")
	}
	everything, err := all.Watch(t.Context(), WatchOptions{Initial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer everything.Stop()
	if len(everything.Initial) != 3 {
		t.Fatalf("initial state of every cluster: %v", key(everything.Initial))
	}
	onlyC1, err := all.Watch(t.Context(), WatchOptions{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer onlyC1.Stop()
	o2 := create("c2", "a", "z")
	o1 := create("c1", "a", "z")
	if evs := next(t, everything, 2); evs[0].Revision != o2.Revision || evs[1].Revision != o1.Revision || evs[1].Object.Cluster != "c1" {
		t.Fatalf("events of every cluster: %+v", evs)
	}
	if evs := next(t, onlyC1, 1); evs[0].Revision != o1.Revision {
		t.Fatalf("the c1 watch got %+v", evs[0])
	}
}

// TestWatchFilter: a filtered watch gets the initial state, the replayed window and the live events of the
// objects its filter accepts, and the event of an object leaving it (its previous state was accepted), nothing
// else.
func TestWatchFilter(t *testing.T) {
	e := newEnv(t, Config{})
	e.create(t, "a", "x", "mine")
	e.create(t, "a", "y", "theirs")
	col := e.collection(t)
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	mine := func(en *Entry) bool { return valueOf(en) == "mine" }
	w, err := col.Watch(t.Context(), WatchOptions{Initial: true, Filter: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if !slices.Equal(names(w.Initial), []string{"a/x"}) {
		t.Fatalf("initial %v, want only a/x", names(w.Initial))
	}
	from := col.Revision()
	e.create(t, "a", "z", "theirs")                                            // not delivered
	joined, err := e.st.Update(t.Context(), e.key("a", "y"), value("mine"), 0) // y joins
	if err != nil {
		t.Fatal(err)
	}
	left, err := e.st.Update(t.Context(), e.key("a", "x"), value("gone"), 0) // x leaves
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, evs []Event) {
		t.Helper()
		var got []string
		for _, ev := range evs {
			got = append(got, fmt.Sprintf("%s@%d", ev.Object.Name, ev.Revision))
		}
		want := []string{fmt.Sprintf("y@%d", joined.Revision), fmt.Sprintf("x@%d", left.Revision)}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	check("live", next(t, w, 2))
	replay, err := col.Watch(t.Context(), WatchOptions{Revision: from, Filter: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	check("replayed from the window", next(t, replay, 2))
}

// TestListIndexed: the secondary index follows the initial list, creates, changes of the indexed value and
// deletes.
func TestListIndexed(t *testing.T) {
	e := newEnv(t, Config{Index: func(resource string) func(runtime.Object) string {
		if resource != "configmaps" {
			return nil
		}
		return func(o runtime.Object) string { return o.(*corev1.ConfigMap).Data["v"] }
	}})
	e.create(t, "a", "x", "n1")
	col := e.collection(t)
	if err := col.Fresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !col.Indexed() {
		t.Fatal("the collection has no index")
	}
	byValue := func(v string) []string {
		var out []string
		for _, en := range col.ListIndexed("c1", v) {
			out = append(out, en.Namespace+"/"+en.Name)
		}
		slices.Sort(out)
		return out
	}
	e.create(t, "b", "y", "n1")
	z := e.create(t, "a", "z", "n2")
	moved, err := e.st.Update(t.Context(), e.key("a", "x"), value("n2"), 0)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.st.Delete(t.Context(), e.key("a", "z"), z.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if err := col.WaitFor(t.Context(), max(moved.Revision, gone.Revision)); err != nil {
		t.Fatal(err)
	}
	if got := byValue("n1"); !slices.Equal(got, []string{"b/y"}) {
		t.Errorf("n1: %v, want b/y", got)
	}
	if got := byValue("n2"); !slices.Equal(got, []string{"a/x"}) {
		t.Errorf("n2: %v, want a/x (moved there; z deleted)", got)
	}
	if got := col.ListIndexed("other", "n2"); len(got) != 0 {
		t.Errorf("another cluster: %d entries", len(got))
	}
}

// TestBookmarksAreSpaced: a watch gets progress bookmarks only when it asks, at most one per its interval,
// though the store advances the collection every 100 ms here.
func TestBookmarksAreSpaced(t *testing.T) {
	e := newEnv(t, Config{})
	e.create(t, "a", "first", "v")
	col := e.collection(t)
	none, err := col.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Stop()
	spaced, err := col.Watch(t.Context(), WatchOptions{BookmarkEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer spaced.Stop()
	bookmarks := func(w *Watch, within time.Duration) (n int) {
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		for {
			evs, err := w.Next(ctx, nil)
			if err != nil {
				return n
			}
			for _, ev := range evs {
				if ev.Type == store.Bookmark {
					n++
				}
			}
		}
	}
	if n := bookmarks(spaced, 2*time.Second); n != 1 {
		t.Fatalf("%d bookmarks in 2 s with one an hour asked, want the first one only", n)
	}
	if n := bookmarks(none, 100*time.Millisecond); n != 0 {
		t.Fatalf("%d bookmarks for a watch that asked for none", n)
	}
}

// TestIndexedWatches: a watch narrowed to one value of the collection's index gets the events of objects with
// that value, or that had it (leaving), live and replayed from the window — and no others.
func TestIndexedWatches(t *testing.T) {
	e := newEnv(t, Config{Index: func(string) func(runtime.Object) string {
		return func(o runtime.Object) string { return o.(*corev1.ConfigMap).Data["v"] }
	}})
	e.create(t, "a", "seed", "x")
	col := e.collection(t)
	if !col.Indexed() {
		t.Fatal("the collection has no index")
	}
	start := col.Revision()
	live, err := col.Watch(t.Context(), WatchOptions{Indexed: true, IndexValue: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	a := e.create(t, "a", "on-n1", "n1")
	e.create(t, "a", "on-n2", "n2")
	moved, err := e.st.Update(t.Context(), e.key("a", "on-n1"), value("n2"), a.Revision)
	if err != nil {
		t.Fatal(err)
	}
	last := e.create(t, "a", "also-n1", "n1")
	if err := col.WaitFor(t.Context(), last.Revision); err != nil {
		t.Fatal(err)
	}
	want := []int64{a.Revision, moved.Revision, last.Revision}
	revs := func(evs []Event) (out []int64) {
		for _, ev := range evs {
			out = append(out, ev.Revision)
		}
		return out
	}
	if got := revs(next(t, live, 3)); !slices.Equal(got, want) {
		t.Fatalf("live indexed watch got revisions %v, want %v (n1's create, its move away, the other n1 create)", got, want)
	}
	replayed, err := col.Watch(t.Context(), WatchOptions{Revision: start, Indexed: true, IndexValue: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer replayed.Stop()
	if got := revs(next(t, replayed, 3)); !slices.Equal(got, want) {
		t.Fatalf("replayed indexed watch got revisions %v, want %v", got, want)
	}
}
