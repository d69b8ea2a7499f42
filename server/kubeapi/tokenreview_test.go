package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// TestTokenReview: a TokenReview authenticates a token as this cluster's API would — a pod's ServiceAccount
// token with the extras upstream adds (credential ID, pod, node), audiences matched against those asked — and
// answers unauthenticated for a token of another audience, another cluster, or none of ours; an empty token is
// a bad request (the conformance suite's ServiceAccounts tests).
func TestTokenReview(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, func(c *Config) { c.ServiceAccountTokens = satoken.New(clusterKeys{key}, nil) })
	admin := env.client(t, "c1")
	ctx := t.Context()
	sa, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "robot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(audiences ...string) string {
		t.Helper()
		tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences,
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	review := func(cluster, tok string, audiences ...string) authenticationv1.TokenReviewStatus {
		t.Helper()
		out, err := env.client(t, cluster).AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status
	}

	apiToken := token()
	st := review("c1", apiToken)
	if !st.Authenticated || st.Error != "" || st.User.Username != "system:serviceaccount:default:robot" || st.User.UID != string(sa.UID) {
		t.Fatalf("review of a pod's token: %+v", st)
	}
	for _, g := range []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:default"} {
		if !slices.Contains(st.User.Groups, g) {
			t.Errorf("groups %v lack %s", st.User.Groups, g)
		}
	}
	extra := st.User.Extra
	if id := extra["authentication.kubernetes.io/credential-id"]; len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
		t.Errorf("credential-id %v", id)
	}
	for k, want := range map[string]string{"pod-name": "p", "pod-uid": string(pod.UID), "node-name": "n1", "node-uid": string(node.UID)} {
		if got := extra["authentication.kubernetes.io/"+k]; len(got) != 1 || got[0] != want {
			t.Errorf("extra %s = %v, want %s", k, got, want)
		}
	}
	if !slices.Equal(st.Audiences, []string{satoken.APIAudience}) {
		t.Errorf("audiences %v, want the API's", st.Audiences)
	}

	// Audiences: those of the token among those asked; none in common is no authentication.
	if st := review("c1", token("a", "b"), "b", "c"); !st.Authenticated || !slices.Equal(st.Audiences, []string{"b"}) {
		t.Errorf("review for audiences b, c of a token for a, b: %+v", st)
	}
	if st := review("c1", token("a")); st.Authenticated || st.Error == "" {
		t.Errorf("a token for audience a reviewed for the API: %+v", st)
	}
	// Another cluster's API does not accept it; nor garbage.
	if st := review("c2", apiToken); st.Authenticated {
		t.Errorf("c1's token reviewed in c2: %+v", st)
	}
	if st := review("c1", "not-a-token"); st.Authenticated || st.Error == "" {
		t.Errorf("garbage token: %+v", st)
	}
	// An empty token is a bad request.
	if _, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("empty token: %v, want BadRequest", err)
	}

	// Service account issuer discovery: the OpenID configuration names the issuer of the tokens and the key set
	// that verifies them.
	var disc struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	raw := env.rawDo(t, http.MethodGet, "/.well-known/openid-configuration", "", nil)
	if raw.code != http.StatusOK || json.Unmarshal(raw.body, &disc) != nil {
		t.Fatalf("openid-configuration: %d %s", raw.code, raw.body)
	}
	parsed, err := jwt.ParseSigned(apiToken, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	if disc.Issuer != claims.Issuer || disc.JWKSURI != claims.Issuer+"/openid/v1/jwks" || !slices.Contains(disc.Algs, "ES256") {
		t.Fatalf("discovery %+v for tokens issued by %s", disc, claims.Issuer)
	}
	raw = env.rawDo(t, http.MethodGet, "/openid/v1/jwks", "", nil)
	var set jose.JSONWebKeySet
	if raw.code != http.StatusOK || json.Unmarshal(raw.body, &set) != nil {
		t.Fatalf("jwks: %d %s", raw.code, raw.body)
	}
	keys := set.Key(parsed.Headers[0].KeyID)
	if parsed.Headers[0].KeyID == "" || len(keys) != 1 {
		t.Fatalf("the token's kid %q names %d keys of the set", parsed.Headers[0].KeyID, len(keys))
	}
	if err := parsed.Claims(keys[0].Key, &claims); err != nil {
		t.Fatalf("the published key does not verify the token: %v", err)
	}
}
