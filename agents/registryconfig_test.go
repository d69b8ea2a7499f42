package agents

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRegistriesForContainerd: a registries.yaml is rendered into the hosts directory under the data dir, its
// credentials go to the agent's own containerd under the host containerd contacts (Docker Hub's is
// registry-1.docker.io), and without a file the directory is emptied.
func TestRegistriesForContainerd(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(file, []byte(`mirrors:
  docker.io:
    endpoint: ["https://mirror.example.test:5000"]
configs:
  docker.io:
    auth: {username: hub, password: h}
  "mirror.example.test:5000":
    auth: {username: m, password: p}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, Registries: file}
	regs, err := loadRegistries(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RegistriesHostsDir, "docker.io", "hosts.toml")); err != nil {
		t.Errorf("no hosts.toml for docker.io: %v", err)
	}
	auths := regs.managedAuths()
	if got := slices.Sorted(maps.Keys(auths)); !slices.Equal(got, []string{"mirror.example.test:5000", "registry-1.docker.io"}) {
		t.Errorf("containerd's credentials by host %v", got)
	}
	if auths["registry-1.docker.io"].Username != "hub" {
		t.Errorf("Docker Hub's credentials %+v", auths["registry-1.docker.io"])
	}
	if creds := regs.credentials()("docker.io"); len(creds) != 2 || creds[0].Username != "m" {
		t.Errorf("node credentials for docker.io: %v", creds)
	}

	// The file taken away: nothing is left for containerd to read.
	if regs, err = loadRegistries(Config{DataDir: dir}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, RegistriesHostsDir)); len(left) != 0 || regs.credentials() != nil || regs.managedAuths() != nil {
		t.Errorf("without --registries: hosts %v, credentials kept", left)
	}
	if err := (Config{Server: "https://x", DataDir: dir, Runtime: RuntimeContainerd, Registries: filepath.Join(dir, "missing.yaml")}).Validate(); err == nil {
		t.Error("a missing registries file was accepted")
	}
}
