package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// check is one named health check. fn returns nil when healthy; its error is logged, never shown to clients.
type check struct {
	name string
	fn   func(ctx context.Context) error
}

func ping(context.Context) error { return nil }

// storeCheck passes when the store answers CurrentRevision within Config.ReadyTimeout.
func (s *Server) storeCheck(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	_, err := s.cfg.Store.CurrentRevision(ctx)
	return err
}

// healthRoutes serves the checks Kubernetes-style on path (all of them, minus any ?exclude=NAME) and on
// path/NAME (one of them).
func (s *Server) healthRoutes(e *echo.Echo, path string, checks []check) {
	endpoint := strings.TrimPrefix(path, "/")
	s.quietGET(e, path, func(c echo.Context) error {
		excluded := c.QueryParams()["exclude"]
		run := slices.DeleteFunc(slices.Clone(checks), func(ch check) bool { return slices.Contains(excluded, ch.name) })
		return s.runChecks(c, endpoint, run)
	})
	for _, ch := range checks {
		s.quietGET(e, path+"/"+ch.name, func(c echo.Context) error {
			return s.runChecks(c, endpoint, []check{ch})
		})
	}
}

// runChecks answers 200 "ok" when every check passes and 503 with the list of checks when one fails. With
// ?verbose the list is shown on success too. A failure's reason is logged, and withheld from the client.
func (s *Server) runChecks(c echo.Context, endpoint string, checks []check) error {
	ctx := c.Request().Context()
	var b strings.Builder
	failed := false
	for _, ch := range checks {
		if err := ch.fn(ctx); err != nil {
			failed = true
			s.log.WarnContext(ctx, "health check failed", "endpoint", endpoint, "check", ch.name, "err", err,
				"request_id", RequestID(ctx))
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", ch.name)
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", ch.name)
	}
	c.Response().Header().Set(echo.HeaderXContentTypeOptions, "nosniff")
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	switch {
	case failed:
		fmt.Fprintf(&b, "%s check failed\n", endpoint)
		return c.String(http.StatusServiceUnavailable, b.String())
	case c.QueryParams().Has("verbose"):
		fmt.Fprintf(&b, "%s check passed\n", endpoint)
		return c.String(http.StatusOK, b.String())
	}
	return c.String(http.StatusOK, "ok")
}
