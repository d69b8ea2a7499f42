package web

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/platform"
)

// Team actions are platform API requests made in process with the user's own session (cookie and CSRF token,
// both checked by the platform API like any browser request), so the platform's authorization and audit log
// apply to them unchanged.

// platformAnswer is a platform API answer.
type platformAnswer struct {
	Status  int
	Body    []byte
	Header  http.Header
	Problem *platform.Problem // set for error answers
}

// recorder is an http.ResponseWriter that keeps the answer.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// callPlatform sends one platform API request as the viewer: method, path below /platform/v1, and a JSON body
// (nil for none).
func (d *Dashboard) callPlatform(c echo.Context, method, path string, body any) (platformAnswer, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return platformAnswer{}, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	orig := c.Request()
	req, err := http.NewRequestWithContext(orig.Context(), method, platform.Prefix+path, rd)
	if err != nil {
		return platformAnswer{}, err
	}
	req.Host, req.RemoteAddr, req.TLS = orig.Host, orig.RemoteAddr, orig.TLS
	req.Header.Set("User-Agent", orig.UserAgent())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if v := viewerOf(c); v != nil {
		req.AddCookie(&http.Cookie{Name: platform.SessionCookie, Value: v.sessionID})
		req.Header.Set(platform.CSRFHeader, v.sess.CSRF)
	}
	rec := &recorder{header: http.Header{}}
	d.cfg.Platform.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	a := platformAnswer{Status: rec.code, Body: rec.body.Bytes(), Header: rec.header}
	if a.Status >= 400 {
		var p platform.Problem
		if err := json.Unmarshal(a.Body, &p); err != nil || p.Status == 0 {
			p = platform.Problem{Status: a.Status, Title: http.StatusText(a.Status)}
		}
		a.Problem = &p
	}
	return a, nil
}

// problemText is a problem as one sentence, with its field errors.
func problemText(p *platform.Problem) string {
	if p == nil {
		return ""
	}
	if p.Status >= 500 {
		return "Something went wrong on our side. Try again in a moment."
	}
	s := p.Detail
	if s == "" {
		s = p.Title
	}
	for _, fe := range p.Errors {
		s += "; " + fe.Field + " " + fe.Message
	}
	return s
}

// fieldErrors maps a problem's field errors by field, to show each under its input.
func fieldErrors(p *platform.Problem) map[string]string {
	out := map[string]string{}
	if p == nil {
		return out
	}
	for _, fe := range p.Errors {
		out[fe.Field] = fe.Message
	}
	return out
}
