package web

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// Shared renders. Two hundred tabs showing the same list would otherwise render the same HTML two hundred times
// for every change (the perf harness's 200 tabs at 100 pod changes/s spent most of the server's CPU on it and fell
// tens of seconds behind). A region's HTML is a function of the collections it reads, its parameters, the clock
// (ages) and the authorization decisions its render made; so a render is kept and handed to every subscription
// with the same region and parameters whose user gets the same decisions, while the collections have not moved and
// for at most renderTTL. One render per key runs at a time; the others wait for it.

// renderTTL bounds how old a shared render may be (ages are shown to the second).
const renderTTL = time.Second

type renderKey struct{ kind, cluster, params string }

// decision is one authorization a render asked for (the user left out) and its answer.
type decision struct {
	attrs   kubeapi.Attributes
	allowed bool
}

type sharedRender struct {
	html      []byte
	revs      []int64 // the revision of each collection the region reads, taken before it rendered
	at        time.Time
	decisions []decision
}

type renderCache struct {
	mu       sync.Mutex
	renders  map[renderKey][]*sharedRender // the newest first
	inflight map[renderKey]chan struct{}
}

func newRenderCache() *renderCache {
	return &renderCache{renders: map[renderKey][]*sharedRender{}, inflight: map[renderKey]chan struct{}{}}
}

// keyOf is the shared render key of a region: its kind, cluster and parameters in a canonical order.
func keyOf(kind, cluster string, q url.Values) renderKey {
	return renderKey{kind: kind, cluster: cluster, params: q.Encode()}
}

// decisionLog collects the authorization decisions of one render (through the context).
type decisionLog struct {
	mu        sync.Mutex
	decisions []decision
}

type decisionLogKey struct{}

func withDecisionLog(ctx context.Context, r *decisionLog) context.Context {
	return context.WithValue(ctx, decisionLogKey{}, r)
}

func (r *decisionLog) add(a kubeapi.Attributes, allowed bool) {
	a.User = kubeapi.User{}
	r.mu.Lock()
	r.decisions = append(r.decisions, decision{attrs: a, allowed: allowed})
	r.mu.Unlock()
}

// recordDecision notes an authorization in ctx's render, if one is being recorded.
func recordDecision(ctx context.Context, a kubeapi.Attributes, allowed bool) {
	if r, ok := ctx.Value(decisionLogKey{}).(*decisionLog); ok {
		r.add(a, allowed)
	}
}

// render returns key's HTML for a user: a shared render if one is fresh (revs unchanged, younger than renderTTL)
// and the user gets the same answers to its authorization decisions; otherwise it renders (one render per key at a
// time) and shares the result. revs reads the region's collections' revisions now.
func (rc *renderCache) render(ctx context.Context, key renderKey, now func() time.Time, revs func() ([]int64, bool),
	same func(context.Context, []decision) (bool, error), do func(context.Context) ([]byte, error)) ([]byte, error) {
	for {
		current, ok := revs()
		if !ok {
			return do(ctx) // a collection it reads is not there: nothing to share
		}
		rc.mu.Lock()
		var fresh []*sharedRender
		for _, sr := range rc.renders[key] {
			if slices.Equal(sr.revs, current) && now().Sub(sr.at) < renderTTL {
				fresh = append(fresh, sr)
			}
		}
		rc.mu.Unlock()
		for _, sr := range fresh {
			ok, err := same(ctx, sr.decisions)
			if err != nil {
				return nil, err
			}
			if ok {
				return sr.html, nil
			}
		}
		rc.mu.Lock()
		if wait, busy := rc.inflight[key]; busy {
			rc.mu.Unlock()
			select {
			case <-wait:
				continue // look again: it may be what this caller needs, or already stale
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		rc.inflight[key] = done
		rc.mu.Unlock()

		rec := &decisionLog{}
		at := now()
		html, err := do(withDecisionLog(ctx, rec))
		rc.mu.Lock()
		delete(rc.inflight, key)
		if err == nil {
			// Keep the variants (one per set of answers: owners, viewers, ...) still fresh, and this one.
			sr := &sharedRender{html: html, revs: current, at: at, decisions: rec.decisions}
			kept := []*sharedRender{sr}
			for _, o := range rc.renders[key] {
				if slices.Equal(o.revs, current) && at.Sub(o.at) < renderTTL && len(kept) < maxVariants {
					kept = append(kept, o)
				}
			}
			rc.renders[key] = kept
		}
		if len(rc.renders) > maxSharedRenders {
			rc.sweepLocked(at)
		}
		rc.mu.Unlock()
		close(done)
		return html, err
	}
}

// maxSharedRenders is how many regions' renders are kept before the stale ones are dropped; maxVariants how many
// renders of one region (for users with different answers) are kept.
const (
	maxSharedRenders = 1024
	maxVariants      = 4
)

// sweepLocked drops renders older than renderTTL; rc.mu must be held.
func (rc *renderCache) sweepLocked(now time.Time) {
	for k, srs := range rc.renders {
		if now.Sub(srs[0].at) >= renderTTL {
			delete(rc.renders, k)
		}
	}
}
