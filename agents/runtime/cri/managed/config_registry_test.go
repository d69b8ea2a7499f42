package managed

import (
	"strings"
	"testing"
)

// TestRegistryConfig: the registry section has the hosts directory and each host's credentials, in host order,
// as TOML basic strings whatever characters the credentials hold; without either, the section stays empty.
func TestRegistryConfig(t *testing.T) {
	l := Layout{RegistryConfigPath: "/var/lib/wheelhouse-agent/registries.d", RegistryAuths: map[string]RegistryAuth{
		"reg.example.test:5000": {Username: "bot", Password: "p\"a\\s\ts"},
		"ghcr.example.test":     {IdentityToken: "tok"},
	}}
	want := `  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/var/lib/wheelhouse-agent/registries.d"

    [plugins."io.containerd.grpc.v1.cri".registry.configs."ghcr.example.test".auth]
      identitytoken = "tok"

    [plugins."io.containerd.grpc.v1.cri".registry.configs."reg.example.test:5000".auth]
      username = "bot"
      password = "p\"a\\s\u0009s"
`
	if got := l.toml(); !strings.HasSuffix(got, want) {
		t.Errorf("registry section:\n%s\nwant it to end with:\n%s", got[strings.Index(got, "[plugins.\"io.containerd.grpc.v1.cri\".registry]"):], want)
	}
	if got := (Layout{}).toml(); !strings.HasSuffix(got, "  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n") {
		t.Errorf("without registries, the section is not empty:\n%s", got)
	}
}
