package kubeapi

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Reads served from the watch cache (server/watchcache). Every path here falls back to the store when the cache
// cannot answer exactly (a revision before its window, a cache that did not catch up in time, a reset): the
// store is always right, the cache is only faster. The rules are in docs/design/kubeapi.md.

// collection is res's cached collection in the request's cluster, or nil (cache disabled or not available).
func (rq *request) collection(res *resources.Resource) *watchcache.Collection {
	if rq.api.cfg.DisableWatchCache {
		return nil
	}
	col, err := rq.api.collection(rq.ctx, rq.cluster.ID, res)
	if err != nil {
		if rq.ctx.Err() == nil {
			rq.api.log.Debug("watch cache unavailable; reading the store", "err", err, "resource", res.Storage)
		}
		return nil
	}
	return col
}

// Collection is res's watch-cache collection in cluster, decoded as the API serves it; cluster "" is the
// cross-cluster collection the controllers and the scheduler follow. Its entries are shared and read-only.
func (a *API) Collection(ctx context.Context, cluster string, res *resources.Resource) (*watchcache.Collection, error) {
	return a.collection(ctx, cluster, res)
}

// collection is res's cached collection in cluster.
func (a *API) collection(ctx context.Context, cluster string, res *resources.Resource) (*watchcache.Collection, error) {
	if a.cache == nil {
		return nil, errNoCache
	}
	return a.cache.Collection(ctx, cacheKind(cluster, res), func(so store.Object) (runtime.Object, error) {
		if obj := a.written.take(so.Key, so.Revision, so.Value, res.GVK); obj != nil {
			return obj, nil
		}
		return decodeStored(res, so)
	})
}

func cacheKind(cluster string, res *resources.Resource) watchcache.Kind {
	return watchcache.Kind{Cluster: cluster, Resource: res.Storage, Type: res.GVK.String()}
}

// cachedCopy is a copy of the object from a watch-cache collection already running (the cluster's own, else the
// cross-cluster one the controllers and the scheduler keep), with its revision; ok is false when no running
// collection holds it. The copy may be behind the store.
func (rq *request) cachedCopy(namespace, name string) (obj runtime.Object, rev int64, ok bool) {
	if rq.api.cache == nil || rq.api.cfg.DisableWatchCache {
		return nil, 0, false
	}
	var e *watchcache.Entry
	if col := rq.api.cache.Peek(cacheKind(rq.cluster.ID, rq.res)); col != nil {
		e, ok, _ = col.Get(namespace, name)
	} else if col := rq.api.cache.Peek(cacheKind("", rq.res)); col != nil {
		e, ok, _ = col.GetIn(rq.cluster.ID, namespace, name)
	}
	if !ok {
		return nil, 0, false
	}
	return e.Object.DeepCopyObject(), e.Revision, true
}

var errNoCache = errors.New("kubeapi: no watch cache (Storage cannot feed one)")

// listFromCache serves a LIST from the cache when its resourceVersion rules allow: "0" (any recent state;
// limit is ignored, as upstream's cache does), "" (consistent: the cache first catches up with the store's
// current revision), or N with NotOlderThan semantics (the cache first reaches N). A limited list is read from a
// snapshot of the cache at its revision and answers a continue token in the store's format: the next pages come
// from that snapshot while the cache keeps it (a minute after its last use), else from the store's history at
// the same revision. Exact reads go to the store; so does any list the cache cannot serve in time.
func (rq *request) listFromCache(q url.Values, opts store.ListOptions, sel selector) (items []runtime.Object,
	rev int64, cont string, handled bool, err error) {
	if opts.Revision != 0 {
		return nil, 0, "", false, nil
	}
	col := rq.collection(rq.res)
	if col == nil {
		return nil, 0, "", false, nil
	}
	limit := opts.Limit
	var snap *watchcache.Snapshot
	afterNS, afterName := "", ""
	switch rv := q.Get("resourceVersion"); {
	case opts.Continue != "":
		r, ns, name, err := store.ParseContinue(opts.Continue)
		if err != nil {
			return nil, 0, "", true, storeError(err, rq.gr(), "")
		}
		s, ok := col.SnapshotAt(r)
		if !ok {
			return nil, 0, "", false, nil // the store continues it from its history
		}
		snap, afterNS, afterName = s, ns, name
	case rv == "0":
		limit = 0
	case rv == "":
		if col.Fresh(rq.ctx) != nil {
			return nil, 0, "", false, nil
		}
	default:
		n, err := parseRV(rv)
		if err != nil {
			return nil, 0, "", true, err
		}
		if err := rq.waitForCache(col, n); err != nil || rq.ctx.Err() != nil {
			return nil, 0, "", err != nil, err
		}
	}
	if limit == 0 && snap == nil {
		entries, rev := col.List(rq.info.namespace)
		for _, e := range entries {
			if sel.matches(rq.res, e.Object) {
				items = append(items, e.Object)
			}
		}
		return items, rev, "", true, nil
	}
	if snap == nil {
		snap = col.Snapshot()
	}
	var last *watchcache.Entry
	more := false
	snap.Ascend(rq.info.namespace, afterNS, afterName, func(e *watchcache.Entry) bool {
		if !sel.matches(rq.res, e.Object) {
			return true
		}
		if limit > 0 && len(items) == limit {
			more = true // a later item matches: the list goes on
			return false
		}
		items, last = append(items, e.Object), e
		return true
	})
	if more && last != nil {
		cont = store.ContinueToken(snap.Revision, last.Namespace, last.Name)
	}
	return items, snap.Revision, cont, true, nil
}

// waitForCache waits for col to reach rv. A revision the store has not reached either is 504 "Too large
// resource version" (as upstream answers after the same wait); any other miss returns nil with the cache
// still behind, and the caller reads the store.
func (rq *request) waitForCache(col *watchcache.Collection, rv int64) error {
	err := col.WaitFor(rq.ctx, rv)
	if err == nil || !errors.Is(err, watchcache.ErrNotFresh) {
		return nil
	}
	if cur, cerr := rq.api.cfg.Storage.CurrentRevision(rq.ctx); cerr == nil && rv > cur {
		return storeError(store.ErrFutureRevision, rq.gr(), "")
	}
	return nil
}

// storeFallbackWait is how long a read the cache cannot serve waits for a store slot before its 429.
const storeFallbackWait = time.Second

// storeFallback takes a slot for reading the store in place of the cache (Config.MaxStoreFallbacks); with none
// free within storeFallbackWait the request is answered 429, and its client retries after a second, by when the
// cache has usually caught up. The release func frees the slot.
func (rq *request) storeFallback() (func(), error) {
	select {
	case rq.api.fallbacks <- struct{}{}:
		return func() { <-rq.api.fallbacks }, nil
	default:
	}
	t := time.NewTimer(storeFallbackWait)
	defer t.Stop()
	select {
	case rq.api.fallbacks <- struct{}{}:
		return func() { <-rq.api.fallbacks }, nil
	case <-t.C:
		return nil, apierrors.NewTooManyRequests("the watch cache is behind and the store is busy; retry shortly", 1)
	case <-rq.ctx.Done():
		return nil, rq.ctx.Err()
	}
}

// watchFromCache serves a WATCH from the cache. It returns false, having written nothing, when the cache cannot
// serve this watch exactly; the caller then watches the store.
func (ws *watchStream) watchFromCache(ctx context.Context, col *watchcache.Collection, initial bool) (bool, error) {
	rq, p := ws.rq, ws.p
	opts := watchcache.WatchOptions{Namespace: rq.info.namespace, Name: p.sel.name(), Filter: p.sel.watchFilter(rq.res)}
	if col.Indexed() {
		opts.IndexValue, opts.Indexed = p.sel.cacheIndexValue(rq.res)
	}
	if p.bookmarks {
		opts.BookmarkEvery = watchBookmarkInterval
	}
	switch {
	case initial && !p.rvSet:
		opts.Initial = true
		if p.rvStr == "" && col.Fresh(ctx) != nil { // consistent initial state
			return false, nil
		}
	case initial:
		opts.Initial = true
		if col.WaitFor(ctx, p.rv) != nil {
			return false, nil
		}
	case !p.rvSet:
		if p.rvStr == "" && col.Fresh(ctx) != nil {
			return false, nil
		}
	default:
		opts.Revision = p.rv
	}
	w, err := col.Watch(ctx, opts)
	if err != nil {
		return false, nil
	}
	defer w.Stop()
	if err := ws.start(); errors.Is(err, errWebSocketHandled) {
		return true, nil
	} else if err != nil {
		return true, err
	}
	if ws.closer != nil {
		defer ws.closer()
	}
	for _, e := range w.Initial {
		if p.sel.matches(rq.res, e.Object) {
			ws.sendShared(watch.Added, e)
		}
	}
	if initial && p.initialEvents != nil && *p.initialEvents {
		ws.bookmark(w.Start, true)
	}
	ws.flush()
	var spare []watchcache.Event
	for {
		evs, err := w.Next(ctx, spare)
		if err != nil {
			// A slow client, a reset collection or shutdown ends the stream; the client resumes from its last
			// resourceVersion (from the cache's window or the store's history).
			return true, nil
		}
		for i, ev := range evs {
			ws.cacheEvent(ev)
			evs[i] = watchcache.Event{}
		}
		ws.flush()
		spare = evs
	}
}

// cacheEvent sends one cached event; the previous state it carries tells an object entering or leaving the
// watch's selectors from a plain change.
func (ws *watchStream) cacheEvent(ev watchcache.Event) {
	if ev.Type == store.Bookmark {
		if ws.p.bookmarks { // the cache spaces them (WatchOptions.BookmarkEvery)
			ws.bookmark(ev.Revision, false)
		}
		return
	}
	res, sel, obj := ws.rq.res, ws.p.sel, ev.Object.Object
	var was, matches bool
	switch ev.Type {
	case store.Added:
		matches = sel.matches(res, obj)
	case store.Modified:
		matches = sel.matches(res, obj)
		was = ev.Prev != nil && sel.matches(res, ev.Prev.Object)
	case store.Deleted:
		was = sel.matches(res, obj)
	}
	ws.deliver(was, matches, ev.Object)
}

// deliver sends a change given whether the object matched the watch before and matches it now.
func (ws *watchStream) deliver(was, matches bool, e *watchcache.Entry) {
	switch {
	case matches && !was:
		ws.sendShared(watch.Added, e)
	case matches:
		ws.sendShared(watch.Modified, e)
	case was:
		ws.sendShared(watch.Deleted, e)
	}
}

// namespaceFromCache reports a namespace the cache knows to exist and not to be terminating. Any other answer
// (unknown, terminating, cache unavailable) is checked against the store, so a namespace created a moment ago
// is never refused.
func (rq *request) namespaceFromCache(ns string) bool {
	if rq.api.liveNamespaces.has(rq.cluster.ID+"/"+ns, rq.api.cfg.Now()) {
		return false
	}
	res, ok := rq.api.cfg.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if !ok {
		return false
	}
	col := rq.collection(res)
	if col == nil {
		return false
	}
	e, ok, _ := col.Get("", ns)
	if !ok {
		return false
	}
	nsObj, ok := e.Object.(*corev1.Namespace)
	return ok && nsObj.DeletionTimestamp == nil && nsObj.Status.Phase != corev1.NamespaceTerminating
}

// liveLookupTTL is how long a namespace deleted by this process is checked in the store rather than the cache
// (upstream's namespace lifecycle admission uses the same idea and period): the cache may not have seen the
// deletion yet. Deletions by other replicas are seen through the cache, a few milliseconds late, as upstream.
const liveLookupTTL = 30 * time.Second

// liveLookups is a set of keys with an expiry.
type liveLookups struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (l *liveLookups) add(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, t := range l.until {
		if now.After(t) {
			delete(l.until, k)
		}
	}
	l.until[key] = now.Add(liveLookupTTL)
}

func (l *liveLookups) has(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.until[key]
	return ok && now.Before(t)
}
