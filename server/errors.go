package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// problem is an RFC 9457 problem details body, the error format of the platform API.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

const problemContentType = "application/problem+json"

// handleError is Echo's HTTPErrorHandler. An *echo.HTTPError below 500 is shown with its message; anything
// else is a 500 whose body says only which request failed: the error itself goes to the log.
func (s *Server) handleError(err error, c echo.Context) {
	req := c.Request()
	ctx := req.Context()
	if c.Response().Committed {
		s.log.DebugContext(ctx, "error after the response was sent", "err", err, "request_id", RequestID(ctx))
		return
	}
	p := problem{Type: "about:blank", Status: http.StatusInternalServerError, Instance: req.URL.Path,
		RequestID: RequestID(ctx)}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 500 {
		p.Status = he.Code
		if msg, ok := he.Message.(string); ok && msg != http.StatusText(he.Code) {
			p.Detail = msg
		}
	} else {
		s.log.ErrorContext(ctx, "request failed", "err", err, "method", req.Method, "path", req.URL.Path,
			"request_id", p.RequestID)
		if errors.As(err, &he) && he.Code >= 500 && he.Code < 600 {
			p.Status = he.Code
		}
		p.Detail = "The server could not complete the request; its log has the details under the request ID."
	}
	p.Title = http.StatusText(p.Status)
	if req.Method == http.MethodHead {
		_ = c.NoContent(p.Status)
		return
	}
	body, _ := json.Marshal(p) // cannot fail: strings and ints
	if err := c.Blob(p.Status, problemContentType, body); err != nil {
		s.log.DebugContext(ctx, "writing error response failed", "err", err, "request_id", p.RequestID)
	}
}
