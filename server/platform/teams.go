package platform

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Views: the JSON the API answers with. Zero times are left out.

type teamView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	Role      string    `json:"role,omitempty"` // the caller's role
}

type memberView struct {
	UserID   string    `json:"userId"`
	Email    string    `json:"email"`
	Role     string    `json:"role"`
	JoinedAt time.Time `json:"joinedAt"`
}

type meView struct {
	ID    string     `json:"id"`
	Email string     `json:"email"`
	Teams []teamView `json:"teams"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (a *API) me(c echo.Context, who *caller) *Problem {
	teams, err := a.cfg.Tenancy.TeamsOf(c.Request().Context(), who.UserID)
	if err != nil {
		return a.internal(c, err, "user")
	}
	out := meView{ID: who.UserID, Email: who.Email, Teams: []teamView{}}
	for _, t := range teams {
		out.Teams = append(out.Teams, teamView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Role: t.Role})
	}
	return jsonOK(c, http.StatusOK, out)
}

func (a *API) listTeams(c echo.Context, who *caller) *Problem {
	teams, err := a.cfg.Tenancy.TeamsOf(c.Request().Context(), who.UserID)
	if err != nil {
		return a.internal(c, err, "user")
	}
	out := []teamView{}
	for _, t := range teams {
		out = append(out, teamView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Role: t.Role})
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

type createTeamBody struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (a *API) createTeam(c echo.Context, who *caller) *Problem {
	var b createTeamBody
	if p := decode(c, &b); p != nil {
		return p
	}
	var errs []FieldError
	if !tenancy.ValidID(b.ID) {
		errs = append(errs, FieldError{"id", "must be a DNS label: lower-case letters, digits and '-', 1 to 63 characters, starting and ending with a letter or digit"})
	}
	if b.Name == "" || len(b.Name) > 128 {
		errs = append(errs, FieldError{"name", "must have 1 to 128 bytes"})
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	t, err := a.cfg.Tenancy.CreateTeam(c.Request().Context(), who.UserID, b.ID, b.Name)
	if err != nil {
		return a.internal(c, err, "team")
	}
	who.team = t.ID
	return jsonOK(c, http.StatusCreated, teamView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Role: tenancy.RoleOwner})
}

func (a *API) getTeam(c echo.Context, who *caller) *Problem {
	role, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjTeam, rbac.ActRead)
	if p != nil {
		return p
	}
	t, err := a.cfg.Tenancy.Team(c.Request().Context(), who.team)
	if err != nil {
		return a.internal(c, err, "team "+strconv.Quote(who.team))
	}
	return jsonOK(c, http.StatusOK, teamView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Role: role})
}

type renameTeamBody struct {
	Name string `json:"name"`
}

func (a *API) renameTeam(c echo.Context, who *caller) *Problem {
	role, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjTeam, rbac.ActWrite)
	if p != nil {
		return p
	}
	var b renameTeamBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if b.Name == "" || len(b.Name) > 128 {
		return invalid(FieldError{"name", "must have 1 to 128 bytes"})
	}
	ctx := c.Request().Context()
	if err := a.cfg.Tenancy.RenameTeam(ctx, who.team, b.Name); err != nil {
		return a.internal(c, err, "team")
	}
	t, err := a.cfg.Tenancy.Team(ctx, who.team)
	if err != nil {
		return a.internal(c, err, "team")
	}
	return jsonOK(c, http.StatusOK, teamView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Role: role})
}

// deleteTeam removes the team, its clusters and everything in them.
func (a *API) deleteTeam(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjTeam, rbac.ActDelete); p != nil {
		return p
	}
	ctx := c.Request().Context()
	clusters, err := a.cfg.Tenancy.ClustersOf(ctx, who.team)
	if err != nil {
		return a.internal(c, err, "team")
	}
	// Objects first: a failure leaves the team (and the way to retry) in place.
	for _, cl := range clusters {
		if err := a.cfg.Clusters.DeleteClusterObjects(ctx, cl.ID); err != nil {
			return a.internal(c, err, "cluster")
		}
	}
	if _, err := a.cfg.Tenancy.DeleteTeam(ctx, who.team); err != nil {
		return a.internal(c, err, "team")
	}
	return noContent(c)
}

type transferBody struct {
	UserID string `json:"userId"`
}

func (a *API) transferTeam(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjTeam, rbac.ActTransfer); p != nil {
		return p
	}
	var b transferBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if b.UserID == "" {
		return invalid(FieldError{"userId", "is required: the member who becomes owner"})
	}
	if err := a.cfg.Tenancy.TransferOwnership(c.Request().Context(), who.team, b.UserID); err != nil {
		return a.internal(c, err, "member")
	}
	return a.listMembersOf(c, who.team)
}

func (a *API) listMembers(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjMembers, rbac.ActRead); p != nil {
		return p
	}
	return a.listMembersOf(c, who.team)
}

func (a *API) listMembersOf(c echo.Context, team string) *Problem {
	ms, err := a.cfg.Tenancy.Members(c.Request().Context(), team)
	if err != nil {
		return a.internal(c, err, "team")
	}
	out := []memberView{}
	for _, m := range ms {
		out = append(out, memberView{UserID: m.UserID, Email: m.Email, Role: m.Role, JoinedAt: m.CreatedAt})
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

type roleBody struct {
	Role string `json:"role"`
}

func (a *API) setMemberRole(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjMembers, rbac.ActWrite); p != nil {
		return p
	}
	var b roleBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if b.Role != tenancy.RoleAdmin && b.Role != tenancy.RoleMember && b.Role != tenancy.RoleViewer {
		return invalid(FieldError{"role", "must be admin, member or viewer (ownership moves by transfer)"})
	}
	if err := a.cfg.Tenancy.SetRole(c.Request().Context(), who.team, c.Param("user"), b.Role); err != nil {
		return a.internal(c, err, "member")
	}
	return a.listMembersOf(c, who.team)
}

// removeMember removes a member; any member may remove themselves (leave), except the owner.
func (a *API) removeMember(c echo.Context, who *caller) *Problem {
	user := c.Param("user")
	if user == who.UserID {
		if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjTeam, rbac.ActRead); p != nil {
			return p
		}
	} else if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjMembers, rbac.ActWrite); p != nil {
		return p
	}
	if err := a.cfg.Tenancy.RemoveMember(c.Request().Context(), who.team, user); err != nil {
		return a.internal(c, err, "member")
	}
	return noContent(c)
}

// jsonOK writes v as JSON; it returns a problem only if that fails before anything was sent.
func jsonOK(c echo.Context, status int, v any) *Problem {
	if err := c.JSON(status, v); err != nil {
		return problem(http.StatusInternalServerError, "internal", "Internal error", "the response could not be written")
	}
	return nil
}

func noContent(c echo.Context) *Problem {
	if err := c.NoContent(http.StatusNoContent); err != nil {
		return problem(http.StatusInternalServerError, "internal", "Internal error", "the response could not be written")
	}
	return nil
}
