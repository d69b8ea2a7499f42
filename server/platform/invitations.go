package platform

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

type invitationView struct {
	ID         string     `json:"id"`
	TeamID     string     `json:"teamId"`
	Email      string     `json:"email"`
	Role       string     `json:"role"`
	InvitedBy  string     `json:"invitedBy,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  time.Time  `json:"expiresAt"`
	AcceptedAt *time.Time `json:"acceptedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	// State is pending, accepted, revoked or expired.
	State string `json:"state"`
}

func (a *API) invitationView(inv tenancy.Invitation) invitationView {
	v := invitationView{ID: inv.ID, TeamID: inv.TeamID, Email: inv.Email, Role: inv.Role, InvitedBy: inv.InvitedBy,
		CreatedAt: inv.CreatedAt, ExpiresAt: inv.ExpiresAt, AcceptedAt: optTime(inv.AcceptedAt), RevokedAt: optTime(inv.RevokedAt)}
	switch {
	case !inv.AcceptedAt.IsZero():
		v.State = "accepted"
	case !inv.RevokedAt.IsZero():
		v.State = "revoked"
	case !a.cfg.Now().Before(inv.ExpiresAt):
		v.State = "expired"
	default:
		v.State = "pending"
	}
	return v
}

func (a *API) listInvitations(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjInvitations, rbac.ActRead); p != nil {
		return p
	}
	invs, err := a.cfg.Tenancy.Invitations(c.Request().Context(), who.team)
	if err != nil {
		return a.internal(c, err, "team")
	}
	out := []invitationView{}
	for _, inv := range invs {
		out = append(out, a.invitationView(inv))
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

type createInvitationBody struct {
	Email string `json:"email"`
	Role  string `json:"role"`
	// ExpiresInHours defaults to 72 (three days).
	ExpiresInHours int `json:"expiresInHours,omitempty"`
}

// maxInvitationHours bounds an invitation's life (30 days).
const maxInvitationHours = 30 * 24

func (a *API) createInvitation(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjInvitations, rbac.ActWrite); p != nil {
		return p
	}
	var b createInvitationBody
	if p := decode(c, &b); p != nil {
		return p
	}
	var errs []FieldError
	if at := strings.LastIndexByte(b.Email, '@'); at < 1 || at == len(b.Email)-1 || len(b.Email) > 254 {
		errs = append(errs, FieldError{"email", "must be an email address"})
	}
	if b.Role != tenancy.RoleAdmin && b.Role != tenancy.RoleMember && b.Role != tenancy.RoleViewer {
		errs = append(errs, FieldError{"role", "must be admin, member or viewer"})
	}
	if b.ExpiresInHours < 0 || b.ExpiresInHours > maxInvitationHours {
		errs = append(errs, FieldError{"expiresInHours", "must be between 1 and 720 (0 or absent: 72)"})
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	token, inv, err := a.cfg.Tenancy.CreateInvitation(c.Request().Context(), who.team, b.Email, b.Role, who.UserID,
		time.Duration(b.ExpiresInHours)*time.Hour)
	if err != nil {
		return a.internal(c, err, "team")
	}
	return jsonOK(c, http.StatusCreated, map[string]any{"token": token, "invitation": a.invitationView(inv)})
}

func (a *API) revokeInvitation(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjInvitations, rbac.ActWrite); p != nil {
		return p
	}
	if err := a.cfg.Tenancy.RevokeInvitation(c.Request().Context(), who.team, c.Param("id")); err != nil {
		return a.internal(c, err, "invitation")
	}
	return noContent(c)
}

type acceptBody struct {
	Token string `json:"token"`
	// Password creates the invited user's account (for someone without one); leave it out and send an
	// Authorization header to accept as an existing user.
	Password string `json:"password,omitempty"`
}

// acceptInvitation joins the team an invitation names: as the signed-in user (Bearer token, or a browser session
// with its CSRF token), or as a new user whose account it creates with the invitation's email and the given
// password.
func (a *API) acceptInvitation(c echo.Context, who *caller) *Problem {
	var b acceptBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if b.Token == "" {
		return invalid(FieldError{"token", "is required"})
	}
	ctx := c.Request().Context()
	if bearer, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer "); ok {
		p, err := a.cfg.Tenancy.Authenticate(ctx, strings.TrimSpace(bearer))
		if err != nil {
			return a.internal(c, err, "token")
		}
		who.Principal = *p
		m, err := a.cfg.Tenancy.AcceptInvitation(ctx, b.Token, p.UserID)
		if err != nil {
			return a.internal(c, err, "invitation")
		}
		who.team = m.ID
		return jsonOK(c, http.StatusOK, teamView{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt, Role: m.Role})
	}
	if ck, err := c.Cookie(SessionCookie); err == nil && ck.Value != "" && b.Password == "" {
		// A signed-in browser (the dashboard's invitation page) accepts as its user, with the session's CSRF token.
		sc, p := a.sessionCaller(c)
		if p != nil {
			return p
		}
		who.Principal = sc.Principal
		m, err := a.cfg.Tenancy.AcceptInvitation(ctx, b.Token, sc.UserID)
		if err != nil {
			return a.internal(c, err, "invitation")
		}
		who.team = m.ID
		return jsonOK(c, http.StatusOK, teamView{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt, Role: m.Role})
	}
	if b.Password == "" {
		return invalid(FieldError{"password", "is required to create your account (or sign in and send your API token)"})
	}
	u, m, err := a.cfg.Tenancy.AcceptInvitationNewUser(ctx, b.Token, b.Password)
	if err != nil {
		return a.internal(c, err, "invitation")
	}
	who.UserID, who.Email, who.team = u.ID, u.Email, m.ID
	return jsonOK(c, http.StatusCreated, map[string]any{"user": map[string]string{"id": u.ID, "email": u.Email},
		"team": teamView{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt, Role: m.Role}})
}
