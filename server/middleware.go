package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
)

type requestIDKey struct{}

// RequestID is the ID of the request ctx belongs to ("" outside a request). It is also sent back in the
// X-Request-Id response header and logged with the request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID adopts the client's X-Request-Id when it is short and plain, else makes one, and puts it in the
// request's context and the response header.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestIDKey{}, id)))
		return next(c)
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// observe renders a handler's error (so the status is final), then logs and counts the request.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		elapsed := time.Since(start)
		req, res := c.Request(), c.Response()
		route := routeLabel(c, err)
		s.metrics.observe(req.Method, route, res.Status, elapsed)
		s.log.LogAttrs(req.Context(), requestLevel(res.Status, elapsed, s.quiet[route] || streaming(req)), "http request",
			slog.String("method", req.Method), slog.String("path", req.URL.Path), slog.String("route", route),
			slog.Int("status", res.Status), slog.Duration("duration", elapsed), slog.Int64("bytes", res.Size),
			slog.String("remote", req.RemoteAddr), slog.String("client", clientip.Of(req)),
			slog.String("request_id", RequestID(req.Context())))
		return nil
	}
}

// SlowRequest is how long a request that is not a stream may take before it is logged at info level.
const SlowRequest = time.Second

// requestLevel is the level a request is logged at, as k3s logs its: failures (error for 5xx, info for 4xx)
// and slow requests at info, everything else at debug, so heartbeats and lists do not flood the log. A stream
// (a watch, exec, logs -f, a tunnel) or a probe is never slow.
func requestLevel(status int, elapsed time.Duration, neverSlow bool) slog.Level {
	switch {
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelInfo
	case elapsed >= SlowRequest && !neverSlow:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// streaming reports whether req asks for a stream that lasts as long as its client wants: a watch, logs with
// follow, or an upgrade (exec, attach, port-forward, websockets, agent tunnels).
func streaming(req *http.Request) bool {
	q := req.URL.Query()
	w := q.Get("watch")
	return w == "true" || w == "1" || q.Get("follow") == "true" || req.Header.Get("Upgrade") != ""
}

// routeLabel is the matched route pattern, or "unmatched" when the router found no route (its not-found
// handler returns exactly echo.ErrNotFound; ours render their own errors): request paths never become metric
// labels.
func routeLabel(c echo.Context, err error) string {
	if errors.Is(err, echo.ErrNotFound) || c.Path() == "" {
		return "unmatched"
	}
	return c.Path()
}

// errPanic replaces a handler's panic value, which may hold internals, on its way to the error handler.
var errPanic = errors.New("server: handler panicked")

// recoverPanic turns a handler panic into a logged 500. http.ErrAbortHandler is re-raised: it is net/http's
// deliberate way to abort a response, and net/http recovers it silently.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			ctx := c.Request().Context()
			s.log.ErrorContext(ctx, "panic serving request", "panic", r, "path", c.Request().URL.Path,
				"request_id", RequestID(ctx), "stack", string(debug.Stack()))
			err = errPanic
		}()
		return next(c)
	}
}
