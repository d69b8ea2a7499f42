package agents

import (
	"fmt"
	"log/slog"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/registries"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// RegistriesHostsDir is the directory, under the agent's data dir, of the containerd hosts directories the agent
// renders from its registries.yaml: the CRI plugin's registry config_path (the agent's own containerd's, and the
// one install.sh writes for the system's, before /etc/containerd/certs.d).
const RegistriesHostsDir = "registries.d"

// dockerHubEndpoint is the host containerd contacts for docker.io images.
const dockerHubEndpoint = "registry-1.docker.io"

// nodeRegistries is the node's registry configuration (--registries): what containerd reads from the hosts
// directory and the credentials the agent's pulls use.
type nodeRegistries struct {
	cfg *registries.Config // nil: no --registries
	dir string             // the hosts directory
}

// loadRegistries reads --registries and renders it into the hosts directory; without one, the directory is
// emptied, so that a registries.yaml taken away leaves nothing behind.
func loadRegistries(cfg Config, log *slog.Logger) (nodeRegistries, error) {
	r := nodeRegistries{dir: filepath.Join(cfg.DataDir, RegistriesHostsDir)}
	rc := &registries.Config{}
	if cfg.Registries != "" {
		var err error
		if rc, err = registries.Load(cfg.Registries); err != nil {
			return r, fmt.Errorf("agent: --registries: %w", err)
		}
		r.cfg = rc
	}
	if err := rc.WriteHostsDir(r.dir); err != nil {
		return r, fmt.Errorf("agent: writing containerd's registry hosts: %w", err)
	}
	if r.cfg != nil {
		log.Info("registry configuration written for containerd", "file", cfg.Registries, "dir", r.dir)
	}
	return r, nil
}

// credentials are the node's credentials for an image's registry host (kubelet.PodsConfig.NodeCredentials);
// nil without --registries.
func (r nodeRegistries) credentials() func(host string) []*runtimeapi.AuthConfig {
	if r.cfg == nil {
		return nil
	}
	return r.cfg.Credentials
}

// managedAuths are the credentials per host for the configuration of the containerd the agent runs itself: it
// pulls the pause image with them (CRI's sandbox pulls carry no credentials of their own).
func (r nodeRegistries) managedAuths() map[string]managed.RegistryAuth {
	if r.cfg == nil {
		return nil
	}
	out := map[string]managed.RegistryAuth{}
	for host, rc := range r.cfg.Configs {
		if a := rc.Auth; a != nil {
			// containerd looks credentials up by the host it contacts: Docker Hub's is registry-1.docker.io (an
			// entry of that name wins over docker.io's).
			if _, both := r.cfg.Configs[dockerHubEndpoint]; host == "docker.io" && !both {
				host = dockerHubEndpoint
			}
			out[host] = managed.RegistryAuth{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken}
		}
	}
	return out
}
