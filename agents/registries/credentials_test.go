package registries

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCredentials(t *testing.T) {
	c, err := Parse([]byte(`
mirrors:
  docker.io:
    endpoint:
      - https://m1.example.com:5000
      - http://m2.example.com:5000/cache/v2
      - https://nocreds.example.com
      - https://m1.example.com:5000/other
      - https://registry-1.docker.io
  reg.example.com:
    endpoint: [https://reg.example.com, https://m1.example.com:5000]
  "*":
    endpoint: [https://cache.example.com, https://m2.example.com:5000]
configs:
  m1.example.com:5000:
    auth: {username: u1, password: p1}
  m2.example.com:5000:
    auth: {auth: dTI6cDI=}
  cache.example.com:
    auth: {identity_token: cache-token}
  docker.io:
    auth: {username: hub, password: hubpass}
  reg.example.com:
    auth: {username: reg, password: regpass}
  private.example.com:
    auth: {username: priv, password: privpass}
  tlsonly.example.com:
    tls: {insecure_skip_verify: true}
  ghcr.io:
    auth: {username: gh, password: ghpass}
`))
	if err != nil {
		t.Fatal(err)
	}
	m1 := &runtimeapi.AuthConfig{Username: "u1", Password: "p1", ServerAddress: "https://m1.example.com:5000"}
	m2 := &runtimeapi.AuthConfig{Auth: "dTI6cDI=", ServerAddress: "http://m2.example.com:5000"}
	cache := &runtimeapi.AuthConfig{IdentityToken: "cache-token", ServerAddress: "https://cache.example.com"}
	hub := &runtimeapi.AuthConfig{Username: "hub", Password: "hubpass", ServerAddress: "https://registry-1.docker.io"}
	reg := &runtimeapi.AuthConfig{Username: "reg", Password: "regpass", ServerAddress: "https://reg.example.com"}
	tests := []struct {
		host string
		want []*runtimeapi.AuthConfig
	}{
		// The mirrors' in order, each host once, then Docker Hub's own at its API host.
		{"docker.io", []*runtimeapi.AuthConfig{m1, m2, hub}},
		{"index.docker.io", []*runtimeapi.AuthConfig{m1, m2, hub}},
		// The registry listed as its own first mirror comes first, and once.
		{"reg.example.com", []*runtimeapi.AuthConfig{reg, m1}},
		// No entry of its own: the wildcard's mirrors, then nothing of its own.
		{"quay.io", []*runtimeapi.AuthConfig{cache, {Auth: "dTI6cDI=", ServerAddress: "https://m2.example.com:5000"}}},
		// A configs entry is the registry's own: the wildcard's mirrors are not used for it.
		{"private.example.com", []*runtimeapi.AuthConfig{{Username: "priv", Password: "privpass", ServerAddress: "https://private.example.com"}}},
		{"tlsonly.example.com", nil},
		{"ghcr.io", []*runtimeapi.AuthConfig{{Username: "gh", Password: "ghpass", ServerAddress: "https://ghcr.io"}}},
		// A mirror pulled from by name has its own credentials only.
		{"m1.example.com:5000", []*runtimeapi.AuthConfig{m1}},
		{"", nil},
		{"*", nil},
		{"https://reg.example.com", nil},
	}
	for _, tt := range tests {
		got := c.Credentials(tt.host)
		if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
			t.Errorf("Credentials(%q) (-want +got):\n%s", tt.host, diff)
		}
	}

	// Each call's AuthConfigs are the caller's to change.
	c.Credentials("docker.io")[0].Username = "changed"
	if got := c.Credentials("docker.io")[0].Username; got != "u1" {
		t.Errorf("after changing a result, Credentials gives username %q", got)
	}
}

func TestCredentialsDockerHubAPIHost(t *testing.T) {
	c := &Config{Configs: map[string]RegistryConfig{
		"docker.io":            {Auth: &AuthConfig{Username: "hub", Password: "p"}},
		"registry-1.docker.io": {Auth: &AuthConfig{Username: "api", Password: "p"}},
	}}
	want := []*runtimeapi.AuthConfig{{Username: "api", Password: "p", ServerAddress: "https://registry-1.docker.io"}}
	if diff := cmp.Diff(want, c.Credentials("docker.io"), protocmp.Transform()); diff != "" {
		t.Errorf("configs registry-1.docker.io is Docker Hub's API host's own entry (-want +got):\n%s", diff)
	}
	if got := (&Config{}).Credentials("docker.io"); got != nil {
		t.Errorf("no configuration: Credentials = %v, want nil", got)
	}
}
