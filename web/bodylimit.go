package web

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Request bodies. Every dashboard form is url-encoded and small, so before anything else (authentication
// included) a body must be application/x-www-form-urlencoded — a multipart upload, which Go would spool to the
// temporary directory, is 415 — and at most maxFormBody bytes (maxApplyBody for YAML apply and edit), checked
// against Content-Length first and enforced while reading (413). Forms are read into memory only: by
// readForm in the public handlers, by authenticated once the session is known.

const (
	// maxFormBody bounds the body of every form but apply's: a few fields, a password at most 1 KiB.
	maxFormBody = 256 << 10
	// maxApplyBody bounds the apply form: a YAML text of up to maxYAML (the Kubernetes API's own request
	// limit) url-encoded, which can triple it (%XX), and its few other fields.
	maxApplyBody = 3*maxYAML + 64<<10
)

// applyRoute is the route of the YAML apply and edit form.
const applyRoute = Prefix + "/c/:cluster/apply"

// formMediaType is the one body the dashboard accepts.
const formMediaType = "application/x-www-form-urlencoded"

// bodyLimit returns the body limit of route (an Echo route path).
func bodyLimit(route string) int64 {
	if route == applyRoute {
		return maxApplyBody
	}
	return maxFormBody
}

// limitBody refuses a body that is not a url-encoded form (415) or is declared larger than the route's limit
// (413), and bounds what is read of the rest. It reads nothing itself.
func (d *Dashboard) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 { // no body (-1: one of unknown length)
			return next(c)
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != formMediaType {
			return d.errorPage(c, http.StatusUnsupportedMediaType, "Unsupported form",
				"The dashboard accepts forms sent as "+formMediaType+" only (as its pages send them); uploads are not accepted.")
		}
		limit := bodyLimit(c.Path())
		if r.ContentLength > limit {
			return d.tooLarge(c, limit)
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		}
		return next(c)
	}
}

// readForm reads the request's url-encoded form (bounded by limitBody); ok false when the form cannot be read,
// after answering 413 or 400 itself.
func (d *Dashboard) readForm(c echo.Context) (ok bool, err error) {
	perr := c.Request().ParseForm()
	var big *http.MaxBytesError
	switch {
	case perr == nil:
		return true, nil
	case errors.As(perr, &big):
		return false, d.tooLarge(c, big.Limit)
	}
	return false, d.errorPage(c, http.StatusBadRequest, "Unreadable form", "The form could not be read. Go back, reload the page and try again.")
}

func (d *Dashboard) tooLarge(c echo.Context, limit int64) error {
	return d.errorPage(c, http.StatusRequestEntityTooLarge, "Form too large",
		fmt.Sprintf("This form is too large: the limit is %d KiB.", limit>>10))
}
