package agentapi

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/clusterca"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// Authenticator checks a bearer token for a request to cluster (the Kubernetes API's, which maps node
// credentials to system:node:<name>).
type Authenticator interface {
	AuthenticateToken(ctx context.Context, cluster, token string) (kubeapi.User, error)
}

// Config configures the agent endpoints.
type Config struct {
	Authenticator Authenticator
	// Tunnels holds this server's agent tunnels.
	Tunnels *tunnel.Registry
	// Peers, when set, finds the server replica holding a node's tunnel when this one does not hold it;
	// requests for that node are then forwarded there over PeerTransport (default http.DefaultTransport).
	Peers         PeerLocator
	PeerTransport http.RoundTripper
	// Certificates, when set, signs the serving certificates of the agents' API proxies
	// (POST /clusters/<id>/agent/serving-certificate).
	Certificates CertificateIssuer
	Logger       *slog.Logger
}

// CertificateIssuer signs, for a node of cluster, the certificate its API proxy serves the cluster's pods with
// (clusterca.Authority). A request it refuses is clusterca.ErrBadRequest.
type CertificateIssuer interface {
	IssueAPIServing(ctx context.Context, cluster, node string, csrDER []byte) ([]byte, error)
}

// PeerLocator finds the server replica holding the tunnel of node in cluster.
type PeerLocator interface {
	// TunnelPeer returns the base URL of the replica holding the tunnel; false when no replica (or only this
	// one) holds it.
	TunnelPeer(ctx context.Context, cluster, node string) (string, bool, error)
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	if c.Authenticator == nil || c.Tunnels == nil {
		return errors.New("agentapi: Authenticator and Tunnels are required")
	}
	return nil
}

// API serves the agent endpoints and proxies connect subresources to agents.
type API struct {
	cfg Config
	log *slog.Logger
}

var _ kubeapi.Connector = (*API)(nil)

// New builds the API.
func New(cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PeerTransport == nil {
		cfg.PeerTransport = http.DefaultTransport
	}
	return &API{cfg: cfg, log: cfg.Logger}, nil
}

// Register mounts the agent endpoints on e (beside the Kubernetes API's /clusters/:cluster/*, which the
// static route outranks).
func (a *API) Register(e *echo.Echo) {
	e.GET("/clusters/:cluster/agent/connect", a.connect)
	if a.cfg.Certificates != nil {
		e.POST("/clusters/:cluster/agent/serving-certificate", a.servingCertificate)
	}
}

// maxCSR bounds a certificate request's body.
const maxCSR = 64 << 10

// servingCertificate signs the certificate request (PEM) of a node's API proxy and answers the certificate
// (PEM): only a node credential of the cluster may ask.
func (a *API) servingCertificate(c echo.Context) error {
	r, w, cluster := c.Request(), c.Response(), c.Param("cluster")
	node, err := a.authenticateNode(r, cluster)
	if err != nil {
		writeStatus(w, err)
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCSR+1))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("reading the request: "+err.Error()))
		return nil
	}
	block, _ := pem.Decode(body)
	if len(body) > maxCSR || block == nil || block.Type != "CERTIFICATE REQUEST" {
		writeStatus(w, apierrors.NewBadRequest("the body must be one PEM CERTIFICATE REQUEST of at most 64 KiB"))
		return nil
	}
	cert, err := a.cfg.Certificates.IssueAPIServing(r.Context(), cluster, node, block.Bytes)
	if errors.Is(err, clusterca.ErrBadRequest) {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return nil
	}
	if err != nil {
		a.log.ErrorContext(r.Context(), "signing an API proxy certificate failed", "cluster", cluster, "node", node, "err", err)
		writeStatus(w, apierrors.NewInternalError(errors.New("the server could not sign the certificate; its log has the details")))
		return nil
	}
	a.log.InfoContext(r.Context(), "signed an API proxy certificate", "cluster", cluster, "node", node)
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(cert)
	return nil
}

// connect authenticates a node agent and turns its request into the node's tunnel; it returns when the tunnel
// closes.
func (a *API) connect(c echo.Context) error {
	r, w, cluster := c.Request(), c.Response(), c.Param("cluster")
	node, err := a.authenticateNode(r, cluster)
	if err != nil {
		writeStatus(w, err)
		return nil
	}
	// The tunnel lives as long as the credential it was opened with: checked again every minute and whenever
	// a node credential of the cluster is revoked (docs/design/revocation.md).
	token := bearer(r)
	check := func(ctx context.Context) (bool, error) {
		again, err := a.nodeFor(ctx, cluster, token)
		var st apierrors.APIStatus
		switch {
		case err == nil:
			return again == node, nil
		case errors.As(err, &st) && st.Status().Code < http.StatusInternalServerError:
			return false, nil // unauthorized, forbidden, or the cluster is gone
		}
		return false, err
	}
	if err := a.cfg.Tunnels.Accept(w, r, cluster, node, check); err != nil {
		a.log.WarnContext(r.Context(), "agent tunnel refused", "cluster", cluster, "node", node, "err", err)
	}
	return nil
}

// bearer is r's bearer token ("" for none).
func bearer(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticateNode returns the node whose credential authenticates r for cluster, or the error to answer.
func (a *API) authenticateNode(r *http.Request, cluster string) (string, error) {
	return a.nodeFor(r.Context(), cluster, bearer(r))
}

// nodeFor returns the node whose credential token is in cluster, or the Status error to answer.
func (a *API) nodeFor(ctx context.Context, cluster, token string) (string, error) {
	if token == "" {
		return "", apierrors.NewUnauthorized("Unauthorized: a node credential is required")
	}
	u, err := a.cfg.Authenticator.AuthenticateToken(ctx, cluster, token)
	switch {
	case errors.Is(err, kubeapi.ErrUnauthenticated):
		return "", apierrors.NewUnauthorized("Unauthorized")
	case errors.Is(err, kubeapi.ErrClusterNotFound):
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, cluster)
	case err != nil:
		a.log.ErrorContext(ctx, "authenticating an agent failed", "cluster", cluster, "err", err)
		return "", apierrors.NewInternalError(errors.New("the server could not authenticate the agent; its log has the details"))
	}
	node, ok := strings.CutPrefix(u.Name, rbac.NodeUserPrefix)
	if !ok || node == "" || !slices.Contains(u.Groups, rbac.NodesGroup) {
		msg := fmt.Sprintf("User %q cannot connect as a node agent: only node credentials may", u.Name)
		return "", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New(msg))
	}
	return node, nil
}

// writeStatus answers err as a JSON Status.
func writeStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Reason: metav1.StatusReasonInternalError, Message: "Internal error occurred"}
	if errors.As(err, &se) {
		st = se.Status()
	}
	st.Kind, st.APIVersion = "Status", "v1"
	b, _ := json.Marshal(&st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}
