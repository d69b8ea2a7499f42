package watchcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Collection is the cached state of one (cluster, resource): its objects at Revision, and its recent events.
type Collection struct {
	cache *Cache
	kind  Kind
	dec   Decoder

	synced   chan struct{} // closed once the initial list is in (or failed)
	lastUsed atomic.Int64  // unix nanoseconds of the last read or watch
	stop     context.CancelFunc

	mu      sync.RWMutex // guards everything below
	err     error        // set once the collection is dead
	rev     int64        // every event of the resource up to rev is applied
	changed int64        // revision of the last change applied (the load revision before any)
	items   *btree.BTreeG[*Entry]
	window  ring
	watches map[*Watch]struct{} // every watch; events go to unindexed and to the indexed ones by value
	// unindexed and byValue split watches for event delivery: byValue holds the watches narrowed to one value
	// of the secondary index (WatchOptions.Indexed), unindexed the others.
	unindexed map[*Watch]struct{}
	byValue   map[string]map[*Watch]struct{}
	advanced  chan struct{} // closed and replaced whenever rev moves
	sw        *store.Watcher
	// snaps are frozen copies of items kept for paged lists: a list served a page at revision R continues from
	// the snapshot at R (the continue token names R) while it lasts.
	snaps map[int64]*Snapshot
	// indexOf and byIndex are the secondary index (Config.Index): entries by index value, then by key.
	indexOf func(runtime.Object) string
	byIndex map[string]map[entryKey]*Entry
}

type entryKey struct{ cluster, namespace, name string }

// addWatch registers w for events; mu must be held.
func (col *Collection) addWatch(w *Watch) {
	col.watches[w] = struct{}{}
	if !w.opts.Indexed || col.indexOf == nil {
		col.unindexed[w] = struct{}{}
		return
	}
	set := col.byValue[w.opts.IndexValue]
	if set == nil {
		set = map[*Watch]struct{}{}
		col.byValue[w.opts.IndexValue] = set
	}
	set[w] = struct{}{}
}

// inIndex reports whether ev is for w by the secondary index (always, for a watch that is not indexed).
func (col *Collection) inIndex(w *Watch, ev Event) bool {
	if !w.opts.Indexed || col.indexOf == nil || ev.Object == nil {
		return true
	}
	return col.indexOf(ev.Object.Object) == w.opts.IndexValue ||
		(ev.Prev != nil && col.indexOf(ev.Prev.Object) == w.opts.IndexValue)
}

// removeWatch unregisters w; mu must be held.
func (col *Collection) removeWatch(w *Watch) {
	delete(col.watches, w)
	delete(col.unindexed, w)
	if set := col.byValue[w.opts.IndexValue]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(col.byValue, w.opts.IndexValue)
		}
	}
}

// indexPut and indexDel keep byIndex in step with items; mu must be held (or the collection not yet shared).
func (col *Collection) indexPut(e *Entry) {
	if col.indexOf == nil {
		return
	}
	v := col.indexOf(e.Object)
	bucket := col.byIndex[v]
	if bucket == nil {
		bucket = map[entryKey]*Entry{}
		col.byIndex[v] = bucket
	}
	bucket[entryKey{e.Cluster, e.Namespace, e.Name}] = e
}

func (col *Collection) indexDel(e *Entry) {
	if col.indexOf == nil || e == nil {
		return
	}
	v := col.indexOf(e.Object)
	if bucket := col.byIndex[v]; bucket != nil {
		delete(bucket, entryKey{e.Cluster, e.Namespace, e.Name})
		if len(bucket) == 0 {
			delete(col.byIndex, v)
		}
	}
}

// Indexed reports whether the collection keeps a secondary index (Config.Index).
func (col *Collection) Indexed() bool { return col.indexOf != nil }

// ListIndexed returns the entries of cluster ("" for every cluster of a cross-cluster collection) whose index
// value (Config.Index) is value, in no particular order; nil when the resource has no index.
func (col *Collection) ListIndexed(cluster, value string) []*Entry {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	var out []*Entry
	for k, e := range col.byIndex[value] {
		if cluster == "" || k.cluster == cluster {
			out = append(out, e)
		}
	}
	return out
}

// Snapshot is a collection's objects frozen at one revision (a lazy copy-on-write clone of its tree).
type Snapshot struct {
	Revision int64
	cluster  string // the collection's (single) cluster
	tree     *btree.BTreeG[*Entry]
	lastUsed atomic.Int64
}

// Snapshot limits: how long an unused snapshot is kept and how many a collection keeps.
const (
	snapshotTTL = time.Minute
	maxSnaps    = 16
)

// Snapshot freezes the collection's objects at its current revision and keeps the snapshot for paged reads
// (SnapshotAt) for a minute after its last use.
func (col *Collection) Snapshot() *Snapshot {
	col.touch()
	now := time.Now()
	col.mu.Lock() // Clone must not run concurrently with writes to the tree
	defer col.mu.Unlock()
	if s, ok := col.snaps[col.rev]; ok {
		s.lastUsed.Store(now.UnixNano())
		return s
	}
	for rev, s := range col.snaps {
		if now.Sub(time.Unix(0, s.lastUsed.Load())) > snapshotTTL {
			delete(col.snaps, rev)
		}
	}
	if len(col.snaps) >= maxSnaps {
		oldest := int64(-1)
		for rev := range col.snaps {
			if oldest < 0 || rev < oldest {
				oldest = rev
			}
		}
		delete(col.snaps, oldest)
	}
	s := &Snapshot{Revision: col.rev, cluster: col.kind.Cluster, tree: col.items.Clone()}
	s.lastUsed.Store(now.UnixNano())
	if col.snaps == nil {
		col.snaps = map[int64]*Snapshot{}
	}
	col.snaps[col.rev] = s
	return s
}

// SnapshotAt returns the kept snapshot at rev, if any.
func (col *Collection) SnapshotAt(rev int64) (*Snapshot, bool) {
	col.touch()
	col.mu.RLock()
	s, ok := col.snaps[rev]
	col.mu.RUnlock()
	if ok {
		s.lastUsed.Store(time.Now().UnixNano())
	}
	return s, ok
}

// Ascend calls f for the snapshot's objects of namespace ("" for all) in key order, starting after the key
// (afterNamespace, afterName) when afterName is set, until f returns false. (For single-cluster collections.)
func (s *Snapshot) Ascend(namespace, afterNamespace, afterName string, f func(*Entry) bool) {
	visit := func(e *Entry) bool {
		if namespace != "" && e.Namespace != namespace {
			return false
		}
		if afterName != "" && e.Namespace == afterNamespace && e.Name == afterName {
			return true // the last key of the previous page
		}
		return f(e)
	}
	switch {
	case afterName != "":
		s.tree.AscendGreaterOrEqual(&Entry{Cluster: s.cluster, Namespace: afterNamespace, Name: afterName}, visit)
	case namespace != "":
		s.tree.AscendGreaterOrEqual(&Entry{Cluster: s.cluster, Namespace: namespace}, visit)
	default:
		s.tree.Ascend(visit)
	}
}

func entryLess(a, b *Entry) bool {
	if a.Cluster != b.Cluster {
		return a.Cluster < b.Cluster
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func newCollection(c *Cache, k Kind, dec Decoder) *Collection {
	col := &Collection{cache: c, kind: k, dec: dec, synced: make(chan struct{}),
		items: btree.NewG(32, entryLess), watches: map[*Watch]struct{}{}, unindexed: map[*Watch]struct{}{},
		byValue: map[string]map[*Watch]struct{}{}, advanced: make(chan struct{}),
		window: newRing(c.cfg.Window, c.cfg.MaxWindow, c.cfg.WindowAge)}
	if c.cfg.Index != nil {
		if f := c.cfg.Index(k.Resource); f != nil {
			col.indexOf, col.byIndex = f, map[string]map[entryKey]*Entry{}
		}
	}
	col.touch()
	return col
}

func (col *Collection) touch() { col.lastUsed.Store(time.Now().UnixNano()) }

// idleSince is how long nobody has used col; a collection with watches is never idle.
func (col *Collection) idleSince(now time.Time) time.Duration {
	col.mu.RLock()
	n := len(col.watches)
	col.mu.RUnlock()
	if n > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, col.lastUsed.Load()))
}

func (col *Collection) failed() error {
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.err
}

// sourceBuffer is how far a collection's store watch may fall behind before the store closes it (which reloads
// the collection and ends its watchers): a backlog costs its memory, a reload costs far more.
const sourceBuffer = 1 << 20

// run lists the resource, then follows the store's events until the collection fails or the cache closes.
func (col *Collection) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	col.mu.Lock()
	col.stop = cancel
	col.mu.Unlock()
	defer cancel()
	log := col.cache.cfg.Logger.With("cluster", col.kind.Cluster, "resource", col.kind.Resource)
	w, err := col.load(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("watch cache cannot load a collection", "err", err)
		}
		col.cache.drop(col)
		col.fail(fmt.Errorf("%w: %w", ErrReset, err))
		close(col.synced)
		return
	}
	close(col.synced)
	defer w.Stop()
	for ev := range w.Events() {
		if err := col.apply(ev); err != nil {
			log.Error("watch cache cannot decode an object; resetting the collection", "err", err)
			break
		}
	}
	col.cache.drop(col)
	if ctx.Err() != nil {
		col.fail(ErrClosed) // the cache closed (a dropped collection already failed with ErrReset)
		return
	}
	if err := w.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
		log.Warn("watch cache collection reset; its watchers resume", "err", err)
	}
	col.fail(ErrReset)
}

// load reads the resource at one revision and starts the store watch from it.
func (col *Collection) load(ctx context.Context) (*store.Watcher, error) {
	src := col.cache.cfg.Source
	opts := store.ListOptions{Cluster: col.kind.Cluster, Resource: col.kind.Resource, Limit: 1000}
	var rev int64
	if col.kind.Cluster == "" {
		// Every cluster: one scan of one snapshot (paging across clusters would read history).
		var err error
		rev, err = src.ScanResource(ctx, col.kind.Resource, func(so store.Object) error {
			obj, err := col.dec(so)
			if err != nil {
				return err
			}
			e := newEntry(so, obj)
			col.items.ReplaceOrInsert(e)
			col.indexPut(e)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for col.kind.Cluster != "" {
		page, err := src.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		rev = page.Revision
		for _, so := range page.Items {
			obj, err := col.dec(so)
			if err != nil {
				return nil, err
			}
			e := newEntry(so, obj)
			col.items.ReplaceOrInsert(e)
			col.indexPut(e)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	w, err := src.Watch(ctx, store.WatchOptions{Cluster: col.kind.Cluster, Resource: col.kind.Resource,
		Revision: rev, Progress: true, Buffer: sourceBuffer})
	if err != nil {
		return nil, err
	}
	col.mu.Lock()
	col.rev, col.changed, col.sw = rev, rev, w
	col.window.from = rev
	col.mu.Unlock()
	return w, nil
}

// apply folds one store event into the state and hands it to the watches.
func (col *Collection) apply(ev store.Event) error {
	if ev.Type == store.Bookmark {
		col.mu.Lock()
		defer col.mu.Unlock()
		if ev.Revision() > col.rev {
			col.advance(ev.Revision())
		}
		bm := Event{Type: store.Bookmark, Revision: col.rev}
		now := time.Now()
		for w := range col.watches {
			if every := w.opts.BookmarkEvery; every > 0 && now.Sub(w.lastBookmark) >= every {
				w.lastBookmark = now
				w.bookmark(bm)
			}
		}
		return nil
	}
	obj, err := col.dec(ev.Object)
	if err != nil {
		return err
	}
	e := newEntry(ev.Object, obj)
	col.mu.Lock()
	defer col.mu.Unlock()
	out := Event{Type: ev.Type, Revision: ev.Revision(), Object: e}
	if ev.Type == store.Deleted {
		out.Prev, _ = col.items.Delete(e)
	} else {
		out.Prev, _ = col.items.ReplaceOrInsert(e)
	}
	col.indexDel(out.Prev)
	if ev.Type != store.Deleted {
		col.indexPut(e)
	}
	col.window.push(out, time.Now())
	col.changed = ev.Revision()
	deliver := func(watches map[*Watch]struct{}) {
		for w := range watches {
			if w.wants(e) && w.accepts(out) && !w.push(out) {
				col.removeWatch(w)
				w.end(ErrSlow)
			}
		}
	}
	deliver(col.unindexed)
	if col.indexOf != nil && len(col.byValue) > 0 {
		v := col.indexOf(e.Object)
		deliver(col.byValue[v])
		if out.Prev != nil {
			if pv := col.indexOf(out.Prev.Object); pv != v {
				deliver(col.byValue[pv]) // the object left that value: its watchers see it go
			}
		}
	}
	col.advance(ev.Revision())
	return nil
}

// advance moves rev and wakes whoever waits for it; mu must be held.
func (col *Collection) advance(rev int64) {
	col.rev = rev
	close(col.advanced)
	col.advanced = make(chan struct{})
}

// fail ends the collection and its watches with err.
func (col *Collection) fail(err error) {
	col.mu.Lock()
	if col.err == nil {
		col.err = err
	}
	watches := col.watches
	col.watches, col.unindexed, col.byValue = map[*Watch]struct{}{}, map[*Watch]struct{}{}, map[string]map[*Watch]struct{}{}
	stop := col.stop
	col.mu.Unlock()
	for w := range watches {
		w.end(err)
	}
	if stop != nil {
		stop()
	}
}

// Revision is the revision the collection has reached.
func (col *Collection) Revision() int64 {
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.rev
}

// WaitFor returns once the collection has reached rev: ErrNotFresh after Config.FreshTimeout.
func (col *Collection) WaitFor(ctx context.Context, rev int64) error {
	col.touch()
	var timeout <-chan time.Time
	for {
		col.mu.RLock()
		cur, ch, err, sw := col.rev, col.advanced, col.err, col.sw
		col.mu.RUnlock()
		if err != nil {
			return err
		}
		if cur >= rev {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(col.cache.cfg.FreshTimeout)
			defer t.Stop()
			timeout = t.C
		}
		sw.RequestProgress(rev)
		select {
		case <-ch:
		case <-timeout:
			return fmt.Errorf("at revision %d, waiting for %d: %w", cur, rev, ErrNotFresh)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Fresh waits until the collection holds every write committed before the call (a consistent read, as
// upstream's consistent list from cache): it asks the store for its current revision and waits for it.
func (col *Collection) Fresh(ctx context.Context) error {
	rev, err := col.cache.cfg.Source.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	return col.WaitFor(ctx, rev)
}

// List returns the objects of namespace ("" for every namespace) in (namespace, name) order, and the
// revision they are the state at. The entries are shared: never modify them. (On a cross-cluster collection
// it lists cluster "" only: use ListIn.)
func (col *Collection) List(namespace string) ([]*Entry, int64) {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.listIn(col.kind.Cluster, namespace), col.rev
}

// ListIn is List for one cluster of a cross-cluster collection.
func (col *Collection) ListIn(cluster, namespace string) ([]*Entry, int64) {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.listIn(cluster, namespace), col.rev
}

// Changed is the revision of the last change the collection applied: it moves only when an object of the
// resource changes (not with the store's progress), so a reader can tell that derived state is still current.
func (col *Collection) Changed() int64 {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.changed
}

// ListChanged is List with Changed read in the same instant.
func (col *Collection) ListChanged(namespace string) ([]*Entry, int64) {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	return col.listIn(col.kind.Cluster, namespace), col.changed
}

// holdsCluster reports whether the collection holds an object of cluster; true while it is still loading (it
// may have read the cluster's objects before they were deleted).
func (col *Collection) holdsCluster(cluster string) bool {
	select {
	case <-col.synced:
	default:
		return true
	}
	col.mu.RLock()
	defer col.mu.RUnlock()
	found := false
	col.items.AscendGreaterOrEqual(&Entry{Cluster: cluster}, func(e *Entry) bool {
		found = e.Cluster == cluster
		return false
	})
	return found
}

// listIn is List's work: the entries of cluster (and namespace, unless ""); mu must be held.
func (col *Collection) listIn(cluster, namespace string) []*Entry {
	var out []*Entry
	if cluster == col.kind.Cluster && namespace == "" && cluster != "" {
		out = make([]*Entry, 0, col.items.Len())
	}
	col.items.AscendGreaterOrEqual(&Entry{Cluster: cluster, Namespace: namespace}, func(e *Entry) bool {
		if e.Cluster != cluster || namespace != "" && e.Namespace != namespace {
			return false
		}
		out = append(out, e)
		return true
	})
	return out
}

// Get returns one object and the collection's revision.
func (col *Collection) Get(namespace, name string) (*Entry, bool, int64) {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	e, ok := col.items.Get(&Entry{Cluster: col.kind.Cluster, Namespace: namespace, Name: name})
	return e, ok, col.rev
}

// GetIn is Get for one cluster of a cross-cluster collection.
func (col *Collection) GetIn(cluster, namespace, name string) (*Entry, bool, int64) {
	col.touch()
	col.mu.RLock()
	defer col.mu.RUnlock()
	e, ok := col.items.Get(&Entry{Cluster: cluster, Namespace: namespace, Name: name})
	return e, ok, col.rev
}

// ring is the window of recent events. It keeps at least min events and, up to max, every event younger than
// age (upstream's watch cache sizes itself the same way, 75 s and 100 Ki events): under a burst of writes a
// fixed count covers only seconds, and watchers resuming from before it fall back to the store all at once.
type ring struct {
	buf   []Event
	at    []time.Time // when each event arrived, parallel to buf
	start int         // index of the oldest event
	n     int
	// from: every event with a revision above it is in the window.
	from     int64
	min, max int
	age      time.Duration
}

func newRing(least, most int, age time.Duration) ring {
	return ring{buf: make([]Event, least), at: make([]time.Time, least), min: least, max: max(least, most), age: age}
}

func (r *ring) push(ev Event, now time.Time) {
	if r.n == len(r.buf) {
		switch size := len(r.buf); {
		case size < r.max && now.Sub(r.at[r.start]) < r.age:
			r.resize(min(2*size, r.max)) // the oldest event is still young: keep it
		case size > r.min && now.Sub(r.at[(r.start+size-size/2)%size]) > r.age:
			// All but fewer than size/2 events have aged out: give the memory back, keeping the young ones and
			// room for this one.
			r.resize(max(size/2, r.min))
		}
	}
	if r.n == len(r.buf) {
		r.from = r.buf[r.start].Revision
		r.buf[r.start], r.at[r.start] = ev, now
		r.start = (r.start + 1) % len(r.buf)
		return
	}
	i := (r.start + r.n) % len(r.buf)
	r.buf[i], r.at[i] = ev, now
	r.n++
}

// resize moves the window to a buffer of size events, dropping the oldest that do not fit.
func (r *ring) resize(size int) {
	buf, at := make([]Event, size), make([]time.Time, size)
	drop := max(r.n-size, 0)
	if drop > 0 {
		r.from = r.buf[(r.start+drop-1)%len(r.buf)].Revision
	}
	for i := drop; i < r.n; i++ {
		j := (r.start + i) % len(r.buf)
		buf[i-drop], at[i-drop] = r.buf[j], r.at[j]
	}
	r.buf, r.at, r.start, r.n = buf, at, 0, r.n-drop
}

// size is the window's current capacity.
func (r *ring) size() int { return len(r.buf) }

// after calls f for each event with a revision above rev, oldest first.
func (r *ring) after(rev int64, f func(Event)) {
	for i := range r.n {
		ev := r.buf[(r.start+i)%len(r.buf)]
		if ev.Revision > rev {
			f(ev)
		}
	}
}
