package satoken

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
)

// memKeys gives each cluster a fresh key.
type memKeys map[string]*ecdsa.PrivateKey

func (m memKeys) SigningKey(_ context.Context, cluster string) (crypto.Signer, error) {
	k, ok := m[cluster]
	if !ok {
		return nil, errors.New("no such cluster")
	}
	return k, nil
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestIssueAndVerify(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	keys := memKeys{"c1": newKey(t), "c2": newKey(t)}
	tk := New(keys, clock)
	ctx := context.Background()
	req := Request{Cluster: "c1", Namespace: "ns", Account: Ref{Name: "robot", UID: "u-1"}, Expiration: time.Hour,
		Pod: &Ref{Name: "p", UID: "pod-uid"}}
	tok, exp, err := tk.Issue(ctx, req)
	if err != nil || !LooksLikeJWT(tok) || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("Issue: %q %v %v", tok, exp, err)
	}
	c, err := tk.Verify(ctx, "c1", tok, APIAudience)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "system:serviceaccount:ns:robot" || c.Kubernetes.ServiceAccount.UID != "u-1" || c.Kubernetes.Pod.UID != "pod-uid" {
		t.Fatalf("claims %+v", c)
	}
	// Another cluster (another key), another audience, expiry, tampering: all refused.
	other, _, _ := tk.Issue(ctx, Request{Cluster: "c2", Namespace: "ns", Account: Ref{Name: "robot"}, Expiration: time.Hour})
	if _, err := tk.Verify(ctx, "c1", other, APIAudience); !errors.Is(err, ErrInvalid) {
		t.Errorf("a token of c2 on c1: %v", err)
	}
	vault, _, _ := tk.Issue(ctx, Request{Cluster: "c1", Namespace: "ns", Account: Ref{Name: "robot"}, Expiration: time.Hour, Audiences: []string{"vault"}})
	if _, err := tk.Verify(ctx, "c1", vault, APIAudience); !errors.Is(err, ErrInvalid) {
		t.Errorf("a token for audience vault accepted by the API: %v", err)
	}
	if _, err := tk.Verify(ctx, "c1", vault, "vault"); err != nil {
		t.Errorf("a token for vault refused by vault: %v", err)
	}
	parts := strings.Split(tok, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	if _, err := tk.Verify(ctx, "c1", tampered, APIAudience); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered token: %v", err)
	}
	now = now.Add(time.Hour + 2*time.Minute)
	if _, err := tk.Verify(ctx, "c1", tok, APIAudience); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired token: %v", err)
	}
	if LooksLikeJWT("whp_abc") {
		t.Error("an API token looks like a JWT")
	}
}
