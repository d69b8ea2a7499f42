package platform

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Browser sessions: POST /login sets a __Host- cookie (Secure, HttpOnly, SameSite=Lax) holding a random session
// id kept server-side; requests with the cookie are authenticated like a Bearer token, and every state change
// made with it must also carry the session's CSRF token in the X-CSRF-Token header and, when the browser sends
// one, an Origin of this server.

// SessionCookie is the session cookie's name; the __Host- prefix makes browsers insist on Secure, Path=/ and no
// Domain, so no other host or path can set or read it.
const SessionCookie = "__Host-wh_session"

// CSRFHeader carries the CSRF token of cookie-authenticated state changes.
const CSRFHeader = "X-CSRF-Token"

type loginBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type sessionView struct {
	User      userRef `json:"user"`
	CSRFToken string  `json:"csrfToken"`
}

type userRef struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// remoteAddr is the address the request comes from (clientip.Of): the connection's, or behind a trusted
// proxy the one it forwards; never a header a client could set to dodge per-address throttling.
func remoteAddr(r *http.Request) string { return clientip.Of(r) }

// login signs in with email and password and sets the session cookie. Unknown email and wrong password get
// the same answer; too many failures get 429.
func (a *API) login(c echo.Context, who *caller) *Problem {
	var b loginBody
	if p := decode(c, &b); p != nil {
		return p
	}
	r := c.Request()
	id, sess, err := a.cfg.Tenancy.SignIn(r.Context(), b.Email, b.Password, remoteAddr(r), r.UserAgent())
	who.Email = tenancy.NormalizeEmail(b.Email)
	if err != nil {
		// A failed sign-in of an existing account goes to the audit logs of its teams (the answer stays the
		// same for unknown accounts).
		if u, uerr := a.cfg.Tenancy.UserByEmail(r.Context(), b.Email); uerr == nil {
			who.UserID = u.ID
		}
	}
	switch {
	case errors.Is(err, tenancy.ErrThrottled):
		wait := tenancy.RetryAfter(err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(wait))
		return problem(http.StatusTooManyRequests, "throttled", "Too many failed sign-ins",
			fmt.Sprintf("too many failed sign-ins; try again in %d seconds", wait))
	case errors.Is(err, tenancy.ErrUnauthenticated):
		return problem(http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "invalid email or password")
	case err != nil:
		return a.internal(c, err, "session")
	}
	who.UserID = sess.UserID
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: id, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(tenancy.SessionAbsolute.Seconds())})
	return jsonOK(c, http.StatusOK, sessionView{User: userRef{ID: sess.UserID, Email: sess.Email}, CSRFToken: sess.CSRF})
}

// session describes the caller's session (the dashboard's script reads its CSRF token here).
func (a *API) session(c echo.Context, who *caller) *Problem {
	if who.session == nil {
		return problem(http.StatusNotFound, "not-found", "Not found", "this request was not made with a session")
	}
	return jsonOK(c, http.StatusOK, sessionView{User: userRef{ID: who.UserID, Email: who.Email}, CSRFToken: who.session.CSRF})
}

// logout ends the caller's session server-side and clears the cookie.
func (a *API) logout(c echo.Context, who *caller) *Problem {
	if who.session == nil {
		return badRequest("logout ends a browser session; revoke API tokens with DELETE /tokens/{id}")
	}
	if err := a.cfg.Tenancy.EndSession(c.Request().Context(), who.sessionID); err != nil {
		return a.internal(c, err, "session")
	}
	clearSessionCookie(c)
	return noContent(c)
}

type passwordBody struct {
	Current string `json:"current"`
	New     string `json:"new"`
}

// changePassword sets a new password after checking the current one; every session of the user ends, this one
// included.
func (a *API) changePassword(c echo.Context, who *caller) *Problem {
	var b passwordBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if len(b.New) < 8 || len(b.New) > 1024 {
		return invalid(FieldError{"new", "must have 8 to 1024 bytes"})
	}
	err := a.cfg.Tenancy.ChangePassword(c.Request().Context(), who.UserID, b.Current, b.New)
	if errors.Is(err, tenancy.ErrUnauthenticated) {
		return invalid(FieldError{"current", "is not your current password"})
	}
	if err != nil {
		return a.internal(c, err, "user")
	}
	clearSessionCookie(c)
	return noContent(c)
}

func clearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// sessionCaller authenticates a request by its session cookie; for a state change it also requires the CSRF
// token and, if present, a same-origin Origin header.
func (a *API) sessionCaller(c echo.Context) (*caller, *Problem) {
	ck, err := c.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return nil, unauthenticated()
	}
	r := c.Request()
	sess, err := a.cfg.Tenancy.Session(r.Context(), ck.Value)
	if err != nil {
		return nil, a.internal(c, err, "session")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(CSRFHeader)), []byte(sess.CSRF)) != 1 {
			return nil, problem(http.StatusForbidden, "csrf", "CSRF token missing or wrong",
				"state changes made with a session cookie need the session's CSRF token in the "+CSRFHeader+" header")
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, c) {
			return nil, problem(http.StatusForbidden, "csrf", "Cross-origin request", "the request comes from another origin")
		}
	}
	return &caller{Principal: tenancy.Principal{UserID: sess.UserID, Email: sess.Email}, session: &sess,
		sessionID: ck.Value}, nil
}

// sameOrigin reports whether an Origin header names this server as the client reached it.
func sameOrigin(origin string, c echo.Context) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == c.Scheme() && u.Host == c.Request().Host
}
