package kubeapi

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
)

// In-process clients: the server's own components (controllers, scheduler) are API clients like any other —
// same validation, admission, RBAC and audit — but they need neither a socket nor a token. LocalConfig gives a
// client-go rest.Config whose transport hands each request to this API's handler in process, authenticated as
// the given user.

type localUserKey struct{}

// localCaller is who an in-process request runs as; exempt requests (the control plane's own) take no in-flight
// slot.
type localCaller struct {
	user   User
	exempt bool
}

// localUser is the user a LocalTransport request runs as; an HTTP client cannot set a context value, so it
// cannot pose as one.
func localUser(ctx context.Context) (User, bool) {
	c, ok := ctx.Value(localUserKey{}).(localCaller)
	return c.user, ok
}

// exemptLocal reports whether ctx is an in-process request of the control plane's own components.
func exemptLocal(ctx context.Context) bool {
	c, ok := ctx.Value(localUserKey{}).(localCaller)
	return ok && c.exempt
}

// LocalConfig is a client-go configuration for cluster's API as user, served in process. It is for the control
// plane's own components (controllers, scheduler): their requests take no in-flight slot (acquire), so each must
// bound its own concurrency; never hand it to code acting for a user.
func (a *API) LocalConfig(cluster string, user User) *rest.Config {
	return &rest.Config{Host: "http://local" + Prefix(cluster), Transport: &localTransport{api: a,
		caller: localCaller{user: user, exempt: true}}, QPS: -1}
}

// UserConfig is a client-go configuration for cluster's API as user, served in process, for code acting for a
// signed-in person (the dashboard): unlike LocalConfig its requests take in-flight slots like any client's, and
// user is whoever the caller authenticated (a session), authorized by RBAC like a token would be.
func (a *API) UserConfig(cluster string, user User) *rest.Config {
	return &rest.Config{Host: "http://local" + Prefix(cluster), Transport: &localTransport{api: a,
		caller: localCaller{user: user}}, QPS: -1}
}

// Cluster is cluster id as Config.Clusters tells it (its networks), for in-process clients that need more of
// it than its id (the controllers' node IPAM reads its pod CIDR); ErrClusterNotFound for an unknown id.
func (a *API) Cluster(ctx context.Context, id string) (Cluster, error) {
	return a.cfg.Clusters.Cluster(ctx, id)
}

type localTransport struct {
	api    *API
	caller localCaller
}

// localEcho routes in-process requests (one Echo instance per API, made on first use).
func (a *API) localEcho() *echo.Echo {
	a.localOnce.Do(func() {
		e := echo.New()
		e.IPExtractor = clientip.Of // never a header
		a.Register(e)
		a.local = e
	})
	return a.local
}

// RoundTrip serves req in process. The response body streams (watches work): the handler runs in its own
// goroutine writing into a pipe, and the response is returned as soon as the handler has written its header.
func (t *localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(context.WithValue(req.Context(), localUserKey{}, t.caller))
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.writeHeader(http.StatusOK) // a handler that wrote nothing still answers
			_ = pw.Close()
		}()
		t.api.localEcho().ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.code), StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1,
		ProtoMinor: 1, Header: w.header, Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeWriter is an http.ResponseWriter (and Flusher) that streams the body into a pipe.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	code   int
	ready  chan struct{} // closed once the header is written
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) { w.writeHeader(code) }

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.header = w.header.Clone() // later changes by the handler do not race with the reader
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {}
