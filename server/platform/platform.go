// Package platform serves Wheelhouse's own REST API under /platform/v1: teams, members, invitations, clusters,
// API tokens, kubeconfig downloads, join tokens and the audit log. JSON in and out, RFC 9457 problem+json for
// every error, authorization by team role through rbac.Platform (Casbin). The API is described by the OpenAPI
// document it serves at /platform/v1/openapi.json and by docs/api.md.
package platform

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Prefix is where the platform API is served.
const Prefix = "/platform/v1"

// Clusters creates and removes the Kubernetes side of a cluster: its built-in objects, and every object in it.
type Clusters interface {
	EnsureCluster(ctx context.Context, id string) error
	DeleteClusterObjects(ctx context.Context, id string) error
}

// Config configures the platform API.
type Config struct {
	Tenancy  *tenancy.Store
	Policy   *rbac.Platform
	Clusters Clusters
	// CA is the PEM of the CA of the server's certificate, put in kubeconfigs and (hashed) in join tokens; nil
	// when the server uses a certificate from a public CA.
	CA     []byte
	Logger *slog.Logger
	Now    func() time.Time
}

// API is the platform REST API.
type API struct {
	cfg Config
	log *slog.Logger
}

// New builds the platform API.
func New(cfg Config) (*API, error) {
	if cfg.Tenancy == nil || cfg.Policy == nil || cfg.Clusters == nil {
		return nil, errors.New("platform: Tenancy, Policy and Clusters are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &API{cfg: cfg, log: cfg.Logger}, nil
}

// handler is a platform handler: it answers itself or returns a problem.
type handler func(c echo.Context, caller *caller) *Problem

// caller is the authenticated user of a request.
type caller struct {
	tenancy.Principal
	// team is the team the request acts in, once known (for the audit record).
	team string
	// session and sessionID are set when the request came with a session cookie rather than a token.
	session   *tenancy.Session
	sessionID string
}

// Register mounts the API on e.
func (a *API) Register(e *echo.Echo) {
	g := e.Group(Prefix)
	g.GET("/openapi.json", a.serveOpenAPI)
	g.POST("/invitations/accept", a.public(a.acceptInvitation))
	g.POST("/login", a.public(a.login))
	g.POST("/join", a.public(a.join))
	g.GET("/cacerts", a.serveCACerts)
	for _, r := range a.routes() {
		g.Add(r.method, r.path, a.authenticated(r.h))
	}
	g.Any("/*", func(c echo.Context) error {
		return writeProblem(c, problem(http.StatusNotFound, "not-found", "Not found", "no such endpoint"))
	})
}

type route struct {
	method, path string
	h            handler
}

func (a *API) routes() []route {
	return []route{
		{http.MethodGet, "/me", a.me},
		{http.MethodGet, "/teams", a.listTeams},
		{http.MethodPost, "/teams", a.createTeam},
		{http.MethodGet, "/teams/:team", a.getTeam},
		{http.MethodPatch, "/teams/:team", a.renameTeam},
		{http.MethodDelete, "/teams/:team", a.deleteTeam},
		{http.MethodPost, "/teams/:team/transfer", a.transferTeam},
		{http.MethodGet, "/teams/:team/members", a.listMembers},
		{http.MethodPatch, "/teams/:team/members/:user", a.setMemberRole},
		{http.MethodDelete, "/teams/:team/members/:user", a.removeMember},
		{http.MethodGet, "/teams/:team/invitations", a.listInvitations},
		{http.MethodPost, "/teams/:team/invitations", a.createInvitation},
		{http.MethodDelete, "/teams/:team/invitations/:id", a.revokeInvitation},
		{http.MethodGet, "/teams/:team/clusters", a.listClusters},
		{http.MethodPost, "/teams/:team/clusters", a.createCluster},
		{http.MethodGet, "/teams/:team/audit", a.auditLog},
		{http.MethodGet, "/clusters/:cluster", a.getCluster},
		{http.MethodDelete, "/clusters/:cluster", a.deleteCluster},
		{http.MethodPost, "/clusters/:cluster/kubeconfig", a.kubeconfig},
		{http.MethodGet, "/clusters/:cluster/join-tokens", a.listJoinTokens},
		{http.MethodPost, "/clusters/:cluster/join-tokens", a.createJoinToken},
		{http.MethodDelete, "/clusters/:cluster/join-tokens/:id", a.revokeJoinToken},
		{http.MethodGet, "/tokens", a.listTokens},
		{http.MethodPost, "/tokens", a.createToken},
		{http.MethodDelete, "/tokens/:id", a.revokeToken},
		{http.MethodGet, "/clusters/:cluster/node-credentials", a.listNodeCredentials},
		{http.MethodDelete, "/clusters/:cluster/node-credentials/:node", a.revokeNodeCredential},
		{http.MethodGet, "/session", a.session},
		{http.MethodPost, "/logout", a.logout},
		{http.MethodPost, "/password", a.changePassword},
	}
}

// authenticated runs h for a caller with a valid API token or browser session (see session.go), then records
// mutating requests in the audit log.
func (a *API) authenticated(h handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		var who *caller
		if token, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer "); ok && strings.TrimSpace(token) != "" {
			p, err := a.cfg.Tenancy.Authenticate(c.Request().Context(), strings.TrimSpace(token))
			if err != nil {
				return a.fail(c, fromTenancy(err, "token"), err)
			}
			who = &caller{Principal: *p}
		} else {
			var prob *Problem
			if who, prob = a.sessionCaller(c); prob != nil {
				return writeProblem(c, prob)
			}
		}
		if prob := h(c, who); prob != nil {
			a.record(c, who, prob.Status)
			return writeProblem(c, prob)
		}
		a.record(c, who, c.Response().Status)
		return nil
	}
}

// public runs h without authentication (accepting an invitation as a new user); it is still audited.
func (a *API) public(h handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		who := &caller{}
		if prob := h(c, who); prob != nil {
			a.record(c, who, prob.Status)
			return writeProblem(c, prob)
		}
		a.record(c, who, c.Response().Status)
		return nil
	}
}

// fail logs a server-side failure and answers with p.
func (a *API) fail(c echo.Context, p *Problem, err error) error {
	if p.Status >= 500 {
		a.log.ErrorContext(c.Request().Context(), "platform request failed", "err", err, "path", c.Request().URL.Path)
	}
	return writeProblem(c, p)
}

// internal logs err and returns a problem that does not reveal it.
func (a *API) internal(c echo.Context, err error, what string) *Problem {
	p := fromTenancy(err, what)
	if p.Status >= 500 {
		a.log.ErrorContext(c.Request().Context(), "platform request failed", "err", err, "path", c.Request().URL.Path)
	}
	return p
}

// record writes the audit entry of a mutating request (whatever its result).
func (a *API) record(c echo.Context, who *caller, status int) {
	r := c.Request()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	ev := tenancy.AuditEvent{At: a.cfg.Now(), TeamID: who.team, ClusterID: c.Param("cluster"), Actor: who.Email,
		ActorID: who.UserID, Action: r.Method + " " + strings.TrimPrefix(c.Path(), Prefix), Resource: r.URL.Path,
		Result: strconv.Itoa(status), Source: clientip.Of(r), UserAgent: r.UserAgent()}
	if ev.Actor == "" {
		ev.Actor = "anonymous"
	}
	// The audit write outlives a client that hung up; it must not fail the request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	evs := []tenancy.AuditEvent{ev}
	if ev.TeamID == "" && who.UserID != "" {
		// A user's own resources (API tokens): every team they belong to sees it in its log.
		if teams, err := a.cfg.Tenancy.TeamsOf(ctx, who.UserID); err == nil && len(teams) > 0 {
			evs = evs[:0]
			for _, t := range teams {
				ev.TeamID = t.ID
				evs = append(evs, ev)
			}
		}
	}
	if err := a.cfg.Tenancy.Audit(ctx, evs...); err != nil {
		a.log.Error("writing an audit record failed", "err", err, "action", ev.Action)
	}
}

// teamAccess checks that the caller may do act on obj in team, as its member. A team the caller is not a
// member of does not exist for them (404, never 403); a member without the permission gets 403.
func (a *API) teamAccess(c echo.Context, who *caller, team, obj, act string) (string, *Problem) {
	if !tenancy.ValidID(team) {
		return "", notFound("team " + strconv.Quote(team))
	}
	role, err := a.cfg.Tenancy.MemberRole(c.Request().Context(), team, who.UserID)
	if err != nil {
		return "", a.internal(c, err, "team "+strconv.Quote(team))
	}
	who.team = team
	if !a.cfg.Policy.Allowed(role, obj, act) {
		return role, forbidden("your role in team " + strconv.Quote(team) + " (" + role + ") may not " + act + " " + obj)
	}
	return role, nil
}

// clusterAccess is teamAccess for the team owning cluster; an unknown cluster and another team's cluster are
// both 404.
func (a *API) clusterAccess(c echo.Context, who *caller, cluster, obj, act string) (tenancy.Cluster, *Problem) {
	what := "cluster " + strconv.Quote(cluster)
	if !tenancy.ValidID(cluster) {
		return tenancy.Cluster{}, notFound(what)
	}
	cl, err := a.cfg.Tenancy.Cluster(c.Request().Context(), cluster)
	if err != nil {
		return tenancy.Cluster{}, a.internal(c, err, what)
	}
	if _, prob := a.teamAccess(c, who, cl.TeamID, obj, act); prob != nil {
		if prob.Status == http.StatusNotFound {
			return tenancy.Cluster{}, notFound(what)
		}
		return tenancy.Cluster{}, prob
	}
	return cl, nil
}

// Handler is the API alone, for in-process requests (the dashboard's team actions, made with the user's
// session so the same authorization and audit apply).
func (a *API) Handler() http.Handler {
	e := echo.New()
	e.IPExtractor = clientip.Of // the caller's address travels in the request's context, never in a header
	a.Register(e)
	return e
}
