package registries

import (
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

// Registry hosts and endpoints the generator draws from: few enough that mirrors, configs and endpoints share
// hosts often (Docker Hub's two names included).
var (
	genRegistries = []string{"docker.io", "quay.io", "reg.example.com", "reg.example.com:5000", "[fd00::1]:5000",
		"10.0.0.1:5000", "m1.example.com", "m2.example.com:5000", "registry-1.docker.io", "localhost:5000", "127.0.0.1"}
	genEndpointHosts = []string{"m1.example.com", "m2.example.com:5000", "reg.example.com", "registry-1.docker.io",
		"cache.example.com", "10.0.0.1:5000", "localhost:5000"}
	genPaths = []string{"", "/", "/v2", "/v2/", "/prefix", "/prefix/v2"}
)

func genConfig(p *testPKI) *rapid.Generator[*Config] {
	return rapid.Custom(func(t *rapid.T) *Config {
		c := &Config{}
		for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(append([]string{Wildcard}, genRegistries...)), rapid.ID).Draw(t, "mirrors") {
			if c.Mirrors == nil {
				c.Mirrors = map[string]Mirror{}
			}
			var m Mirror
			seen := map[endpoint]bool{}
			for range rapid.IntRange(0, 4).Draw(t, "endpoints") {
				s := rapid.SampledFrom([]string{"http", "https"}).Draw(t, "scheme") + "://" +
					rapid.SampledFrom(genEndpointHosts).Draw(t, "host") + rapid.SampledFrom(genPaths).Draw(t, "path")
				if e, _ := parseEndpoint(s); !seen[e] {
					seen[e] = true
					m.Endpoints = append(m.Endpoints, s)
				}
			}
			c.Mirrors[k] = m
		}
		for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(append(genRegistries, genEndpointHosts...)), rapid.ID).Draw(t, "configs") {
			if c.Configs == nil {
				c.Configs = map[string]RegistryConfig{}
			}
			var rc RegistryConfig
			switch rapid.IntRange(0, 3).Draw(t, "auth") {
			case 1:
				rc.Auth = &AuthConfig{Username: "user-" + k, Password: "pass"}
			case 2:
				rc.Auth = &AuthConfig{Auth: "dXNlcjpwYXNz"}
			case 3:
				rc.Auth = &AuthConfig{IdentityToken: "token-" + k}
			}
			if rapid.Bool().Draw(t, "tls") {
				rc.TLS = &TLSConfig{InsecureSkipVerify: rapid.Bool().Draw(t, "skip")}
				if rapid.Bool().Draw(t, "ca") {
					rc.TLS.CAFile = p.CAFile
				}
				if rapid.Bool().Draw(t, "client") {
					rc.TLS.CertFile, rc.TLS.KeyFile = p.CertFile, p.KeyFile
				}
			}
			c.Configs[k] = rc
		}
		return c
	})
}

// TestConfigProperties checks, for any valid configuration: that it survives YAML; that WriteHostsDir, over
// whatever an earlier configuration left, writes exactly the registries that need a file, each the way
// containerd must read it; and that Credentials names exactly the hosts of those files that have credentials,
// in the order containerd tries them, so that ParseAuth gives each to its host.
func TestConfigProperties(t *testing.T) {
	p := newTestPKI(t)
	dir := filepath.Join(t.TempDir(), "hosts.d")
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig(p).Draw(t, "config")
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}

		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse of\n%s: %v", b, err)
		}
		if diff := cmp.Diff(c, back); diff != "" {
			t.Fatalf("YAML round trip (-want +got):\n%s", diff)
		}

		if err := c.WriteHostsDir(dir); err != nil {
			t.Fatal(err)
		}
		docs := readHostsDir(t, dir)
		want := expectedHostsDir(c)
		if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(docs))); diff != "" {
			t.Fatalf("host directories (-want +got):\n%s", diff)
		}
		for name, doc := range docs {
			if diff := cmp.Diff(want[name], doc); diff != "" {
				t.Errorf("%s/hosts.toml (-want +got):\n%s", name, diff)
			}
		}

		for _, h := range append(genRegistries, "unlisted.example.com") {
			checkCredentials(t, c, docs, h)
		}
	})
}

// expectedHostsDir is what WriteHostsDir must write for c, worked out from the rules of the package
// documentation rather than from its code.
func expectedHostsDir(c *Config) map[string]hostsDoc {
	docs := map[string]hostsDoc{}
	tlsOf := func(scheme, host string) docTLS {
		rc, ok := c.Configs[host]
		if !ok && host == "registry-1.docker.io" {
			rc = c.Configs["docker.io"]
		}
		if rc.TLS == nil || scheme != "https" {
			return docTLS{}
		}
		d := docTLS{CA: rc.TLS.CAFile, SkipVerify: rc.TLS.InsecureSkipVerify}
		if rc.TLS.CertFile != "" {
			d.Client = [][]string{{rc.TLS.CertFile, rc.TLS.KeyFile}}
		}
		return d
	}
	for _, k := range registryKeys(c) {
		doc := hostsDoc{HostTable: true}
		server, name := "", "_default"
		if k != Wildcard {
			name, server = k, defaultURL(c, k)
			if i := strings.LastIndex(k, ":"); i > 0 && !strings.HasSuffix(k, "]") {
				name = k[:i] + "_" + k[i+1:] + "_"
			}
			u, _ := url.Parse(server)
			doc.Server, doc.TLS = server, tlsOf("https", u.Host)
		}
		eps := c.Mirrors[k].Endpoints
		for i, s := range eps {
			u, _ := url.Parse(s)
			p := strings.TrimSuffix(u.Path, "/")
			if p == "/v2" {
				p = ""
			}
			h := docHost{URL: u.Scheme + "://" + u.Host + p, Capabilities: pullResolve, TLS: tlsOf(u.Scheme, u.Host), OverridePath: p != ""}
			if i == len(eps)-1 && h.URL == server {
				continue
			}
			doc.Hosts = append(doc.Hosts, h)
		}
		rc, configured := c.Configs[k]
		if len(doc.Hosts) > 0 || (configured && (rc.Auth != nil || rc.TLS != nil)) {
			docs[name] = doc
		}
	}
	return docs
}

// defaultURL is a registry's default endpoint: Docker Hub's API host for docker.io; plain HTTP for localhost and
// loopback addresses unless configs gives them TLS settings; else HTTPS.
func defaultURL(c *Config, registry string) string {
	switch h := strings.TrimSuffix(strings.Split(registry, ":")[0], "]"); {
	case registry == "docker.io":
		return "https://registry-1.docker.io"
	case (h == "localhost" || strings.HasPrefix(h, "127.") || h == "[::1") && c.Configs[registry].TLS == nil:
		return "http://" + registry
	}
	return "https://" + registry
}

// checkCredentials checks Credentials(host) against the hosts containerd tries for it, read from the written
// files: its own file's, else _default's, then its default endpoint.
func checkCredentials(t *rapid.T, c *Config, docs map[string]hostsDoc, host string) {
	name := host
	if i := strings.LastIndex(host, ":"); i > 0 && !strings.HasSuffix(host, "]") {
		name = host[:i] + "_" + host[i+1:] + "_"
	}
	doc, ok := docs[name]
	if !ok {
		doc = docs["_default"]
	}
	var tried []string
	for _, h := range doc.Hosts {
		tried = append(tried, h.URL)
	}
	tried = append(tried, defaultURL(c, host))
	var want []string
	seen := map[string]bool{}
	for _, s := range tried {
		u, _ := url.Parse(s)
		if seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		rc, ok := c.Configs[u.Host]
		if !ok && u.Host == "registry-1.docker.io" {
			rc = c.Configs["docker.io"]
		}
		if rc.Auth != nil {
			want = append(want, u.Host)
		}
	}
	var got []string
	for _, a := range c.Credentials(host) {
		u, err := url.Parse(a.ServerAddress)
		if err != nil {
			t.Fatalf("Credentials(%q): ServerAddress %q: %v", host, a.ServerAddress, err)
		}
		got = append(got, u.Host)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Credentials(%q) hosts (-want +got):\n%s", host, diff)
	}
}
