package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// minWatchTimeout is upstream's --min-request-timeout: every watch ends after a random time between it and
// twice it (upstream's choice for watches without timeoutSeconds), and timeoutSeconds can only shorten that, so
// no watch outlives an hour without its client authenticating again (docs/design/revocation.md).
const minWatchTimeout = 30 * time.Minute

// watchTimeout is the longest a new watch may last: random in [minWatchTimeout, 2*minWatchTimeout), so that
// watches started together do not all end (and come back) together.
func watchTimeout() time.Duration {
	return minWatchTimeout + rand.N(minWatchTimeout)
}

// initialEventsEnd is the annotation of the bookmark that ends the initial events of a WatchList.
const initialEventsEnd = "k8s.io/initial-events-end"

// watchParams are a watch request's parameters.
type watchParams struct {
	sel           selector
	rv            int64
	rvStr         string
	rvSet         bool // resourceVersion given and not "0"
	bookmarks     bool
	initialEvents *bool
	timeout       time.Duration
}

func (rq *request) watchParams() (watchParams, error) {
	q := rq.r.URL.Query()
	var p watchParams
	var err error
	if p.sel, err = rq.selectors(q.Get("labelSelector"), q.Get("fieldSelector")); err != nil {
		return p, err
	}
	rvStr := q.Get("resourceVersion")
	if p.rv, err = parseRV(rvStr); err != nil {
		return p, err
	}
	p.rvStr, p.rvSet = rvStr, rvStr != "" && rvStr != "0"
	p.bookmarks = q.Get("allowWatchBookmarks") == "true"
	if v := q.Get("sendInitialEvents"); v != "" {
		b := v == "true"
		p.initialEvents = &b
		var errs field.ErrorList
		if b && q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"),
				"sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
		}
		if b && !p.bookmarks {
			errs = append(errs, field.Forbidden(field.NewPath("allowWatchBookmarks"),
				"sendInitialEvents requires setting allowWatchBookmarks to true"))
		}
		if len(errs) > 0 {
			return p, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", errs)
		}
	}
	p.timeout = watchTimeout()
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return p, badRequestf("invalid timeoutSeconds %q", v)
		}
		if n > 0 && n < int64(p.timeout/time.Second) {
			p.timeout = time.Duration(n) * time.Second
		}
	}
	return p, nil
}

// watch serves a WATCH: initial events when asked (or implied by resourceVersion "" / "0"), then every change
// after the starting revision that matches the selectors, with objects entering or leaving a selector seen as
// ADDED / DELETED, bookmarks when allowed, until timeoutSeconds, the client leaving or the server stopping.
func (rq *request) watch() error {
	p, err := rq.watchParams()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(rq.ctx, p.timeout)
	defer cancel()
	ws := &watchStream{rq: rq, p: p, in: map[string]bool{}, cancel: cancel}
	initial := !p.rvSet
	if p.initialEvents != nil {
		initial = *p.initialEvents
	}
	release := func() {}
	if col := rq.collection(rq.res); col != nil {
		if served, err := ws.watchFromCache(ctx, col, initial); served {
			return err
		}
		// The store sets this watch up (its state and history): a bounded store read.
		if release, err = rq.storeFallback(); err != nil {
			return err
		}
	}
	defer func() { release() }()
	var pending []runtime.Object
	from := p.rv
	switch {
	case initial:
		items, rev, err := ws.state(0)
		if err != nil {
			return err
		}
		pending, from = items, rev
	case !p.rvSet:
		rev, err := rq.api.cfg.Storage.CurrentRevision(rq.ctx)
		if err != nil {
			return storeError(err, rq.gr(), "")
		}
		from = rev
		if _, _, err := ws.state(rev); err != nil {
			return err
		}
	default:
		if !ws.p.sel.empty() {
			if _, _, err := ws.state(from); err != nil {
				return err
			}
		}
	}
	w, err := rq.api.cfg.Storage.Watch(ctx, store.WatchOptions{Cluster: rq.cluster.ID, Resource: rq.res.Storage,
		Namespace: rq.info.namespace, Name: p.sel.name(), Revision: from, Progress: p.bookmarks})
	if err != nil {
		return storeError(err, rq.gr(), "")
	}
	release()
	release = func() {}
	defer w.Stop()
	if err := ws.start(); errors.Is(err, errWebSocketHandled) {
		return nil
	} else if err != nil {
		return err
	}
	if ws.closer != nil {
		defer ws.closer()
	}
	for _, obj := range pending {
		ws.send(watch.Added, obj)
	}
	if initial && p.initialEvents != nil && *p.initialEvents {
		ws.bookmark(from, true)
	}
	ws.flush()
	ws.loop(ctx, w)
	return nil
}

// watchStream writes watch events to one client.
type watchStream struct {
	rq  *request
	p   watchParams
	in  map[string]bool // with selectors: keys currently matching, to turn entering/leaving into ADDED/DELETED
	enc runtime.Encoder
	out streaming.Encoder
	fl  http.Flusher
	// encKey names enc's format in the shared encodings.
	encKey string
	// cancel ends the watch (a WebSocket client closed); closer closes a WebSocket at the end.
	cancel func()
	closer func() error
	// lastBookmark is when the stream last sent a progress bookmark (see watchBookmarkInterval).
	lastBookmark time.Time
}

// watchBookmarkInterval spaces the progress bookmarks of one watch stream. The store and the cache advance
// every second; passing each advance to every watcher that allows bookmarks costs an encoded event per watcher
// per second (a thousand node agents' pod watches: a thousand a second) for nothing a client needs that often.
// Upstream sends a watcher about one a minute; the initial-events-end bookmark is not spaced.
const watchBookmarkInterval = 10 * time.Second

// progress sends a progress bookmark at rev if the watch allows bookmarks and none went out lately.
func (ws *watchStream) progress(rev int64) {
	if !ws.p.bookmarks {
		return
	}
	now := time.Now()
	if now.Sub(ws.lastBookmark) < watchBookmarkInterval {
		return
	}
	ws.lastBookmark = now
	ws.bookmark(rev, false)
}

// errWebSocketHandled: a failed upgrade was already answered.
var errWebSocketHandled = errors.New("kubeapi: websocket upgrade answered")

// state lists the matching objects at rev (0: now) and records which keys match.
func (ws *watchStream) state(rev int64) ([]runtime.Object, int64, error) {
	items, listRev, _, err := ws.rq.listFiltered(store.ListOptions{Cluster: ws.rq.cluster.ID,
		Resource: ws.rq.res.Storage, Namespace: ws.rq.info.namespace, Revision: rev}, ws.p.sel)
	if err != nil {
		return nil, 0, err
	}
	for _, obj := range items {
		m := mustAccessor(obj)
		ws.in[m.GetNamespace()+"/"+m.GetName()] = true
	}
	return items, listRev, nil
}

func (ws *watchStream) start() error {
	rq := ws.rq
	if websocket.IsWebSocketUpgrade(rq.r) {
		return ws.startWebSocket()
	}
	info := rq.out.info
	if info.StreamSerializer == nil {
		return statusErr(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "watch is not supported in "+info.MediaType)
	}
	ws.enc, ws.encKey = info.Serializer, info.MediaType
	ws.out = streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(rq.w), info.StreamSerializer.Serializer)
	ws.fl, _ = rq.w.(http.Flusher)
	ct := info.MediaType + ";stream=watch"
	if rq.out.as == "Table" {
		ct = info.MediaType + ";as=Table;g=meta.k8s.io;v=v1;stream=watch"
	}
	rq.w.Header().Set("Content-Type", ct)
	rq.w.Header().Set("Transfer-Encoding", "chunked")
	rq.w.WriteHeader(http.StatusOK)
	ws.flush()
	return nil
}

func (ws *watchStream) loop(ctx context.Context, w *store.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events():
			if !ok {
				ws.finish(w.Err())
				return
			}
			ws.event(ev)
			for drained := false; !drained; {
				select {
				case ev, ok := <-w.Events():
					if !ok {
						ws.flush()
						ws.finish(w.Err())
						return
					}
					ws.event(ev)
				default:
					drained = true
				}
			}
			ws.flush()
		}
	}
}

// finish reports why the store watch ended: compaction as a 410 ERROR event; a slow watcher or shutdown just
// ends the stream (the client resumes from its last resourceVersion).
func (ws *watchStream) finish(err error) {
	if errors.Is(err, store.ErrCompacted) {
		st := statusFor(apierrors.NewResourceExpired("too old resource version"))
		ws.send(watch.Error, &st)
		ws.flush()
	}
}

func (ws *watchStream) event(ev store.Event) {
	if ev.Type == store.Bookmark {
		ws.progress(ev.Revision())
		return
	}
	shared, err := ws.rq.api.shared.object(ws.rq.res, ev.Object)
	if err != nil {
		ws.rq.api.log.Error("decoding a watched object failed", "err", err, "key", ev.Object.Key.String())
		return
	}
	// Store events carry no previous state: with selectors, in remembers which keys matched.
	k := ev.Object.Namespace + "/" + ev.Object.Name
	matches := ev.Type != store.Deleted && ws.p.sel.matches(ws.rq.res, shared.Object)
	var was bool
	switch ev.Type {
	case store.Modified:
		was = ws.in[k] || ws.p.sel.empty()
	case store.Deleted:
		was = ws.in[k] || ws.p.sel.matches(ws.rq.res, shared.Object)
	}
	ws.deliver(was, matches, shared)
	if !ws.p.sel.empty() {
		if matches {
			ws.in[k] = true
		} else {
			delete(ws.in, k)
		}
	}
}

// bookmark sends a BOOKMARK at rev; initialEnd marks the end of a WatchList's initial events.
func (ws *watchStream) bookmark(rev int64, initialEnd bool) {
	obj := ws.rq.res.New()
	setGVK(ws.rq.res, obj)
	m := mustAccessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	ws.send(watch.Bookmark, obj)
}

// sendShared sends an event whose object other watchers may send too: its encoding is made once.
func (ws *watchStream) sendShared(t watch.EventType, o *watchcache.Entry) {
	if ws.rq.out.as != "" {
		ws.send(t, o.Object) // transformed per request (Table, metadata)
		return
	}
	raw, err := o.Encoded(ws.encKey, ws.enc)
	if err != nil {
		ws.rq.api.log.Error("encoding a watch event failed", "err", err)
		return
	}
	_ = ws.out.Encode(&metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: raw}})
}

func (ws *watchStream) send(t watch.EventType, obj runtime.Object) {
	if ws.rq.out.as == "Table" && t != watch.Error && t != watch.Bookmark {
		m := mustAccessor(obj)
		obj = ws.rq.table([]runtime.Object{obj}, metav1.ListMeta{ResourceVersion: m.GetResourceVersion()})
	} else if ws.rq.out.as == "PartialObjectMetadata" && t != watch.Error {
		obj = partial(obj)
	}
	var buf bytes.Buffer
	if err := ws.enc.Encode(obj, &buf); err != nil {
		ws.rq.api.log.Error("encoding a watch event failed", "err", err)
		return
	}
	_ = ws.out.Encode(&metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: buf.Bytes()}})
}

func (ws *watchStream) flush() {
	if ws.fl != nil {
		ws.fl.Flush()
	}
}
