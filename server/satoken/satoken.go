// Package satoken issues and verifies ServiceAccount tokens: JWTs signed (ES256) with the cluster's own key,
// audience-bound and expiring, with the claims upstream Kubernetes puts in them (kubernetes.io: namespace,
// serviceaccount, and the pod, secret or node the token is bound to). TokenRequest (`kubectl create token`)
// and the projected token of a pod are issued here; the Kubernetes API accepts them as bearer tokens after
// Verify and a check that the service account (and bound object) still exist with the same UIDs and are not
// being deleted (Ended: a deletionTimestamp more than DeletionLeeway ago ends the token, as upstream).
package satoken

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// APIAudience is the audience of tokens for the Kubernetes API itself (upstream's default issuer and audience),
// the default of a TokenRequest without audiences.
const APIAudience = "https://kubernetes.default.svc.cluster.local"

// Issuer is the iss of every token.
const Issuer = APIAudience

// Keys gives each cluster's signing key (tenancy.Store implements it).
type Keys interface {
	SigningKey(ctx context.Context, cluster string) (crypto.Signer, error)
}

// Ref names an object a token is bound to, or its service account.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// KubernetesClaims is upstream's "kubernetes.io" claim.
type KubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
}

// Claims are a token's claims.
type Claims struct {
	jwt.Claims
	Kubernetes KubernetesClaims `json:"kubernetes.io"`
	// Cluster names the cluster the token belongs to (defense in depth: clusters also have separate keys).
	Cluster string `json:"wheelhouse.dev/cluster"`
}

// Request is what to issue.
type Request struct {
	Cluster    string
	Namespace  string
	Account    Ref
	Audiences  []string // empty: APIAudience
	Expiration time.Duration
	Pod        *Ref
	Secret     *Ref
	Node       *Ref
}

// Tokens issues and verifies tokens; keys are read once per cluster and kept.
type Tokens struct {
	keys Keys
	now  func() time.Time
	mu   sync.Mutex
	byID map[string]*ecdsa.PrivateKey
}

// New builds Tokens over keys; now nil is time.Now.
func New(keys Keys, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{keys: keys, now: now, byID: map[string]*ecdsa.PrivateKey{}}
}

func (t *Tokens) key(ctx context.Context, cluster string) (*ecdsa.PrivateKey, error) {
	t.mu.Lock()
	k, ok := t.byID[cluster]
	t.mu.Unlock()
	if ok {
		return k, nil
	}
	signer, err := t.keys.SigningKey(ctx, cluster)
	if err != nil {
		return nil, err
	}
	k, ok = signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("satoken: cluster %s: the signing key is not ECDSA", cluster)
	}
	t.mu.Lock()
	t.byID[cluster] = k
	t.mu.Unlock()
	return k, nil
}

// Forget drops a deleted cluster's key.
func (t *Tokens) Forget(cluster string) {
	t.mu.Lock()
	delete(t.byID, cluster)
	t.mu.Unlock()
}

// Issue signs a token for r and returns it with its expiry.
func (t *Tokens) Issue(ctx context.Context, r Request) (string, time.Time, error) {
	k, err := t.key(ctx, r.Cluster)
	if err != nil {
		return "", time.Time{}, err
	}
	kid, err := keyID(&k.PublicKey)
	if err != nil {
		return "", time.Time{}, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("satoken: %w", err)
	}
	now := t.now().Truncate(time.Second)
	exp := now.Add(r.Expiration)
	aud := r.Audiences
	if len(aud) == 0 {
		aud = []string{APIAudience}
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("satoken: %w", err)
	}
	c := Claims{
		Claims: jwt.Claims{Issuer: Issuer, Subject: "system:serviceaccount:" + r.Namespace + ":" + r.Account.Name,
			Audience: jwt.Audience(aud), Expiry: jwt.NewNumericDate(exp), NotBefore: jwt.NewNumericDate(now),
			IssuedAt: jwt.NewNumericDate(now), ID: hex.EncodeToString(jti[:])},
		Kubernetes: KubernetesClaims{Namespace: r.Namespace, ServiceAccount: r.Account, Pod: r.Pod, Secret: r.Secret, Node: r.Node},
		Cluster:    r.Cluster,
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("satoken: sign: %w", err)
	}
	return tok, exp, nil
}

// keyID names a public key in tokens' kid header and in the JWKS: the unpadded base64url SHA-256 of its DER
// (PKIX) form, as upstream names its service account keys.
func keyID(pub *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("satoken: key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// JWKSPath is where the cluster's API serves its public keys (under the cluster's API prefix), as upstream.
const JWKSPath = "/openid/v1/jwks"

// Discovery is the cluster's OpenID Provider Configuration, served at /.well-known/openid-configuration, as
// upstream's ServiceAccountIssuerDiscovery: with it and the JWKS, anyone can verify the cluster's tokens with
// a standard OIDC library. The issuer is the in-cluster API name, so the keys' URL is too: pods (where the
// tokens are used) reach both through the cluster's kubernetes Service.
type Discovery struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// OpenIDConfiguration is the discovery document of every cluster.
func OpenIDConfiguration() Discovery {
	return Discovery{Issuer: Issuer, JWKSURI: Issuer + JWKSPath, ResponseTypes: []string{"id_token"},
		SubjectTypes: []string{"public"}, SigningAlgs: []string{string(jose.ES256)}}
}

// JWKS is cluster's public key set: the key its tokens are signed with.
func (t *Tokens) JWKS(ctx context.Context, cluster string) (jose.JSONWebKeySet, error) {
	k, err := t.key(ctx, cluster)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	kid, err := keyID(&k.PublicKey)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}}}, nil
}

// DeletionLeeway is how long past its deletionTimestamp an object still carries the tokens bound to it:
// upstream's leeway (go-jose's jwt.DefaultLeeway), which allows for replicas whose clocks disagree. A pod
// deleted gracefully has a deletionTimestamp at the end of its grace period, so its token serves the pod's
// shutdown and ends a minute after it; a pod kept terminating by a finalizer loses its token all the same.
const DeletionLeeway = time.Minute

// Ended reports whether a token bound to an object (or issued to a service account) whose deletionTimestamp
// is deletion no longer authenticates: the object is being deleted and deletion is more than DeletionLeeway
// ago (upstream's rule). A nil deletion (not being deleted) never ends a token.
func (t *Tokens) Ended(deletion *time.Time) bool {
	return deletion != nil && deletion.Before(t.now().Add(-DeletionLeeway))
}

// ErrInvalid is any token Verify refuses.
var ErrInvalid = errors.New("satoken: invalid token")

// LooksLikeJWT tells a JWT (three dot-separated base64url parts starting with a JSON header) from other bearer
// tokens without parsing it.
func LooksLikeJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// Verify checks a token presented to cluster's API: signature with the cluster's key, ES256 only, issuer,
// cluster, time (a minute of clock skew allowed), and an audience among audiences. Any failure is ErrInvalid.
func (t *Tokens) Verify(ctx context.Context, cluster, token string, audiences ...string) (Claims, error) {
	var c Claims
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	k, err := t.key(ctx, cluster)
	if err != nil {
		return c, err
	}
	if err := parsed.Claims(&k.PublicKey, &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Cluster != cluster {
		return c, fmt.Errorf("%w: issued for another cluster", ErrInvalid)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: Issuer, Time: t.now()}, time.Minute); err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Expiry == nil {
		return c, fmt.Errorf("%w: no expiry", ErrInvalid)
	}
	if !slices.ContainsFunc(audiences, func(a string) bool { return c.Audience.Contains(a) }) {
		return c, fmt.Errorf("%w: not for this audience", ErrInvalid)
	}
	want := "system:serviceaccount:" + c.Kubernetes.Namespace + ":" + c.Kubernetes.ServiceAccount.Name
	if c.Subject != want || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
		return c, fmt.Errorf("%w: subject and kubernetes.io claims disagree", ErrInvalid)
	}
	return c, nil
}

// UnverifiedAudiences reads a token's audiences without checking it: only for a token Verify accepted (the
// audiences a TokenReview answers with are those of the token among those asked).
func UnverifiedAudiences(token string) ([]string, error) {
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var c jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return c.Audience, nil
}
