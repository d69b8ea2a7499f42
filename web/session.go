package web

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Sessions are the platform's (tenancy): the __Host- cookie the sign-in form sets is the one the platform API
// accepts. Every state change from the dashboard is a POST carrying the session's CSRF token (a hidden _csrf
// field, or the X-CSRF-Token header) and, when the browser sends one, an Origin of this server.

// csrfField is the form field holding the CSRF token.
const csrfField = "_csrf"

// viewer is the signed-in user of a request.
type viewer struct {
	sess      tenancy.Session
	sessionID string
}

const viewerKey = "wh.viewer"

func viewerOf(c echo.Context) *viewer {
	v, _ := c.Get(viewerKey).(*viewer)
	return v
}

// secureHeaders sets the headers of every dashboard answer: a strict Content-Security-Policy (scripts and
// styles only from /static, no inline code), no framing, no caching of pages that show cluster state.
func (d *Dashboard) secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// authenticated admits requests with a valid session; a page request without one goes to the sign-in page. A
// state change must carry the CSRF token and come from this origin.
func (d *Dashboard) authenticated(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ck, err := c.Cookie(platform.SessionCookie)
		var sess tenancy.Session
		if err == nil && ck.Value != "" {
			sess, err = d.cfg.Tenancy.Session(r.Context(), ck.Value)
		} else {
			err = tenancy.ErrUnauthenticated
		}
		if errors.Is(err, tenancy.ErrUnauthenticated) || errors.Is(err, tenancy.ErrNotFound) {
			if r.Method == http.MethodGet && !isWebsocket(r) {
				return c.Redirect(http.StatusSeeOther, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()))
			}
			return d.errorPage(c, http.StatusUnauthorized, "Signed out", "Your session has ended. Sign in again.")
		} else if err != nil {
			return d.internalError(c, err)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if ok, err := d.readForm(c); !ok {
				return err
			}
			token := r.Header.Get(platform.CSRFHeader)
			if token == "" {
				token = c.FormValue(csrfField)
			}
			if subtle.ConstantTimeCompare([]byte(token), []byte(sess.CSRF)) != 1 {
				return d.errorPage(c, http.StatusForbidden, "Form expired",
					"This form was not sent from this dashboard or has expired. Go back, reload the page and try again.")
			}
			if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
				return d.errorPage(c, http.StatusForbidden, "Cross-origin request", "This request came from another site.")
			}
		}
		c.Set(viewerKey, &viewer{sess: sess, sessionID: ck.Value})
		return next(c)
	}
}

func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// sameOrigin reports whether an Origin header names this server as the browser reached it.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && u.Host == r.Host
}

// sameOriginRequest is the websocket upgrader's origin check: browsers always send Origin on websocket
// upgrades, and only this server's own pages may open one (a cross-site page would ride on the cookie).
func sameOriginRequest(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o != "" && sameOrigin(o, r)
}

// safeNext is a sign-in's destination: a dashboard path, never another site.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix+"/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") {
		return next
	}
	return Prefix + "/"
}

func (d *Dashboard) setSessionCookie(c echo.Context, id string) {
	c.SetCookie(&http.Cookie{Name: platform.SessionCookie, Value: id, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(tenancy.SessionAbsolute.Seconds())})
}

func (d *Dashboard) clearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: platform.SessionCookie, Value: "", Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

func (d *Dashboard) signInPage(c echo.Context) error {
	return d.render(c, http.StatusOK, signInPage(d.static, signInView{Next: safeNext(c.QueryParam("next"))}))
}

// signIn checks email and password and starts a session (the platform's sign-in, as a form).
func (d *Dashboard) signIn(c echo.Context) error {
	r := c.Request()
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return d.errorPage(c, http.StatusForbidden, "Cross-origin request", "This request came from another site.")
	}
	if ok, err := d.readForm(c); !ok {
		return err
	}
	v := signInView{Email: c.FormValue("email"), Next: safeNext(c.FormValue("next"))}
	id, _, err := d.cfg.Tenancy.SignIn(r.Context(), v.Email, c.FormValue("password"), remoteIP(r), r.UserAgent())
	switch {
	case errors.Is(err, tenancy.ErrThrottled):
		wait := tenancy.RetryAfter(err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(wait))
		v.Error = "Too many failed sign-ins. Try again in " + waitText(wait) + "."
		return d.render(c, http.StatusTooManyRequests, signInPage(d.static, v))
	case errors.Is(err, tenancy.ErrUnauthenticated):
		v.Error = "Wrong email or password."
		return d.render(c, http.StatusUnauthorized, signInPage(d.static, v))
	case err != nil:
		return d.internalError(c, err)
	}
	d.setSessionCookie(c, id)
	return c.Redirect(http.StatusSeeOther, v.Next)
}

func (d *Dashboard) signOut(c echo.Context) error {
	if err := d.cfg.Tenancy.EndSession(c.Request().Context(), viewerOf(c).sessionID); err != nil {
		return d.internalError(c, err)
	}
	d.clearSessionCookie(c)
	return c.Redirect(http.StatusSeeOther, Prefix+"/signin")
}

// remoteIP is the address the request comes from (clientip.Of): the connection's, or behind a trusted proxy the
// one it forwards; never a header a client could set.
// waitText says a wait of secs seconds in words, rounded up to minutes from two minutes on.
func waitText(secs int) string {
	switch {
	case secs == 1:
		return "a second"
	case secs < 120:
		return strconv.Itoa(secs) + " seconds"
	}
	return strconv.Itoa((secs+59)/60) + " minutes"
}

func remoteIP(r *http.Request) string { return clientip.Of(r) }
