package platform

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

type joinBody struct {
	// Token is a join token of the cluster (K10<CA hash>::<id>.<secret>).
	Token    string `json:"token"`
	NodeName string `json:"nodeName"`
}

type joinedView struct {
	// Credential is the node's bearer token for its cluster's Kubernetes API, shown only here.
	Credential string `json:"credential"`
	Cluster    string `json:"cluster"`
	NodeName   string `json:"nodeName"`
	// Server is the cluster's Kubernetes API.
	Server string `json:"server"`
	// PodCIDR and ServiceCIDR are the cluster's networks (the agent routes and masquerades by them).
	PodCIDR     string `json:"podCIDR,omitempty"`
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
}

// caCerts serves the CA of the server's certificate (PEM), unauthenticated: an agent fetches it before it
// trusts the server and accepts it only if its hash matches the pin in its join token. 404 when the server
// serves a certificate of its own (--tls-cert-file) whose CA it does not hold. Public and not audited, like
// the OpenAPI document.
func (a *API) serveCACerts(c echo.Context) error {
	if len(a.cfg.CA) == 0 {
		return writeProblem(c, problem(http.StatusNotFound, "not-found", "Not found", "this server was given its certificate; it holds no CA to serve"))
	}
	return c.Blob(http.StatusOK, "application/x-pem-file", a.cfg.CA)
}

// join exchanges a join token for a node credential bound to one node name (the agent calls it once and keeps
// the credential). The join token is the authentication; a name that already joined is 409.
func (a *API) join(c echo.Context, who *caller) *Problem {
	var b joinBody
	if p := decode(c, &b); p != nil {
		return p
	}
	if b.Token == "" {
		return invalid(FieldError{"token", "is required"})
	}
	who.Email = "system:node:" + b.NodeName
	cred, nc, err := a.cfg.Tenancy.JoinNode(c.Request().Context(), b.Token, b.NodeName)
	if err != nil {
		if p := fromTenancy(err, "node"); p.Status == http.StatusUnprocessableEntity {
			return invalid(FieldError{"nodeName", "must be a DNS subdomain (lower-case letters, digits, '-' and '.')"})
		}
		return a.internal(c, err, "join token")
	}
	view := joinedView{Credential: cred, Cluster: nc.ClusterID, NodeName: nc.NodeName, Server: serverURL(c) + "/clusters/" + nc.ClusterID}
	if cl, err := a.cfg.Tenancy.Cluster(c.Request().Context(), nc.ClusterID); err == nil {
		who.team = cl.TeamID
		view.PodCIDR, view.ServiceCIDR = cl.PodCIDR.String(), cl.ServiceCIDR.String()
	}
	return jsonOK(c, http.StatusCreated, view)
}

type nodeCredentialView struct {
	ID          string     `json:"id"`
	NodeName    string     `json:"nodeName"`
	JoinTokenID string     `json:"joinTokenId,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

func (a *API) listNodeCredentials(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjJoinTokens, rbac.ActRead)
	if p != nil {
		return p
	}
	ncs, err := a.cfg.Tenancy.NodeCredentials(c.Request().Context(), cl.ID)
	if err != nil {
		return a.internal(c, err, "cluster")
	}
	out := []nodeCredentialView{}
	for _, nc := range ncs {
		out = append(out, nodeCredentialViewOf(nc))
	}
	return jsonOK(c, http.StatusOK, map[string]any{"items": out})
}

func nodeCredentialViewOf(nc tenancy.NodeCredential) nodeCredentialView {
	return nodeCredentialView{ID: nc.ID, NodeName: nc.NodeName, JoinTokenID: nc.JoinTokenID, CreatedAt: nc.CreatedAt,
		LastUsedAt: optTime(nc.LastUsedAt), RevokedAt: optTime(nc.RevokedAt)}
}

// revokeNodeCredential cuts a node off (its agent is refused from the next request) and frees its name.
func (a *API) revokeNodeCredential(c echo.Context, who *caller) *Problem {
	cl, p := a.clusterAccess(c, who, c.Param("cluster"), rbac.ObjJoinTokens, rbac.ActWrite)
	if p != nil {
		return p
	}
	if err := a.cfg.Tenancy.RevokeNodeCredential(c.Request().Context(), cl.ID, c.Param("node")); err != nil {
		return a.internal(c, err, "node credential "+strconv.Quote(c.Param("node")))
	}
	return noContent(c)
}
