package web

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Team pages: clusters, members and invitations, the audit log; the user's own password and API tokens; adding
// nodes. Every change is a platform API request (platformcall.go).

// The platform API's JSON, as far as these pages read it.
type (
	pMember struct {
		UserID    string    `json:"userId"`
		Email     string    `json:"email"`
		Role      string    `json:"role"`
		CreatedAt time.Time `json:"joinedAt"`
	}
	pInvitation struct {
		ID         string     `json:"id"`
		Email      string     `json:"email"`
		Role       string     `json:"role"`
		CreatedAt  time.Time  `json:"createdAt"`
		ExpiresAt  time.Time  `json:"expiresAt"`
		AcceptedAt *time.Time `json:"acceptedAt"`
		RevokedAt  *time.Time `json:"revokedAt"`
	}
	pToken struct {
		ID         string     `json:"id"`
		Name       string     `json:"name"`
		Prefix     string     `json:"prefix"`
		CreatedAt  time.Time  `json:"createdAt"`
		ExpiresAt  *time.Time `json:"expiresAt"`
		LastUsedAt *time.Time `json:"lastUsedAt"`
		RevokedAt  *time.Time `json:"revokedAt"`
	}
	pJoinToken struct {
		ID          string     `json:"id"`
		Description string     `json:"description"`
		CreatedAt   time.Time  `json:"createdAt"`
		ExpiresAt   *time.Time `json:"expiresAt"`
		MaxUses     int        `json:"maxUses"`
		Uses        int        `json:"uses"`
		RevokedAt   *time.Time `json:"revokedAt"`
	}
	pAudit struct {
		ID        int64     `json:"id"`
		At        time.Time `json:"at"`
		ClusterID string    `json:"clusterId"`
		Actor     string    `json:"actor"`
		Action    string    `json:"action"`
		Resource  string    `json:"resource"`
		Result    string    `json:"result"`
		Source    string    `json:"source"`
	}
)

// items decodes a platform list answer ({"items": [...]}).
func items[T any](a platformAnswer) ([]T, error) {
	var out struct {
		Items []T `json:"items"`
	}
	err := json.Unmarshal(a.Body, &out)
	return out.Items, err
}

// teamPageLoad loads a team page's scope, answering the error itself (ok false).
func (d *Dashboard) teamPageLoad(c echo.Context) (*scope, bool, error) {
	s, err := d.teamScope(c.Request().Context(), viewerOf(c), c.Param("team"))
	if err != nil {
		return nil, false, d.scopeError(c, err, "team "+c.Param("team"))
	}
	return s, true, nil
}

type teamView struct {
	Shell     shell
	Clusters  []tenancy.Cluster
	CanCreate bool
	Form      map[string]string
	Errors    map[string]string
	Error     string
}

func (d *Dashboard) teamPage(c echo.Context) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	v := teamView{Shell: d.shell(s, s.team.Name, "team"), Clusters: s.clusters, CanCreate: d.teamCan(s, rbac.ObjClusters, rbac.ActWrite)}
	return d.render(c, http.StatusOK, teamPage(v))
}

func (d *Dashboard) createCluster(c echo.Context) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	body := map[string]string{"id": strings.TrimSpace(c.FormValue("id")), "name": strings.TrimSpace(c.FormValue("name"))}
	a, err := d.callPlatform(c, http.MethodPost, "/teams/"+url.PathEscape(s.team.ID)+"/clusters", body)
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		v := teamView{Shell: d.shell(s, s.team.Name, "team"), Clusters: s.clusters, CanCreate: true, Form: body,
			Errors: fieldErrors(a.Problem), Error: problemText(a.Problem)}
		return d.render(c, a.Status, teamPage(v))
	}
	return c.Redirect(http.StatusSeeOther, clusterURL(body["id"]))
}

type accessView struct {
	Shell       shell
	Members     []pMember
	Invitations []pInvitation
	CanManage   bool
	CanInvite   bool
	InviteURL   string // shown once after an invitation is created
	InviteEmail string
	Form        map[string]string
	Errors      map[string]string
	Error, Done string
	FormError   string // the invitation form's refusal, shown in the form
	Roles       []string
	Self        string
}

var teamRoles = []string{tenancy.RoleViewer, tenancy.RoleMember, tenancy.RoleAdmin, tenancy.RoleOwner}

func (d *Dashboard) accessView(c echo.Context, s *scope) (accessView, error) {
	v := accessView{Shell: d.shell(s, "Members of "+s.team.Name, "access"), Roles: teamRoles, Self: s.v.sess.UserID,
		CanManage: d.teamCan(s, rbac.ObjMembers, rbac.ActWrite), CanInvite: d.teamCan(s, rbac.ObjInvitations, rbac.ActWrite),
		Done: c.QueryParam("done"), Error: c.QueryParam("error")}
	a, err := d.callPlatform(c, http.MethodGet, "/teams/"+url.PathEscape(s.team.ID)+"/members", nil)
	if err != nil {
		return v, err
	}
	if a.Problem == nil {
		if v.Members, err = items[pMember](a); err != nil {
			return v, err
		}
	}
	if d.teamCan(s, rbac.ObjInvitations, rbac.ActRead) {
		a, err := d.callPlatform(c, http.MethodGet, "/teams/"+url.PathEscape(s.team.ID)+"/invitations", nil)
		if err != nil {
			return v, err
		}
		if a.Problem == nil {
			all, err := items[pInvitation](a)
			if err != nil {
				return v, err
			}
			for _, in := range all {
				if in.AcceptedAt == nil && in.RevokedAt == nil && in.ExpiresAt.After(d.cfg.Now()) {
					v.Invitations = append(v.Invitations, in)
				}
			}
		}
	}
	return v, nil
}

func (d *Dashboard) accessPage(c echo.Context) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	v, err := d.accessView(c, s)
	if err != nil {
		return d.internalError(c, err)
	}
	return d.render(c, http.StatusOK, accessPage(v))
}

func (d *Dashboard) createInvitation(c echo.Context) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	body := map[string]string{"email": strings.TrimSpace(c.FormValue("email")), "role": c.FormValue("role")}
	a, err := d.callPlatform(c, http.MethodPost, "/teams/"+url.PathEscape(s.team.ID)+"/invitations", body)
	if err != nil {
		return d.internalError(c, err)
	}
	v, err := d.accessView(c, s)
	if err != nil {
		return d.internalError(c, err)
	}
	v.Done, v.Error = "", ""
	if a.Problem != nil {
		v.Form, v.Errors = body, fieldErrors(a.Problem)
		if v.CanInvite {
			v.FormError = problemText(a.Problem) // next to the form
		} else {
			v.Error = problemText(a.Problem)
		}
		return d.render(c, a.Status, accessPage(v))
	}
	var created struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(a.Body, &created); err != nil {
		return d.internalError(c, err)
	}
	v.InviteURL = requestOrigin(c.Request()) + Prefix + "/invitation?token=" + url.QueryEscape(created.Token)
	v.InviteEmail = body["email"]
	return d.render(c, http.StatusOK, accessPage(v))
}

// teamChange sends a platform change and goes back to the access page with its outcome.
func (d *Dashboard) teamChange(c echo.Context, method, path string, body any, done string) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	a, err := d.callPlatform(c, method, "/teams/"+url.PathEscape(s.team.ID)+path, body)
	if err != nil {
		return d.internalError(c, err)
	}
	back := Prefix + "/t/" + url.PathEscape(s.team.ID) + "/access?"
	if a.Problem != nil {
		return c.Redirect(http.StatusSeeOther, back+"error="+url.QueryEscape(problemText(a.Problem)))
	}
	return c.Redirect(http.StatusSeeOther, back+"done="+url.QueryEscape(done))
}

func (d *Dashboard) revokeInvitation(c echo.Context) error {
	return d.teamChange(c, http.MethodDelete, "/invitations/"+url.PathEscape(c.Param("id")), nil, "Invitation revoked.")
}

func (d *Dashboard) setMemberRole(c echo.Context) error {
	return d.teamChange(c, http.MethodPatch, "/members/"+url.PathEscape(c.Param("user")),
		map[string]string{"role": c.FormValue("role")}, "Role changed.")
}

func (d *Dashboard) removeMember(c echo.Context) error {
	return d.teamChange(c, http.MethodDelete, "/members/"+url.PathEscape(c.Param("user")), nil, "Member removed.")
}

type auditView struct {
	Shell   shell
	Entries []pAudit
	Actor   string
	Action  string
	Cluster string
	Error   string
	Older   string // link to the next page
}

func (d *Dashboard) auditPage(c echo.Context) error {
	s, ok, err := d.teamPageLoad(c)
	if !ok {
		return err
	}
	v := auditView{Shell: d.shell(s, "Audit log of "+s.team.Name, "audit"), Actor: c.QueryParam("actor"),
		Action: c.QueryParam("action"), Cluster: c.QueryParam("cluster")}
	q := url.Values{"limit": {"100"}}
	for _, k := range []string{"actor", "action", "cluster", "before"} {
		if x := c.QueryParam(k); x != "" {
			q.Set(k, x)
		}
	}
	a, err := d.callPlatform(c, http.MethodGet, "/teams/"+url.PathEscape(s.team.ID)+"/audit?"+q.Encode(), nil)
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		v.Error = problemText(a.Problem)
		return d.render(c, a.Status, auditPage(v))
	}
	if v.Entries, err = items[pAudit](a); err != nil {
		return d.internalError(c, err)
	}
	if len(v.Entries) == 100 {
		q.Set("before", strconv.FormatInt(v.Entries[len(v.Entries)-1].ID, 10))
		q.Del("limit")
		v.Older = "?" + q.Encode()
	}
	return d.render(c, http.StatusOK, auditPage(v))
}

type accountView struct {
	Shell    shell
	Tokens   []pToken
	NewToken string // shown once
	Form     map[string]string
	Errors   map[string]string
	Error    string
	Done     string
}

func (d *Dashboard) userScope(c echo.Context) (*scope, error) {
	v := viewerOf(c)
	teams, err := d.cfg.Tenancy.TeamsOf(c.Request().Context(), v.sess.UserID)
	if err != nil {
		return nil, err
	}
	s := &scope{v: v, teams: teams}
	if len(teams) > 0 {
		s.team = teams[0]
		if s.clusters, err = d.cfg.Tenancy.ClustersOf(c.Request().Context(), teams[0].ID); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (d *Dashboard) accountView(c echo.Context) (accountView, error) {
	s, err := d.userScope(c)
	if err != nil {
		return accountView{}, err
	}
	v := accountView{Shell: d.shell(s, "Password and API tokens", "account"), Done: c.QueryParam("done"), Error: c.QueryParam("error")}
	a, err := d.callPlatform(c, http.MethodGet, "/tokens", nil)
	if err != nil {
		return v, err
	}
	if a.Problem == nil {
		all, err := items[pToken](a)
		if err != nil {
			return v, err
		}
		for _, t := range all {
			if t.RevokedAt == nil {
				v.Tokens = append(v.Tokens, t)
			}
		}
	}
	return v, nil
}

func (d *Dashboard) accountPage(c echo.Context) error {
	v, err := d.accountView(c)
	if err != nil {
		return d.internalError(c, err)
	}
	return d.render(c, http.StatusOK, accountPage(v))
}

func (d *Dashboard) changePassword(c echo.Context) error {
	a, err := d.callPlatform(c, http.MethodPost, "/password", map[string]string{"current": c.FormValue("current"), "new": c.FormValue("new")})
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		v, err := d.accountView(c)
		if err != nil {
			return d.internalError(c, err)
		}
		v.Done, v.Errors, v.Error = "", fieldErrors(a.Problem), problemText(a.Problem)
		return d.render(c, a.Status, accountPage(v))
	}
	// Every session ended, this one too: sign in with the new password.
	d.clearSessionCookie(c)
	return c.Redirect(http.StatusSeeOther, Prefix+"/signin?changed=1")
}

func (d *Dashboard) createToken(c echo.Context) error {
	body := map[string]any{"name": strings.TrimSpace(c.FormValue("name"))}
	form := map[string]string{"name": strings.TrimSpace(c.FormValue("name")), "days": c.FormValue("days")}
	if days := strings.TrimSpace(c.FormValue("days")); days != "" {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 3650 {
			v, verr := d.accountView(c)
			if verr != nil {
				return d.internalError(c, verr)
			}
			v.Form, v.Errors, v.Error = form, map[string]string{"days": "must be a number of days from 1 to 3650"}, ""
			return d.render(c, http.StatusUnprocessableEntity, accountPage(v))
		}
		body["expiresAt"] = d.cfg.Now().Add(time.Duration(n) * 24 * time.Hour).UTC().Format(time.RFC3339)
	}
	a, err := d.callPlatform(c, http.MethodPost, "/tokens", body)
	if err != nil {
		return d.internalError(c, err)
	}
	v, err := d.accountView(c)
	if err != nil {
		return d.internalError(c, err)
	}
	v.Done, v.Error = "", ""
	if a.Problem != nil {
		v.Form, v.Errors, v.Error = form, fieldErrors(a.Problem), problemText(a.Problem)
		return d.render(c, a.Status, accountPage(v))
	}
	var created struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(a.Body, &created); err != nil {
		return d.internalError(c, err)
	}
	v.NewToken = created.Token
	return d.render(c, http.StatusCreated, accountPage(v))
}

func (d *Dashboard) revokeToken(c echo.Context) error {
	a, err := d.callPlatform(c, http.MethodDelete, "/tokens/"+url.PathEscape(c.Param("id")), nil)
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		return c.Redirect(http.StatusSeeOther, Prefix+"/account?error="+url.QueryEscape(problemText(a.Problem)))
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/account?done="+url.QueryEscape("Token revoked."))
}

// downloadKubeconfig answers a kubeconfig for the cluster with a new API token of the user (the platform's).
func (d *Dashboard) downloadKubeconfig(c echo.Context) error {
	a, err := d.callPlatform(c, http.MethodPost, "/clusters/"+url.PathEscape(c.Param("cluster"))+"/kubeconfig", map[string]any{})
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		return d.errorPage(c, a.Status, a.Problem.Title, problemText(a.Problem))
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, a.Header.Get(echo.HeaderContentDisposition))
	return c.Blob(http.StatusOK, "application/yaml", a.Body)
}

type joinView struct {
	Shell       shell
	Tokens      []pJoinToken
	CanManage   bool
	Command     string // the install one-liner, shown once
	CACommand   string
	CAURL       string
	Form        map[string]string
	Errors      map[string]string
	Error       string
	NodesParams string
}

func (d *Dashboard) joinView(c echo.Context, s *scope) (joinView, error) {
	v := joinView{Shell: d.shell(s, "Add nodes", "join"), CanManage: d.teamCan(s, rbac.ObjJoinTokens, rbac.ActWrite)}
	if d.teamCan(s, rbac.ObjJoinTokens, rbac.ActRead) {
		a, err := d.callPlatform(c, http.MethodGet, "/clusters/"+url.PathEscape(s.cluster.ID)+"/join-tokens", nil)
		if err != nil {
			return v, err
		}
		if a.Problem == nil {
			all, err := items[pJoinToken](a)
			if err != nil {
				return v, err
			}
			for _, t := range all {
				if t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(d.cfg.Now())) {
					v.Tokens = append(v.Tokens, t)
				}
			}
		}
	}
	return v, nil
}

func (d *Dashboard) joinPage(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	v, err := d.joinView(c, s)
	if err != nil {
		return d.internalError(c, err)
	}
	v.Form = map[string]string{"hours": defaultJoinHours}
	return d.renderJoin(c, s, http.StatusOK, v)
}

// defaultJoinHours is the join form's expiry, the platform API's default.
var defaultJoinHours = strconv.Itoa(int(platform.DefaultJoinTokenTTL.Hours()))

// renderJoin renders the join page with the live list of the cluster's nodes under it.
func (d *Dashboard) renderJoin(c echo.Context, s *scope, status int, v joinView) error {
	q := url.Values{"cluster": {s.cluster.ID}, "resource": {"nodes"}, "sort": {"Age"}}
	nodes, err := renderListRegion(c.Request().Context(), d, s, q)
	if err != nil {
		if nodes, err = regionError(err); err != nil {
			return d.internalError(c, err)
		}
	}
	v.NodesParams = q.Encode()
	return d.render(c, status, joinPage(v, nodes))
}

func (d *Dashboard) createJoinToken(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	form := map[string]string{"description": strings.TrimSpace(c.FormValue("description")), "hours": c.FormValue("hours"),
		"maxUses": c.FormValue("maxUses"), "neverExpires": c.FormValue("neverExpires")}
	body := map[string]any{"description": form["description"]}
	errs := map[string]string{}
	// Without hours the platform's default applies (platform.DefaultJoinTokenTTL); no expiry only when asked.
	if form["neverExpires"] != "" {
		body["neverExpires"] = true
	} else if h := strings.TrimSpace(form["hours"]); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 1 || n > 24*365 {
			errs["hours"] = "must be a number of hours from 1 to 8760"
		} else {
			body["expiresAt"] = d.cfg.Now().Add(time.Duration(n) * time.Hour).UTC().Format(time.RFC3339)
		}
	}
	if m := strings.TrimSpace(form["maxUses"]); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			errs["maxUses"] = "must be 0 (unlimited) or more"
		} else {
			body["maxUses"] = n
		}
	}
	v, err := d.joinView(c, s)
	if err != nil {
		return d.internalError(c, err)
	}
	v.Form = form
	if len(errs) > 0 {
		v.Errors = errs
		return d.renderJoin(c, s, http.StatusUnprocessableEntity, v)
	}
	a, err := d.callPlatform(c, http.MethodPost, "/clusters/"+url.PathEscape(s.cluster.ID)+"/join-tokens", body)
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		v.Errors, v.Error = fieldErrors(a.Problem), problemText(a.Problem)
		return d.renderJoin(c, s, a.Status, v)
	}
	var created struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(a.Body, &created); err != nil {
		return d.internalError(c, err)
	}
	if v, err = d.joinView(c, s); err != nil {
		return d.internalError(c, err)
	}
	origin := requestOrigin(c.Request())
	v.Command = fmt.Sprintf("curl -sfL %s/install.sh | sudo sh -s - --token %s", origin, created.Token)
	if len(d.cfg.CA) > 0 {
		v.CAURL = "/platform/v1/cacerts"
		v.CACommand = fmt.Sprintf("curl -sfLk %s/platform/v1/cacerts -o wheelhouse-ca.crt && curl -sfL --cacert wheelhouse-ca.crt %s/install.sh | sudo sh -s - --token %s",
			origin, origin, created.Token)
		v.Command = fmt.Sprintf("curl -sfL --cacert wheelhouse-ca.crt %s/install.sh | sudo sh -s - --token %s", origin, created.Token)
	}
	return d.renderJoin(c, s, http.StatusCreated, v)
}

// requestOrigin is the scheme and host the browser reached the server at.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type invitationView struct {
	Token    string
	SignedIn string // the signed-in user's email, if any
	CSRF     string
	Error    string
	Errors   map[string]string
}

func (d *Dashboard) optionalViewer(c echo.Context) *viewer {
	ck, err := c.Cookie(platform.SessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	sess, err := d.cfg.Tenancy.Session(c.Request().Context(), ck.Value)
	if err != nil {
		return nil
	}
	return &viewer{sess: sess, sessionID: ck.Value}
}

// invitationPage offers to accept an invitation: as the signed-in user, or by creating an account.
func (d *Dashboard) invitationPage(c echo.Context) error {
	v := invitationView{Token: c.QueryParam("token")}
	if vw := d.optionalViewer(c); vw != nil {
		v.SignedIn, v.CSRF = vw.sess.Email, vw.sess.CSRF
	}
	return d.render(c, http.StatusOK, invitationPage(d.static, v))
}

func (d *Dashboard) acceptInvitation(c echo.Context) error {
	r := c.Request()
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return d.errorPage(c, http.StatusForbidden, "Cross-origin request", "This request came from another site.")
	}
	if ok, err := d.readForm(c); !ok {
		return err
	}
	v := invitationView{Token: c.FormValue("token")}
	body := map[string]string{"token": v.Token}
	vw := d.optionalViewer(c)
	if c.FormValue("as") == "me" && vw != nil {
		c.Set(viewerKey, vw) // the platform checks the session's CSRF token the form carried
		if subtle.ConstantTimeCompare([]byte(c.FormValue(csrfField)), []byte(vw.sess.CSRF)) != 1 {
			return d.errorPage(c, http.StatusForbidden, "Form expired", "Reload the invitation and try again.")
		}
		v.SignedIn, v.CSRF = vw.sess.Email, vw.sess.CSRF
	} else {
		body["password"] = c.FormValue("password")
		if body["password"] != c.FormValue("confirm") {
			v.Errors = map[string]string{"confirm": "does not match the password"}
			return d.render(c, http.StatusUnprocessableEntity, invitationPage(d.static, v))
		}
	}
	a, err := d.callPlatform(c, http.MethodPost, "/invitations/accept", body)
	if err != nil {
		return d.internalError(c, err)
	}
	if a.Problem != nil {
		v.Errors, v.Error = fieldErrors(a.Problem), problemText(a.Problem)
		return d.render(c, a.Status, invitationPage(d.static, v))
	}
	if c.Get(viewerKey) != nil {
		return c.Redirect(http.StatusSeeOther, Prefix+"/")
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/signin?joined=1")
}
