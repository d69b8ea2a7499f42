package platform

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

type tokenView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

func tokenViewOf(t tenancy.Token) tokenView {
	return tokenView{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, ExpiresAt: optTime(t.ExpiresAt),
		LastUsedAt: optTime(t.LastUsedAt), RevokedAt: optTime(t.RevokedAt)}
}

// listTokens lists the caller's own API tokens (never their secrets).
func (a *API) listTokens(c echo.Context, who *caller) *Problem {
	ts, err := a.cfg.Tenancy.Tokens(c.Request().Context(), who.UserID)
	if err != nil {
		return a.internal(c, err, "user")
	}
	out := []tokenView{}
	for _, t := range ts {
		out = append(out, tokenViewOf(t))
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

type createTokenBody struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// createToken mints an API token for the caller; its secret is in this answer only.
func (a *API) createToken(c echo.Context, who *caller) *Problem {
	var b createTokenBody
	if p := decode(c, &b); p != nil {
		return p
	}
	var errs []FieldError
	if b.Name == "" || len(b.Name) > 128 {
		errs = append(errs, FieldError{"name", "must have 1 to 128 bytes"})
	}
	var expires time.Time
	if b.ExpiresAt != nil {
		if expires = *b.ExpiresAt; !expires.After(a.cfg.Now()) {
			errs = append(errs, FieldError{"expiresAt", "must be in the future"})
		}
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	secret, t, err := a.cfg.Tenancy.CreateToken(c.Request().Context(), who.UserID, b.Name, expires)
	if err != nil {
		return a.internal(c, err, "token")
	}
	return jsonOK(c, http.StatusCreated, map[string]any{"token": secret, "apiToken": tokenViewOf(t)})
}

// revokeToken revokes one of the caller's tokens; someone else's token does not exist for them.
func (a *API) revokeToken(c echo.Context, who *caller) *Problem {
	id := c.Param("id")
	ctx := c.Request().Context()
	ts, err := a.cfg.Tenancy.Tokens(ctx, who.UserID)
	if err != nil {
		return a.internal(c, err, "user")
	}
	for _, t := range ts {
		if t.ID == id {
			if err := a.cfg.Tenancy.RevokeToken(ctx, id); err != nil {
				return a.internal(c, err, "token")
			}
			return noContent(c)
		}
	}
	return notFound("token " + strconv.Quote(id))
}

type auditView struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	TeamID    string    `json:"teamId,omitempty"`
	ClusterID string    `json:"clusterId,omitempty"`
	Actor     string    `json:"actor"`
	ActorID   string    `json:"actorId,omitempty"`
	Action    string    `json:"action"`
	Resource  string    `json:"resource"`
	Result    string    `json:"result"`
	Source    string    `json:"source,omitempty"`
	UserAgent string    `json:"userAgent,omitempty"`
}

// auditLog reads the team's audit log, newest first, with filters and an id cursor (before).
func (a *API) auditLog(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjAudit, rbac.ActRead); p != nil {
		return p
	}
	q := tenancy.AuditQuery{TeamID: who.team, ClusterID: c.QueryParam("cluster"), Actor: c.QueryParam("actor"),
		Action: c.QueryParam("action")}
	var errs []FieldError
	parseTime := func(name string, into *time.Time) {
		if v := c.QueryParam(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				errs = append(errs, FieldError{name, "must be an RFC 3339 time"})
			}
			*into = t
		}
	}
	parseTime("since", &q.Since)
	parseTime("until", &q.Until)
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, FieldError{"limit", "must be between 1 and 1000"})
		}
		q.Limit = n
	}
	if v := c.QueryParam("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, FieldError{"before", "must be a positive event id"})
		}
		q.Before = n
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	evs, err := a.cfg.Tenancy.AuditLog(c.Request().Context(), q)
	if err != nil {
		return a.internal(c, err, "team")
	}
	out := []auditView{}
	for _, e := range evs {
		out = append(out, auditView{ID: e.ID, At: e.At, TeamID: e.TeamID, ClusterID: e.ClusterID, Actor: e.Actor,
			ActorID: e.ActorID, Action: e.Action, Resource: e.Resource, Result: e.Result, Source: e.Source, UserAgent: e.UserAgent})
	}
	resp := map[string]any{"items": out}
	if len(evs) > 0 && len(evs) == limitOr(q.Limit, 100) {
		resp["next"] = strconv.FormatInt(evs[len(evs)-1].ID, 10)
	}
	return jsonOK(c, http.StatusOK, resp)
}

func limitOr(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
