package registries

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Credentials are the node's credentials to try, one CRI pull each, for an image whose registry host is imageHost
// (as the image name spells it; index.docker.io is docker.io): the credentials of each mirror endpoint's host in
// the order containerd tries the endpoints (the registry's own mirrors, or the wildcard's when the registry has no
// hosts.toml of its own), then those of the registry's default endpoint (registry-1.docker.io for docker.io, whose
// credentials are under configs "registry-1.docker.io" or "docker.io"). Hosts without credentials are left out,
// and each host comes once.
//
// Each AuthConfig's ServerAddress is "<scheme>://<host>" of its endpoint: containerd's CRI plugin (ParseAuth)
// gives a pull's AuthConfig only to the registry host equal to the Host of url.Parse(ServerAddress), and sends
// nothing to the others. The result is freshly allocated; nil when no host has credentials, or imageHost is not a
// registry host. c is expected to be valid; entries that are not are skipped.
func (c *Config) Credentials(imageHost string) []*runtimeapi.AuthConfig {
	if imageHost == dockerHubOld {
		imageHost = dockerHub
	}
	if validHost(imageHost) != nil {
		return nil
	}
	f, ok := c.hostsFile(imageHost)
	if !ok {
		f, _ = c.hostsFile(Wildcard)
	}
	eps := make([]endpoint, 0, len(f.hosts)+1)
	for _, h := range f.hosts {
		eps = append(eps, h.endpoint)
	}
	eps = append(eps, c.defaultEndpoint(imageHost))
	var out []*runtimeapi.AuthConfig
	seen := map[string]bool{}
	for _, e := range eps {
		if seen[e.host] {
			continue
		}
		seen[e.host] = true
		if rc, ok := c.configFor(e.host); ok && rc.Auth != nil {
			out = append(out, &runtimeapi.AuthConfig{
				Username:      rc.Auth.Username,
				Password:      rc.Auth.Password,
				Auth:          rc.Auth.Auth,
				IdentityToken: rc.Auth.IdentityToken,
				ServerAddress: e.scheme + "://" + e.host,
			})
		}
	}
	return out
}
