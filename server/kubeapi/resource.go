package kubeapi

import (
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// serveResource routes a request that names a resource: scope and verb checks, authorization, in-flight limits,
// then the verb's handler.
func (rq *request) serveResource() error {
	ri := rq.info
	res, ok := rq.api.cfg.Registry.Lookup(ri.gv.WithResource(ri.plural))
	if !ok {
		return notFoundPath()
	}
	rq.res = res
	if gvr := res.GroupVersionResource(); gvr.Group == "coordination.k8s.io" && gvr.Resource == "leases" {
		// Heartbeats (node Leases, leader election) are written ahead of queued writes: one that times out
		// behind a burst makes a healthy node look lost (upstream: API priority and fairness's node-high and
		// leader-election levels).
		rq.ctx = store.WithPriority(rq.ctx)
	}
	if ri.namespace != "" && !res.Namespaced {
		return notFoundPath()
	}
	if res.Namespaced && ri.namespace == "" && ri.verb != "list" && ri.verb != "watch" {
		return notFoundPath()
	}
	if ri.verb == "" && !rq.isProxyOptions() {
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource")
	}
	if err := rq.checkSubresource(); err != nil {
		return err
	}
	if err := rq.authorize(Attributes{Verb: ri.verb, Group: ri.gv.Group, Resource: ri.plural,
		Subresource: ri.subresource, Namespace: ri.namespace, Name: ri.name}); err != nil {
		return err
	}
	if err := rq.checkStorable(); err != nil {
		return err
	}
	if ri.verb != "watch" && !rq.isConnect() { // connect subresources are long-running, like watches
		release, err := rq.acquire()
		if err != nil {
			return err
		}
		defer release()
	}
	if rq.r.Body != nil && !rq.isConnect() {
		// Bodies the API decodes are bounded; a connect subresource's streams to the kubelet or the pod, held
		// nowhere, and as upstream's is not.
		rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, rq.api.cfg.MaxBodyBytes)
	}
	return rq.dispatch()
}

func (rq *request) dispatch() error {
	ri := rq.info
	if rq.isConnect() {
		return rq.serveConnect()
	}
	switch ri.subresource {
	case "scale":
		return rq.serveScale()
	case "binding":
		return rq.serveBinding()
	case "token":
		return rq.serveTokenRequest()
	}
	switch ri.verb {
	case "get":
		return rq.get()
	case "list":
		return rq.list()
	case "watch":
		return rq.watch()
	case "create":
		return rq.create()
	case "update":
		return rq.update()
	case "patch":
		return rq.patch()
	case "delete":
		return rq.delete()
	case "deletecollection":
		return rq.deleteCollection()
	}
	return notFoundPath()
}

// checkSubresource refuses subresources and verbs the resource does not serve.
func (rq *request) checkSubresource() error {
	ri, res := rq.info, rq.res
	allowed := res.HasVerb(ri.verb)
	if ri.subresource != "" {
		allowed = false
		for _, s := range subresources(res) {
			if s.name == ri.subresource && (contains(s.verbs, ri.verb) || rq.isProxyOptions()) {
				allowed = true
			}
		}
		if ri.name == "" {
			return notFoundPath()
		}
	}
	if !allowed {
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource")
	}
	return nil
}

// acquire takes an in-flight slot. In-process requests take none: they are the control plane's own (the
// controllers and the scheduler, each bounded by its own workers), which upstream's priority levels
// (exempt, workload-high) keep from being crowded out by the clients they serve. Others wait for a slot up to
// Config.InFlightWait, as upstream's priority-and-fairness queues them, then get 429 with Retry-After; so do
// requests arriving while as many already wait as there are slots.
func (rq *request) acquire() (func(), error) {
	if exemptLocal(rq.r.Context()) {
		return func() {}, nil
	}
	slots, waiting := rq.api.readOnly, &rq.api.readOnlyWaiting
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		slots, waiting = rq.api.mutating, &rq.api.mutatingWaiting
	}
	release := func() { <-slots }
	select {
	case slots <- struct{}{}:
		return release, nil
	default:
	}
	tooMany := apierrors.NewTooManyRequests("too many requests in flight; retry shortly", 1)
	if rq.api.cfg.InFlightWait <= 0 {
		return nil, tooMany
	}
	if waiting.Add(1) > int64(cap(slots)) {
		waiting.Add(-1)
		return nil, tooMany
	}
	defer waiting.Add(-1)
	t := time.NewTimer(rq.api.cfg.InFlightWait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, tooMany
	case <-rq.ctx.Done():
		return nil, rq.ctx.Err()
	}
}

func notFoundPath() error {
	return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// readBody reads the request body; a body over the limit is 413.
func (rq *request) readBody() ([]byte, error) {
	if rq.r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(rq.r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if asMaxBytes(err, &mbe) {
			return nil, apierrors.NewRequestEntityTooLargeError("limit is " + formatBytes(mbe.Limit))
		}
		return nil, badRequestf("reading the request body failed")
	}
	return b, nil
}

func (rq *request) gr() schema.GroupResource { return rq.res.GroupVersionResource().GroupResource() }
