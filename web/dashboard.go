// Package web is the dashboard: server-rendered templ pages under /ui, live regions pushed over one websocket per
// tab (web/live), and the actions people take from it. Kubernetes objects are read from the API's watch cache
// and written through the Kubernetes API pipeline as the signed-in user; team actions go through the platform
// API in process, so RBAC, validation, admission and the audit log are exactly the APIs'. See
// docs/design/dashboard.md.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/static"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

// Prefix is where the dashboard is served.
const Prefix = "/ui"

// Config configures the dashboard.
type Config struct {
	Tenancy *tenancy.Store
	// API is the Kubernetes API: its watch cache for reads, UserConfig for writes as the signed-in user.
	API        *kubeapi.API
	Registry   *resources.Registry
	Authorizer kubeapi.Authorizer
	Policy     *rbac.Platform
	// Platform serves the platform API (/platform/v1) in process: team actions (invitations, members, API
	// tokens, join tokens, kubeconfigs) are requests to it with the user's session, so its authorization and
	// audit apply to them.
	Platform http.Handler
	// CA is the PEM of the server's own CA (nil with a publicly trusted certificate): the install one-liner
	// fetches it first.
	CA []byte
	// Health reports the control plane's components on the overview (optional).
	Health func(ctx context.Context) []HealthCheck
	// Live tunes the live connections (tests shorten intervals).
	Live   live.Options
	Logger *slog.Logger
	Now    func() time.Time
}

// Dashboard serves the dashboard.
type Dashboard struct {
	cfg      Config
	log      *slog.Logger
	upgrader websocket.Upgrader
	static   *static.Files
	byKey    map[string]*resources.Resource // resources by key (resourceKey), the preferred version of each
	byGVK    map[schema.GroupVersionKind]*resources.Resource
	renders  *renderCache // live regions' renders, shared by the tabs that show the same
}

// New builds the dashboard.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Tenancy == nil || cfg.API == nil || cfg.Registry == nil || cfg.Authorizer == nil || cfg.Policy == nil ||
		cfg.Platform == nil {
		return nil, errors.New("web: Tenancy, API, Registry, Authorizer, Policy and Platform are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Live.Logger == nil {
		cfg.Live.Logger = cfg.Logger
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, static: static.New(), byKey: map[string]*resources.Resource{},
		byGVK: map[schema.GroupVersionKind]*resources.Resource{}, renders: newRenderCache()}
	for _, r := range cfg.Registry.All() {
		if !r.Virtual {
			d.byGVK[r.GVK] = r
		}
		if _, dup := d.byKey[resourceKey(r)]; !dup && !r.Virtual && r.HasVerb("list") {
			d.byKey[resourceKey(r)] = r
		}
	}
	for _, k := range []string{"pods", "nodes", "events", "namespaces", "deployments.apps", "replicasets.apps", "secrets"} {
		if d.byKey[k] == nil {
			return nil, errors.New("web: the registry has no " + k)
		}
	}
	d.upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 16 << 10, CheckOrigin: sameOriginRequest,
		EnableCompression: true}
	return d, nil
}

// Register mounts the dashboard on e.
func (d *Dashboard) Register(e *echo.Echo) {
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, Prefix+"/") })
	e.GET(static.Prefix+"*", echo.WrapHandler(d.static))
	g := e.Group(Prefix, d.secureHeaders, d.limitBody)
	g.GET("/signin", d.signInPage)
	g.POST("/signin", d.signIn)
	g.GET("/invitation", d.invitationPage)
	g.POST("/invitation", d.acceptInvitation)
	a := g.Group("", d.authenticated)
	a.GET("", d.home)
	a.GET("/", d.home)
	a.POST("/signout", d.signOut)
	a.GET("/account", d.accountPage)
	a.POST("/account/password", d.changePassword)
	a.POST("/account/tokens", d.createToken)
	a.POST("/account/tokens/:id/revoke", d.revokeToken)
	a.GET("/t/:team", d.teamPage)
	a.POST("/t/:team/clusters", d.createCluster)
	a.GET("/t/:team/access", d.accessPage)
	a.POST("/t/:team/invitations", d.createInvitation)
	a.POST("/t/:team/invitations/:id/revoke", d.revokeInvitation)
	a.POST("/t/:team/members/:user/role", d.setMemberRole)
	a.POST("/t/:team/members/:user/remove", d.removeMember)
	a.GET("/t/:team/audit", d.auditPage)
	a.GET("/c/:cluster", d.overviewPage)
	a.POST("/c/:cluster/kubeconfig", d.downloadKubeconfig)
	a.GET("/c/:cluster/join", d.joinPage)
	a.POST("/c/:cluster/join", d.createJoinToken)
	a.GET("/c/:cluster/apply", d.applyPage)
	a.POST("/c/:cluster/apply", d.apply)
	a.GET("/c/:cluster/r/:resource", d.listPage)
	a.GET("/c/:cluster/r/:resource/:namespace/:name", d.detailPage)
	a.GET("/c/:cluster/r/:resource/:namespace/:name/yaml", d.yamlPage)
	a.GET("/c/:cluster/r/:resource/:namespace/:name/confirm/:action", d.confirmPage)
	a.POST("/c/:cluster/r/:resource/:namespace/:name/do/:action", d.act)
	a.GET("/c/:cluster/logs/:namespace/:name", d.logsPage)
	a.GET("/c/:cluster/logs/:namespace/:name/stream", d.logsStream)
	a.GET("/c/:cluster/logs/:namespace/:name/download", d.logsDownload)
	a.GET("/live", d.serveLive)
	g.Any("/*", func(c echo.Context) error { return d.notFound(c, "no such page") })
}
