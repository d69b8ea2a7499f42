// Package join is the agent's first contact with the server: it exchanges a join token for the node's credential
// and keeps it, with the server's CA, in the agent's data directory, so a restarted agent never needs the token
// again.
//
// Trust: a join token K10<sha256 of the CA (DER)>::<id>.<secret> pins the server's CA. The agent fetches the CA
// from /platform/v1/cacerts over a connection it does not trust yet, refuses it unless the hash matches, and from
// then on trusts only that CA (never the system roots). A token without a pin (a server given a certificate from a
// public CA) trusts the system roots. Plain http is refused unless Config.InsecureHTTP (local development).
//
// Files in the data dir (0600, the directory 0700): credential (the bearer token), ca.crt (when pinned),
// node.json (server URL, cluster, node name).
package join

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Errors of Join and Load; compare with errors.Is.
var (
	// ErrNotJoined: the data dir holds no identity and no join token was given.
	ErrNotJoined = errors.New("join: this agent has not joined a cluster yet: pass --token with a join token")
	// ErrCAMismatch: the server's CA is not the one the join token pins (a wrong server, or a man in the middle).
	ErrCAMismatch = errors.New("join: the server's CA does not match the join token's pin")
	// ErrRefused: the server refused the join token (unknown, revoked, expired or used up).
	ErrRefused = errors.New("join: the server refused the join token")
	// ErrNameTaken: a node of that name already joined the cluster.
	ErrNameTaken = errors.New("join: a node of this name already joined the cluster")
)

// Config says where to join.
type Config struct {
	// Server is the server's base URL (https://host:port).
	Server string
	// Token is a join token; needed only when DataDir holds no identity yet.
	Token string
	// NodeName is the node's name (a DNS subdomain).
	NodeName string
	// DataDir keeps the identity.
	DataDir string
	// InsecureHTTP allows an http:// server (local development only: the credential would cross in clear).
	InsecureHTTP bool
	// Timeout bounds each request to the server (default 30 s).
	Timeout time.Duration
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.Server)
	switch {
	case c.Server == "" || err != nil || u.Host == "":
		return fmt.Errorf("join: the server URL %q is not a URL like https://host:port", c.Server)
	case u.Scheme == "http" && !c.InsecureHTTP:
		return fmt.Errorf("join: refusing the plain-http server URL %s: the node credential would cross in clear (use https, or --insecure-http for local development)", c.Server)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("join: the server URL %q must be https://", c.Server)
	case c.DataDir == "":
		return errors.New("join: a data directory is required")
	case c.NodeName == "":
		return errors.New("join: a node name is required")
	}
	return nil
}

// Identity is what a joined agent knows about itself.
type Identity struct {
	// APIServer is the cluster's Kubernetes API (https://host:port/clusters/<id>).
	APIServer string `json:"apiServer"`
	// Server is the server's base URL.
	Server   string `json:"server"`
	Cluster  string `json:"cluster"`
	NodeName string `json:"nodeName"`
	// PodCIDR and ServiceCIDR are the cluster's networks.
	PodCIDR     string `json:"podCIDR,omitempty"`
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	// Credential is the node's bearer token (kept in its own file, not in node.json).
	Credential string `json:"-"`
	// CA is the pinned CA (PEM); nil: the system roots.
	CA []byte `json:"-"`
}

// RESTConfig is a client-go configuration for the cluster's API as this node.
func (id *Identity) RESTConfig() *rest.Config {
	return &rest.Config{Host: id.APIServer, BearerToken: id.Credential,
		TLSClientConfig: rest.TLSClientConfig{CAData: id.CA}, UserAgent: "wheelhouse-agent/" + id.NodeName}
}

// TLSConfig trusts the pinned CA (or the system roots).
func (id *Identity) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(id.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(id.CA) {
			return nil, errors.New("join: the kept CA is not PEM")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

const (
	credentialFile = "credential"
	caFile         = "ca.crt"
	nodeFile       = "node.json"
)

// Load reads the identity kept in dataDir; ErrNotJoined when there is none.
func Load(dataDir string) (*Identity, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, nodeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotJoined
	}
	if err != nil {
		return nil, err
	}
	var id Identity
	if err := json.Unmarshal(b, &id); err != nil {
		return nil, fmt.Errorf("join: %s is damaged: %w", filepath.Join(dataDir, nodeFile), err)
	}
	cred, err := os.ReadFile(filepath.Join(dataDir, credentialFile))
	if err != nil {
		return nil, fmt.Errorf("join: the node credential: %w", err)
	}
	id.Credential = strings.TrimSpace(string(cred))
	if id.CA, err = os.ReadFile(filepath.Join(dataDir, caFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &id, nil
}

// Join returns the identity kept in cfg.DataDir, or joins the cluster with cfg.Token and keeps the identity. A kept
// identity of another node name or server is an error (one data dir, one node).
func Join(ctx context.Context, cfg Config) (*Identity, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	id, err := Load(cfg.DataDir)
	switch {
	case err == nil:
		if id.NodeName != cfg.NodeName || strings.TrimRight(id.Server, "/") != strings.TrimRight(cfg.Server, "/") {
			return nil, fmt.Errorf("join: %s holds the identity of node %s of %s; use another --data-dir for node %s of %s",
				cfg.DataDir, id.NodeName, id.Server, cfg.NodeName, cfg.Server)
		}
		return id, nil
	case !errors.Is(err, ErrNotJoined):
		return nil, err
	case cfg.Token == "":
		return nil, ErrNotJoined
	}
	caHash, _, _, err := tenancy.ParseJoinToken(cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("join: the join token is malformed (it looks like K10<hash>::<id>.<secret>): %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	var ca []byte
	if caHash != "" && strings.HasPrefix(cfg.Server, "https://") {
		if ca, err = fetchCA(ctx, cfg, caHash); err != nil {
			return nil, err
		}
	}
	id = &Identity{Server: strings.TrimRight(cfg.Server, "/"), NodeName: cfg.NodeName, CA: ca}
	if err := exchange(ctx, cfg, id); err != nil {
		return nil, err
	}
	return id, save(cfg.DataDir, id)
}

// fetchCA fetches the server's CA without trusting the connection and accepts it only if it matches the pin.
func fetchCA(ctx context.Context, cfg Config, caHash string) ([]byte, error) {
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // verified by the pin below
	body, status, err := get(ctx, client, strings.TrimRight(cfg.Server, "/")+"/platform/v1/cacerts")
	if err != nil {
		return nil, fmt.Errorf("join: fetching the server's CA: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("join: fetching the server's CA: HTTP %d", status)
	}
	block, _ := pem.Decode(body)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("join: the server's CA is not a PEM certificate: %w", ErrCAMismatch)
	}
	sum := sha256.Sum256(block.Bytes)
	if hex.EncodeToString(sum[:]) != caHash {
		return nil, ErrCAMismatch
	}
	return pem.EncodeToMemory(block), nil
}

// exchange posts the join token and fills in the identity.
func exchange(ctx context.Context, cfg Config, id *Identity) error {
	tlsCfg, err := id.TLSConfig()
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	reqBody, _ := json.Marshal(map[string]string{"token": cfg.Token, "nodeName": cfg.NodeName})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, id.Server+"/platform/v1/join", bytes.NewReader(reqBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("join: reading the answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusCreated:
	case http.StatusConflict:
		return fmt.Errorf("%w: %s (revoke its credential in the dashboard or with the platform API, or choose another --node-name)", ErrNameTaken, cfg.NodeName)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: %s", ErrRefused, problemDetail(body))
	default:
		return fmt.Errorf("join: the server answered HTTP %d: %s", resp.StatusCode, problemDetail(body))
	}
	var joined struct{ Credential, Cluster, NodeName, Server, PodCIDR, ServiceCIDR string }
	if err := json.Unmarshal(body, &joined); err != nil || joined.Credential == "" {
		return fmt.Errorf("join: the server's answer is not a node credential")
	}
	id.Credential, id.Cluster, id.APIServer = joined.Credential, joined.Cluster, joined.Server
	id.PodCIDR, id.ServiceCIDR = joined.PodCIDR, joined.ServiceCIDR
	if id.APIServer == "" {
		id.APIServer = id.Server + "/clusters/" + joined.Cluster
	}
	return nil
}

// problemDetail is the detail (or title) of a problem+json body, or the body's start.
func problemDetail(body []byte) string {
	var p struct{ Title, Detail string }
	if json.Unmarshal(body, &p) == nil && (p.Detail != "" || p.Title != "") {
		if p.Detail != "" {
			return p.Detail
		}
		return p.Title
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return strings.TrimSpace(string(body))
}

func get(ctx context.Context, client *http.Client, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b, resp.StatusCode, err
}

// save writes the identity: the credential and CA first, node.json last (its presence means joined).
func save(dataDir string, id *Identity) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dataDir, credentialFile), []byte(id.Credential+"\n")); err != nil {
		return err
	}
	if len(id.CA) > 0 {
		if err := writeFile(filepath.Join(dataDir, caFile), id.CA); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dataDir, nodeFile), append(b, '\n'))
}

// writeFile writes atomically with mode 0600.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
