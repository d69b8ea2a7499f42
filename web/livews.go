package web

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

// The live endpoint: one websocket per tab, authenticated by the session cookie at the upgrade and
// Origin-checked (the upgrader's CheckOrigin), then web/live's protocol. Every region is rendered for the user
// as they are at that moment: their team membership is re-read at most every scopeTTL (a removed member's
// regions go within that time, their socket at the next session check) and RBAC is asked at every render (its
// memo follows role and binding changes through the watch cache).

// scopeTTL is how long a connection trusts a cluster's membership before reading it again.
const scopeTTL = 2 * time.Second

func (d *Dashboard) serveLive(c echo.Context) error {
	v := viewerOf(c)
	ws, err := d.upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader answered (a bad Origin is 403)
	}
	ls := &liveSession{d: d, v: v, scopes: map[string]cachedScope{}}
	opts := d.cfg.Live
	opts.Check = ls.check
	// The connection outlives the request's handler context only as long as the server runs.
	err = live.Serve(context.WithoutCancel(c.Request().Context()), ws, ls.resolve, opts)
	d.log.Debug("live connection ended", "user", v.sess.Email, "err", err)
	return nil
}

// liveSession resolves one tab's subscriptions.
type liveSession struct {
	d *Dashboard
	v *viewer

	mu     sync.Mutex
	scopes map[string]cachedScope
}

type cachedScope struct {
	s   *scope
	err error
	at  time.Time
}

// scope is the viewer's scope in cluster, read again after scopeTTL.
func (ls *liveSession) scope(ctx context.Context, cluster string) (*scope, error) {
	ls.mu.Lock()
	cs, ok := ls.scopes[cluster]
	ls.mu.Unlock()
	if ok && time.Since(cs.at) < scopeTTL {
		return cs.s, cs.err
	}
	s, err := ls.d.clusterScope(ctx, ls.v, cluster)
	if errors.Is(err, errNoAccess) {
		err = &live.Gone{Reason: "You are no longer a member of this cluster's team."}
	}
	if err == nil || errors.Is(err, errNoAccess) || isGone(err) {
		ls.mu.Lock()
		ls.scopes[cluster] = cachedScope{s: s, err: err, at: time.Now()}
		ls.mu.Unlock()
	}
	return s, err
}

// check runs every few seconds: a session that ended, or a membership removed from a cluster the tab shows,
// ends the connection (the tab replaces what it showed with the reason); a changed team role renders every region
// again, as the new role's RBAC allows. A database hiccup does nothing.
func (ls *liveSession) check(ctx context.Context) error {
	if _, err := ls.d.cfg.Tenancy.Session(ctx, ls.v.sessionID); errors.Is(err, tenancy.ErrUnauthenticated) || errors.Is(err, tenancy.ErrNotFound) {
		return &live.Gone{Reason: "You have been signed out. Sign in again to see live updates."}
	}
	ls.mu.Lock()
	clusters := make([]string, 0, len(ls.scopes))
	for c, cs := range ls.scopes {
		if cs.err == nil { // only clusters the tab was allowed to see; a refused subscription ends nothing
			clusters = append(clusters, c)
		}
	}
	ls.mu.Unlock()
	refresh := false
	for _, c := range clusters {
		ls.mu.Lock()
		before := ls.scopes[c].s
		delete(ls.scopes, c) // read the membership again
		ls.mu.Unlock()
		s, err := ls.scope(ctx, c)
		if isGone(err) {
			return err
		}
		if err == nil && before != nil && s.team.Role != before.team.Role {
			refresh = true // another team role: other RBAC groups, which no region's watch reports
		}
	}
	if refresh {
		return live.ErrRefresh
	}
	return nil
}

func isGone(err error) bool {
	var g *live.Gone
	return errors.As(err, &g)
}

func (ls *liveSession) resolve(ctx context.Context, kind, params string) (live.Region, error) {
	spec, ok := regionSpecs[kind]
	if !ok {
		return nil, &live.Gone{Reason: "unknown region " + kind}
	}
	q, err := url.ParseQuery(params)
	if err != nil {
		return nil, &live.Gone{Reason: "bad region parameters"}
	}
	cluster := q.Get("cluster")
	if _, err := ls.scope(ctx, cluster); err != nil {
		return nil, err
	}
	deps, err := spec.deps(ls.d, q)
	if err != nil {
		return nil, err
	}
	return &region{ls: ls, kind: kind, spec: spec, q: q, cluster: cluster, deps: deps}, nil
}

// region is one live region of a tab.
type region struct {
	ls      *liveSession
	kind    string
	spec    regionSpec
	q       url.Values
	cluster string
	deps    []dep
}

// Render renders the region for the user now, sharing the render of other tabs showing the same region with the
// same permissions (rendercache.go).
func (r *region) Render(ctx context.Context) ([]byte, error) {
	s, err := r.ls.scope(ctx, r.cluster)
	if err != nil {
		return nil, err
	}
	d := r.ls.d
	revs := func() ([]int64, bool) {
		out := make([]int64, len(r.deps))
		for i, dp := range r.deps {
			col, err := d.collection(ctx, s, dp.res)
			if err != nil {
				return nil, false
			}
			out[i] = col.Revision()
		}
		return out, true
	}
	same := func(ctx context.Context, ds []decision) (bool, error) { return d.sameDecisions(ctx, s, ds) }
	return d.renders.render(ctx, keyOf(r.kind, r.cluster, r.q), d.cfg.Now, revs, same, func(ctx context.Context) ([]byte, error) {
		c, err := r.spec.render(ctx, d, s, r.q)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := c.Render(ctx, &buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
}

// Watch follows the region's collections (and the cluster's RBAC objects, whose changes may change what the
// user may see) and calls changed on every change.
func (r *region) Watch(ctx context.Context, changed func()) error {
	s, err := r.ls.scope(ctx, r.cluster)
	if err != nil {
		return err
	}
	deps := append([]dep(nil), r.deps...)
	for _, k := range []string{"roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
		"clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io"} {
		if res := r.ls.d.byKey[k]; res != nil {
			deps = append(deps, dep{res: res})
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(deps))
	for _, dp := range deps {
		col, err := r.ls.d.collection(ctx, s, dp.res)
		if err != nil {
			return err
		}
		ns := dp.namespace
		if !dp.res.Namespaced {
			ns = ""
		}
		w, err := col.Watch(ctx, watchcache.WatchOptions{Namespace: ns})
		if err != nil {
			return err
		}
		go func() { errs <- follow(ctx, w, changed) }()
	}
	return <-errs
}

// follow calls changed for every batch of events of w until ctx ends or w fails.
func follow(ctx context.Context, w *watchcache.Watch, changed func()) error {
	defer w.Stop()
	var spare []watchcache.Event
	for {
		evs, err := w.Next(ctx, spare[:0])
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Type != store.Bookmark {
				changed()
				break
			}
		}
		spare = evs
	}
}
