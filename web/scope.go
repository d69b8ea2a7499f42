package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// scope is what a page is about: the signed-in user, the team, the cluster (for cluster pages), the user's team
// role, and who they are in the cluster's Kubernetes API.
type scope struct {
	v        *viewer
	team     tenancy.TeamMembership
	teams    []tenancy.TeamMembership
	clusters []tenancy.Cluster // the team's
	cluster  tenancy.Cluster   // zero on team pages
	user     kubeapi.User      // the user in cluster's API
}

// errNoAccess: the team or cluster does not exist or the user is not a member of its team; the two look the same.
var errNoAccess = errors.New("web: no such team or cluster")

// teamScope loads team for the viewer; errNoAccess unless they are a member.
func (d *Dashboard) teamScope(ctx context.Context, v *viewer, team string) (*scope, error) {
	teams, err := d.cfg.Tenancy.TeamsOf(ctx, v.sess.UserID)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(teams, func(t tenancy.TeamMembership) bool { return t.ID == team })
	if i < 0 {
		return nil, errNoAccess
	}
	s := &scope{v: v, team: teams[i], teams: teams}
	if s.clusters, err = d.cfg.Tenancy.ClustersOf(ctx, team); err != nil {
		return nil, err
	}
	return s, nil
}

// clusterScope loads cluster for the viewer; errNoAccess unless they are a member of its team.
func (d *Dashboard) clusterScope(ctx context.Context, v *viewer, cluster string) (*scope, error) {
	if !tenancy.ValidID(cluster) {
		return nil, errNoAccess
	}
	cl, err := d.cfg.Tenancy.Cluster(ctx, cluster)
	if errors.Is(err, tenancy.ErrNotFound) {
		return nil, errNoAccess
	} else if err != nil {
		return nil, err
	}
	s, err := d.teamScope(ctx, v, cl.TeamID)
	if err != nil {
		return nil, err
	}
	s.cluster = cl
	s.user = kubeUser(v.sess, s.team.Role)
	return s, nil
}

// kubeUser is who a signed-in member is in their team's clusters: the same user and groups their API tokens
// authenticate as (cmd/wheelhouse's token authenticator), so the dashboard can do exactly what kubectl could.
func kubeUser(sess tenancy.Session, role string) kubeapi.User {
	return kubeapi.User{Name: sess.Email, UID: sess.UserID, Groups: []string{"system:authenticated", rbac.TeamGroup(role)}}
}

// can reports whether the scope's user may do verb on res (in namespace, on name) in the cluster, by RBAC.
func (d *Dashboard) can(ctx context.Context, s *scope, verb string, res *resources.Resource, namespace, name string) (bool, string, error) {
	a := kubeapi.Attributes{User: s.user, Cluster: s.cluster.ID, Verb: verb, Group: res.GVK.Group, Resource: res.Plural,
		Namespace: namespace, Name: name}
	ok, reason, err := d.cfg.Authorizer.Authorize(ctx, a)
	if err == nil {
		recordDecision(ctx, a, ok) // a shared render is only for users with the same answers
	}
	return ok, reason, err
}

// sameDecisions reports whether s's user gets the answers of a recorded render.
func (d *Dashboard) sameDecisions(ctx context.Context, s *scope, ds []decision) (bool, error) {
	for _, dc := range ds {
		a := dc.attrs
		a.User = s.user
		ok, _, err := d.cfg.Authorizer.Authorize(ctx, a)
		if err != nil {
			return false, err
		}
		if ok != dc.allowed {
			return false, nil
		}
	}
	return true, nil
}

// teamCan reports whether the user's team role allows a platform action (to show or hide its controls; the
// platform API decides again when it is taken).
func (d *Dashboard) teamCan(s *scope, obj, act string) bool {
	return d.cfg.Policy.Allowed(s.team.Role, obj, act)
}

// humanAge is kubectl's age of a timestamp ("3m", "2d4h", "<unknown>").
func humanAge(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// render writes a full page.
func (d *Dashboard) render(c echo.Context, status int, page templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return page.Render(c.Request().Context(), c.Response())
}

// errorPage answers with a readable message (never an internal error's text).
func (d *Dashboard) errorPage(c echo.Context, status int, title, msg string) error {
	return d.render(c, status, errorPage(d.static, status, title, msg, viewerOf(c) != nil))
}

func (d *Dashboard) notFound(c echo.Context, msg string) error {
	return d.errorPage(c, http.StatusNotFound, "Not found", msg)
}

// internalError logs err and answers 500 without revealing it.
func (d *Dashboard) internalError(c echo.Context, err error) error {
	if c.Request().Context().Err() != nil {
		return nil // the browser went away
	}
	id := c.Response().Header().Get(echo.HeaderXRequestID)
	d.log.ErrorContext(c.Request().Context(), "dashboard request failed", "err", err, "path", c.Request().URL.Path, "request", id)
	msg := "Something went wrong on our side. Try again in a moment."
	if id != "" {
		msg += " (request " + id + ")"
	}
	return d.errorPage(c, http.StatusInternalServerError, "Server error", msg)
}

// scopeError answers a failed scope load: 404 for no access, 500 otherwise.
func (d *Dashboard) scopeError(c echo.Context, err error, what string) error {
	if errors.Is(err, errNoAccess) {
		return d.notFound(c, "There is no "+what+" here, or you are not a member of its team.")
	}
	return d.internalError(c, err)
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
