package registries

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readHostsDir decodes every hosts.toml of a hosts directory, by host directory name, and fails the test if the
// directory holds anything else.
func readHostsDir(t fataler, dir string) map[string]hostsDoc {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]hostsDoc{}
	for _, e := range ents {
		sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil || len(sub) != 1 || sub[0].Name() != "hosts.toml" {
			t.Fatalf("%s/%s: want a directory holding hosts.toml only (%v)", dir, e.Name(), err)
		}
		docs[e.Name()] = decodeHostsFile(t, filepath.Join(dir, e.Name(), "hosts.toml"))
	}
	return docs
}

var pullResolve = []string{"pull", "resolve"}

func TestWriteHostsDir(t *testing.T) {
	p := newTestPKI(t)
	client := [][]string{{p.CertFile, p.KeyFile}}
	tests := []struct {
		name string
		yaml string
		want map[string]hostsDoc
	}{{
		name: "mirrors with TLS",
		yaml: fmt.Sprintf(`
mirrors:
  docker.io:
    endpoint:
      - https://mirror.example.com:5000
      - http://10.0.0.1:5000/cache/v2/
      - https://registry-1.docker.io
configs:
  mirror.example.com:5000:
    auth: {username: u, password: p}
    tls: {ca_file: %[1]s, cert_file: %[2]s, key_file: %[3]s}
  10.0.0.1:5000:
    tls: {insecure_skip_verify: true}
  docker.io:
    tls: {ca_file: %[1]s}
`, p.CAFile, p.CertFile, p.KeyFile),
		want: map[string]hostsDoc{
			"docker.io": {
				Server: "https://registry-1.docker.io", TLS: docTLS{CA: p.CAFile}, HostTable: true,
				Hosts: []docHost{
					{URL: "https://mirror.example.com:5000", Capabilities: pullResolve, TLS: docTLS{CA: p.CAFile, Client: client}},
					// TLS settings are not given to a plain HTTP endpoint.
					{URL: "http://10.0.0.1:5000/cache/v2", Capabilities: pullResolve, OverridePath: true},
					// The last endpoint, the default one, is the server.
				},
			},
			"mirror.example.com_5000_": {Server: "https://mirror.example.com:5000", TLS: docTLS{CA: p.CAFile, Client: client}, HostTable: true},
			"10.0.0.1_5000_":           {Server: "https://10.0.0.1:5000", TLS: docTLS{SkipVerify: true}, HostTable: true},
		},
	}, {
		name: "wildcard",
		yaml: `
mirrors:
  "*":
    endpoint: [https://cache.example.com, "https://cache2.example.com/v2"]
  quay.io:
    endpoint: [https://quay-cache.example.com/quay]
configs:
  cache.example.com:
    tls: {insecure_skip_verify: true}
`,
		want: map[string]hostsDoc{
			"_default": {HostTable: true, Hosts: []docHost{
				{URL: "https://cache.example.com", Capabilities: pullResolve, TLS: docTLS{SkipVerify: true}},
				{URL: "https://cache2.example.com", Capabilities: pullResolve},
			}},
			"quay.io": {Server: "https://quay.io", HostTable: true, Hosts: []docHost{
				{URL: "https://quay-cache.example.com/quay", Capabilities: pullResolve, OverridePath: true},
			}},
			"cache.example.com": {Server: "https://cache.example.com", TLS: docTLS{SkipVerify: true}, HostTable: true},
		},
	}, {
		name: "default endpoint before mirrors",
		yaml: "mirrors:\n  reg.example.com:\n    endpoint: [https://reg.example.com/, https://m.example.com]\n",
		want: map[string]hostsDoc{
			"reg.example.com": {Server: "https://reg.example.com", HostTable: true, Hosts: []docHost{
				{URL: "https://reg.example.com", Capabilities: pullResolve},
				{URL: "https://m.example.com", Capabilities: pullResolve},
			}},
		},
	}, {
		name: "entries that change nothing",
		yaml: `
mirrors:
  a.example.com: {}
  b.example.com: {endpoint: ["https://b.example.com/v2"]}
  "*": {endpoint: []}
configs:
  c.example.com:
`,
		want: map[string]hostsDoc{},
	}, {
		name: "credentials only",
		yaml: "configs:\n  reg.example.com:\n    auth: {identity_token: t}\n",
		want: map[string]hostsDoc{"reg.example.com": {Server: "https://reg.example.com", HostTable: true}},
	}, {
		name: "IPv6 and ports",
		yaml: "mirrors:\n  \"[fd00::1]:5000\":\n    endpoint: [\"https://m.example.com:5000\"]\n  localhost:5000:\n    endpoint: [\"http://localhost:5001\"]\n",
		want: map[string]hostsDoc{
			"[fd00::1]_5000_": {Server: "https://[fd00::1]:5000", HostTable: true, Hosts: []docHost{{URL: "https://m.example.com:5000", Capabilities: pullResolve}}},
			// A loopback registry is plain HTTP, as containerd reaches it without a hosts.toml...
			"localhost_5000_": {Server: "http://localhost:5000", HostTable: true, Hosts: []docHost{{URL: "http://localhost:5001", Capabilities: pullResolve}}},
		},
	}, {
		name: "loopback registry with TLS settings",
		yaml: fmt.Sprintf("configs:\n  127.0.0.1:5000:\n    tls: {ca_file: %s}\n", p.CAFile),
		// ... unless it has TLS settings.
		want: map[string]hostsDoc{"127.0.0.1_5000_": {Server: "https://127.0.0.1:5000", TLS: docTLS{CA: p.CAFile}, HostTable: true}},
	}, {
		name: "nothing",
		yaml: "",
		want: map[string]hostsDoc{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "hosts.d")
			if err := c.WriteHostsDir(dir); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, readHostsDir(t, dir)); diff != "" {
				t.Errorf("hosts directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostsFileText pins the exact text of one file: the header, the order of keys and tables, the quoting.
func TestHostsFileText(t *testing.T) {
	p := newTestPKI(t)
	c, err := Parse(fmt.Appendf(nil, `
mirrors:
  docker.io:
    endpoint: [https://mirror.example.com:5000, http://10.0.0.1:5000/cache/v2]
configs:
  mirror.example.com:5000:
    tls: {ca_file: %[1]s, cert_file: %[2]s, key_file: %[3]s, insecure_skip_verify: true}
  registry-1.docker.io:
    tls: {ca_file: %[1]s}
`, p.CAFile, p.CertFile, p.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hosts.d")
	if err := c.WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "docker.io", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`# Written by the Wheelhouse agent from its registries configuration (k3s registries.yaml format).
# Changes made here are overwritten.
server = "https://registry-1.docker.io"
ca = %[1]q

[host."https://mirror.example.com:5000"]
  capabilities = ["pull", "resolve"]
  ca = %[1]q
  client = [[%[2]q, %[3]q]]
  skip_verify = true

[host."http://10.0.0.1:5000/cache/v2"]
  capabilities = ["pull", "resolve"]
  override_path = true
`, p.CAFile, p.CertFile, p.KeyFile)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("docker.io/hosts.toml (-want +got):\n%s", diff)
	}
}

// TestHostsFileQuoting checks that paths with characters TOML must escape come back as they were.
func TestHostsFileQuoting(t *testing.T) {
	p := newTestPKI(t)
	odd := filepath.Join(t.TempDir(), "a \"quoted\" \\ dir\twith\ttabs\x7f, é and ✓")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(odd, "ca\n.pem")
	b, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, ca, b)
	c := &Config{Configs: map[string]RegistryConfig{"reg.example.com": {TLS: &TLSConfig{CAFile: ca}}}}
	dir := filepath.Join(t.TempDir(), "hosts.d")
	if err := c.WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	if got := readHostsDir(t, dir)["reg.example.com"].TLS.CA; got != ca {
		t.Errorf("ca = %q, want %q", got, ca)
	}
}

func TestHostDirectory(t *testing.T) {
	for host, want := range map[string]string{
		"docker.io":           "docker.io",
		"reg.example.com:443": "reg.example.com_443_",
		"[fd00::1]:5000":      "[fd00::1]_5000_",
		"10.0.0.1:5000":       "10.0.0.1_5000_",
	} {
		if got := hostDirectory(host); got != want {
			t.Errorf("hostDirectory(%q) = %q, want %q", host, got, want)
		}
	}
}

// TestHostsFilesSorted checks that the files come in the order of their registries, so that writes are
// reproducible.
func TestHostsFilesSorted(t *testing.T) {
	c := &Config{Mirrors: map[string]Mirror{}}
	for _, h := range []string{"z.example.com", "a.example.com", "*", "m.example.com:5000"} {
		c.Mirrors[h] = Mirror{Endpoints: []string{"https://cache.example.com"}}
	}
	var dirs []string
	for _, f := range c.hostsFiles() {
		dirs = append(dirs, f.dir)
	}
	if want := []string{"_default", "a.example.com", "m.example.com_5000_", "z.example.com"}; !slices.Equal(dirs, want) {
		t.Errorf("hostsFiles dirs = %q, want %q", dirs, want)
	}
}
