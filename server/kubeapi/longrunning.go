package kubeapi

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Long-running requests (watches, exec, attach, port-forward, logs, node proxy) are authenticated and
// authorized once, when they start, and may then live for an hour. So that none outlives the access it was
// granted on, the API keeps each one while it runs: a re-check (RecheckLongRunning, called when some identity
// lost access on any replica) authenticates its credential again and re-authorizes every decision it was
// granted, and ends it on a refusal; EndCluster ends a deleted cluster's at once. See
// docs/design/revocation.md.

// ErrAccessRevoked is the cause of a long-running request's context when a re-check ended it.
var ErrAccessRevoked = errors.New("kubeapi: access revoked")

// longRunning is one long-running request in flight.
type longRunning struct {
	cluster string
	cancel  context.CancelCauseFunc
	// reauth authenticates the request's credential again (nil for requests of the server's own components,
	// which are never re-checked).
	reauth func(ctx context.Context) (User, error)

	mu sync.Mutex // guards the fields below
	// caller is who the credential authenticated as; granted the decisions made for the request, each with
	// whether it was made for the caller (before impersonation) or for the user it impersonates.
	caller  User
	granted []grant
}

type grant struct {
	attrs    Attributes
	asCaller bool
}

// longRunningSet is the API's set of long-running requests.
type longRunningSet struct {
	mu  sync.Mutex // guards all; never held across a check
	all map[*longRunning]struct{}
}

// isLongRunning reports whether a request of info stays open: a watch, or a connect subresource (which only
// pods and nodes have; the Connector tells the rest apart).
func isLongRunning(info requestInfo) bool {
	if info.verb == "watch" {
		return true
	}
	switch info.subresource {
	case "exec", "attach", "portforward", "log", "proxy":
		return true
	}
	return false
}

// trackLongRunning registers rq while it runs, when it is long-running and made with a credential, and returns
// the function that forgets it. rq.ctx and rq.r then carry a context that a re-check cancels.
func (rq *request) trackLongRunning() func() {
	if !isLongRunning(rq.info) {
		return func() {}
	}
	if _, local := localUser(rq.ctx); local {
		return func() {}
	}
	// A copy of the request as authenticated: re-checks run its authentication again with their own context,
	// never touching the live request's fields.
	snapshot := *rq
	ctx, cancel := context.WithCancelCause(rq.ctx)
	rq.ctx = ctx
	rq.r = rq.r.WithContext(ctx)
	lr := &longRunning{cluster: rq.cluster.ID, cancel: cancel, caller: rq.user,
		reauth: func(ctx context.Context) (User, error) {
			again := snapshot
			again.ctx = ctx
			return again.authenticate()
		}}
	rq.lr = lr
	s := &rq.api.longRunning
	s.mu.Lock()
	if s.all == nil {
		s.all = map[*longRunning]struct{}{}
	}
	s.all[lr] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.all, lr)
		s.mu.Unlock()
		cancel(context.Canceled)
	}
}

// granted records that attrs were allowed for rq (for re-checks), if rq is tracked.
func (rq *request) granted(attrs Attributes) {
	if rq.lr == nil {
		return
	}
	rq.lr.mu.Lock()
	rq.lr.granted = append(rq.lr.granted, grant{attrs: attrs, asCaller: !rq.impersonating})
	rq.lr.mu.Unlock()
}

// matching returns the long-running requests for which match is true.
func (s *longRunningSet) matching(match func(cluster string, caller User) bool) []*longRunning {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*longRunning
	for lr := range s.all {
		lr.mu.Lock()
		caller := lr.caller
		lr.mu.Unlock()
		if match(lr.cluster, caller) {
			out = append(out, lr)
		}
	}
	return out
}

// EndCluster ends every long-running request of cluster (a deleted cluster); clients see their streams end.
func (a *API) EndCluster(cluster string) {
	for _, lr := range a.longRunning.matching(func(c string, _ User) bool { return c == cluster }) {
		lr.cancel(ErrAccessRevoked)
	}
}

// RecheckLongRunning re-checks the long-running requests whose cluster and caller (the identity their
// credential authenticated as, before any impersonation) match: their credential is authenticated again and
// every decision they were granted authorized again, for the caller as it is now. A request that is refused
// either ends (its context is canceled with ErrAccessRevoked); one whose check fails for another reason (the
// database is briefly away) goes on. It returns the number of requests it ended.
func (a *API) RecheckLongRunning(ctx context.Context, match func(cluster string, caller User) bool) int {
	ended := 0
	for _, lr := range a.longRunning.matching(match) {
		if lr.reauth == nil || ctx.Err() != nil {
			continue
		}
		ok, err := a.recheck(ctx, lr)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				a.log.Warn("cannot re-check a long-running request; it goes on", "cluster", lr.cluster, "err", err)
			}
		case !ok:
			a.log.Info("ending a long-running request whose access was revoked", "cluster", lr.cluster, "user", lr.caller.Name)
			lr.cancel(ErrAccessRevoked)
			ended++
		}
	}
	return ended
}

// recheck authenticates lr again and re-authorizes its grants: false when any is refused.
func (a *API) recheck(ctx context.Context, lr *longRunning) (bool, error) {
	caller, err := lr.reauth(ctx)
	switch {
	case errors.Is(err, ErrClusterNotFound), apierrors.IsUnauthorized(err):
		return false, nil
	case err != nil:
		return false, err
	}
	lr.mu.Lock()
	granted := append([]grant(nil), lr.granted...)
	lr.caller = caller
	lr.mu.Unlock()
	for _, g := range granted {
		attrs := g.attrs
		if g.asCaller {
			attrs.User = caller
		} else {
			attrs.User.Revision = caller.Revision // the impersonated identity, decided on RBAC as new as the caller's
		}
		ok, _, err := a.cfg.Authorizer.Authorize(ctx, attrs)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
