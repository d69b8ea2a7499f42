package platform

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeconfig"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

type clusterView struct {
	ID          string    `json:"id"`
	TeamID      string    `json:"teamId"`
	Name        string    `json:"name"`
	ServiceCIDR string    `json:"serviceCIDR"`
	PodCIDR     string    `json:"podCIDR"`
	CreatedAt   time.Time `json:"createdAt"`
	// Server is the cluster's Kubernetes API: the server of its kubeconfig.
	Server string `json:"server"`
}

func clusterViewOf(c echo.Context, cl tenancy.Cluster) clusterView {
	return clusterView{ID: cl.ID, TeamID: cl.TeamID, Name: cl.Name, ServiceCIDR: cl.ServiceCIDR.String(),
		PodCIDR: cl.PodCIDR.String(), CreatedAt: cl.CreatedAt, Server: serverURL(c) + "/clusters/" + cl.ID}
}

// serverURL is this server's base URL as the client reached it.
func serverURL(c echo.Context) string { return c.Scheme() + "://" + c.Request().Host }

func (a *API) listClusters(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjClusters, rbac.ActRead); p != nil {
		return p
	}
	cls, err := a.cfg.Tenancy.ClustersOf(c.Request().Context(), who.team)
	if err != nil {
		return a.internal(c, err, "team")
	}
	out := []clusterView{}
	for _, cl := range cls {
		out = append(out, clusterViewOf(c, cl))
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

type createClusterBody struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	PodCIDR     string `json:"podCIDR,omitempty"`
}

// createCluster adds a cluster to the team and creates its built-in objects (namespaces, roles, the kubernetes
// Service), so it is usable as soon as it is answered.
func (a *API) createCluster(c echo.Context, who *caller) *Problem {
	if _, p := a.teamAccess(c, who, c.Param("team"), rbac.ObjClusters, rbac.ActWrite); p != nil {
		return p
	}
	var b createClusterBody
	if p := decode(c, &b); p != nil {
		return p
	}
	var errs []FieldError
	if !tenancy.ValidID(b.ID) {
		errs = append(errs, FieldError{"id", "must be a DNS label: lower-case letters, digits and '-', 1 to 63 characters"})
	}
	if b.Name == "" || len(b.Name) > 128 {
		errs = append(errs, FieldError{"name", "must have 1 to 128 bytes"})
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	ctx := c.Request().Context()
	cl, err := a.cfg.Tenancy.CreateCluster(ctx, who.team, b.ID, b.Name, b.ServiceCIDR, b.PodCIDR)
	if err != nil {
		return a.internal(c, err, "team")
	}
	if err := a.cfg.Clusters.EnsureCluster(ctx, cl.ID); err != nil {
		// The row exists; EnsureCluster is idempotent and runs again at every server start.
		return a.internal(c, err, "cluster")
	}
	return jsonOK(c, http.StatusCreated, clusterViewOf(c, cl))
}

func (a *API) getCluster(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjClusters, rbac.ActRead)
	if p != nil {
		return p
	}
	return jsonOK(c, http.StatusOK, clusterViewOf(c, cl))
}

// deleteCluster removes every object of the cluster, then the cluster.
func (a *API) deleteCluster(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjClusters, rbac.ActDelete)
	if p != nil {
		return p
	}
	ctx := c.Request().Context()
	if err := a.cfg.Clusters.DeleteClusterObjects(ctx, cl.ID); err != nil {
		return a.internal(c, err, "cluster")
	}
	if err := a.cfg.Tenancy.DeleteCluster(ctx, cl.ID); err != nil {
		return a.internal(c, err, "cluster")
	}
	return noContent(c)
}

type kubeconfigBody struct {
	// ExpiresInDays gives the kubeconfig's token an expiry (0 or absent: none).
	ExpiresInDays int `json:"expiresInDays,omitempty"`
}

// kubeconfig mints an API token for the caller and answers a kubeconfig for the cluster that uses it. What the
// token may do in the cluster is the caller's team role and RBAC, as for any of their tokens.
func (a *API) kubeconfig(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjKubeconfig, rbac.ActCreate)
	if p != nil {
		return p
	}
	var b kubeconfigBody
	if c.Request().ContentLength != 0 {
		if p := decode(c, &b); p != nil {
			return p
		}
	}
	if b.ExpiresInDays < 0 || b.ExpiresInDays > 3650 {
		return invalid(FieldError{"expiresInDays", "must be between 0 and 3650"})
	}
	var expires time.Time
	if b.ExpiresInDays > 0 {
		expires = a.cfg.Now().Add(time.Duration(b.ExpiresInDays) * 24 * time.Hour)
	}
	token, _, err := a.cfg.Tenancy.CreateToken(c.Request().Context(), who.UserID, "kubeconfig "+cl.ID, expires)
	if err != nil {
		return a.internal(c, err, "token")
	}
	yaml, err := kubeconfig.Build(cl.ID, serverURL(c)+"/clusters/"+cl.ID, token, a.cfg.CA)
	if err != nil {
		return a.internal(c, err, "kubeconfig")
	}
	c.Response().Header().Set("Content-Disposition", "attachment; filename=kubeconfig-"+cl.ID+".yaml")
	if err := c.Blob(http.StatusCreated, "application/yaml", yaml); err != nil {
		return a.internal(c, err, "kubeconfig")
	}
	return nil
}

type joinTokenView struct {
	ID          string     `json:"id"`
	ClusterID   string     `json:"clusterId"`
	Description string     `json:"description,omitempty"`
	CreatedBy   string     `json:"createdBy,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	MaxUses     int        `json:"maxUses,omitempty"`
	Uses        int        `json:"uses"`
	LastUsedAt  *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

func joinTokenViewOf(jt tenancy.JoinToken) joinTokenView {
	return joinTokenView{ID: jt.ID, ClusterID: jt.ClusterID, Description: jt.Description, CreatedBy: jt.CreatedBy,
		CreatedAt: jt.CreatedAt, ExpiresAt: optTime(jt.ExpiresAt), MaxUses: jt.MaxUses, Uses: jt.Uses,
		LastUsedAt: optTime(jt.LastUsedAt), RevokedAt: optTime(jt.RevokedAt)}
}

func (a *API) listJoinTokens(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjJoinTokens, rbac.ActRead)
	if p != nil {
		return p
	}
	jts, err := a.cfg.Tenancy.JoinTokens(c.Request().Context(), cl.ID)
	if err != nil {
		return a.internal(c, err, "cluster")
	}
	out := []joinTokenView{}
	for _, jt := range jts {
		out = append(out, joinTokenViewOf(jt))
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

// DefaultJoinTokenTTL is the lifetime of a join token created without expiresAt (kubeadm's token TTL).
const DefaultJoinTokenTTL = 24 * time.Hour

type createJoinTokenBody struct {
	Description string `json:"description,omitempty"`
	// ExpiresAt defaults to DefaultJoinTokenTTL from now.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// NeverExpires asks for a token without expiry (not with ExpiresAt).
	NeverExpires bool `json:"neverExpires,omitempty"`
	MaxUses      int  `json:"maxUses,omitempty"`
}

func (a *API) createJoinToken(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjJoinTokens, rbac.ActWrite)
	if p != nil {
		return p
	}
	var b createJoinTokenBody
	if c.Request().ContentLength != 0 {
		if p := decode(c, &b); p != nil {
			return p
		}
	}
	var errs []FieldError
	var expires time.Time // zero: never
	switch {
	case b.ExpiresAt != nil && b.NeverExpires:
		errs = append(errs, FieldError{"neverExpires", "must not be given with expiresAt"})
	case b.ExpiresAt != nil:
		if expires = *b.ExpiresAt; !expires.After(a.cfg.Now()) {
			errs = append(errs, FieldError{"expiresAt", "must be in the future"})
		}
	case !b.NeverExpires:
		expires = a.cfg.Now().Add(DefaultJoinTokenTTL)
	}
	if b.MaxUses < 0 {
		errs = append(errs, FieldError{"maxUses", "must be positive (0 or absent: unlimited)"})
	}
	if len(b.Description) > 256 {
		errs = append(errs, FieldError{"description", "must have at most 256 bytes"})
	}
	if len(errs) > 0 {
		return invalid(errs...)
	}
	token, jt, err := a.cfg.Tenancy.CreateJoinToken(c.Request().Context(), cl.ID, who.UserID, b.Description, expires,
		b.MaxUses, caHash(a.cfg.CA))
	if err != nil {
		return a.internal(c, err, "cluster")
	}
	return jsonOK(c, http.StatusCreated, map[string]any{"token": token, "joinToken": joinTokenViewOf(jt)})
}

func (a *API) revokeJoinToken(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjJoinTokens, rbac.ActWrite)
	if p != nil {
		return p
	}
	if err := a.cfg.Tenancy.RevokeJoinToken(c.Request().Context(), cl.ID, c.Param("id")); err != nil {
		return a.internal(c, err, "join token "+strconv.Quote(c.Param("id")))
	}
	return noContent(c)
}

// caHash is the hex SHA-256 of the CA certificate (DER) in pem, the pin a join token carries; "" without one.
func caHash(pemCA []byte) string {
	block, _ := pem.Decode(pemCA)
	if block == nil {
		return ""
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}
