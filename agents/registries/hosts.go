package registries

import (
	"fmt"
	"strings"
)

// hostsFile is one registry's hosts.toml as containerd 1.6 reads it (remotes/docker/config): the mirror hosts to
// try in order, then the server.
type hostsFile struct {
	// dir is the file's directory under the hosts directory: the registry host as containerd looks it up, or
	// defaultDir for the wildcard.
	dir string
	// server is the registry's default endpoint; nil in defaultDir, where containerd puts the pulled registry's.
	server *endpoint
	// tls is the server's.
	tls tlsSettings
	// hosts are the mirror endpoints, in the order of the configuration.
	hosts []hostEntry
}

// hostEntry is a [host."<url>"] table: a mirror endpoint and its host's TLS settings.
type hostEntry struct {
	endpoint
	tls tlsSettings
}

// tlsSettings are a host's TLS keys in hosts.toml: ca, client and skip_verify.
type tlsSettings struct {
	ca, cert, key string
	skipVerify    bool
}

// defaultDir is the host directory containerd 1.6 falls back to, in each directory of config_path, for a registry
// without one of its own (hostPaths: <host_port_>, <host:port>, then _default).
const defaultDir = "_default"

// hostsFiles are the files of c's hosts directory, in the order of their registries' names.
func (c *Config) hostsFiles() []hostsFile {
	var files []hostsFile
	for _, k := range registryKeys(c) {
		if f, ok := c.hostsFile(k); ok {
			files = append(files, f)
		}
	}
	return files
}

// hostsFile is the file of a registry (a mirrors or configs key, or Wildcard), and whether it has one. As k3s
// writes them, a registry has a file when it has mirror endpoints, or TLS settings or credentials of its own; an
// entry that changes nothing has none, so the wildcard's mirrors serve it. Entries that do not validate are
// left out.
func (c *Config) hostsFile(registry string) (hostsFile, bool) {
	f := hostsFile{dir: defaultDir}
	var def endpoint
	if registry != Wildcard {
		def = c.defaultEndpoint(registry)
		f.dir, f.server, f.tls = hostDirectory(registry), &def, c.tlsFor(def)
	}
	eps := c.Mirrors[registry].Endpoints
	for i, s := range eps {
		e, err := parseEndpoint(s)
		if err != nil || (e == def && i == len(eps)-1) {
			// containerd tries the server last anyway; listed earlier, it is also tried in its place.
			continue
		}
		f.hosts = append(f.hosts, hostEntry{endpoint: e, tls: c.tlsFor(e)})
	}
	rc := c.Configs[registry]
	return f, len(f.hosts) > 0 || (registry != Wildcard && (rc.Auth != nil || rc.TLS != nil))
}

// configFor is the configs entry of an endpoint's host. Docker Hub's API host takes docker.io's entry when it
// has none of its own, as k3s reads it.
func (c *Config) configFor(host string) (RegistryConfig, bool) {
	if rc, ok := c.Configs[host]; ok {
		return rc, true
	}
	if host == dockerHubAPI {
		rc, ok := c.Configs[dockerHub]
		return rc, ok
	}
	return RegistryConfig{}, false
}

// tlsFor is the TLS settings of an endpoint: its host's, and none for plain HTTP (later containerd releases try
// TLS with any host that has TLS settings, which would break an http:// mirror).
func (c *Config) tlsFor(e endpoint) tlsSettings {
	rc, ok := c.configFor(e.host)
	if !ok || rc.TLS == nil || e.scheme != "https" {
		return tlsSettings{}
	}
	return tlsSettings{ca: rc.TLS.CAFile, cert: rc.TLS.CertFile, key: rc.TLS.KeyFile, skipVerify: rc.TLS.InsecureSkipVerify}
}

// hostDirectory is containerd's first choice of directory name for a registry host: ":port" spelled "_port_"
// (remotes/docker/config hostDirectory). containerd also looks for "host:port", but the "_port_" form needs no
// quoting anywhere.
func hostDirectory(host string) string {
	if i := strings.LastIndex(host, ":"); i > 0 {
		return host[:i] + "_" + host[i+1:] + "_"
	}
	return host
}

// fileHeader opens every hosts.toml the package writes.
const fileHeader = "# Written by the Wheelhouse agent from its registries configuration (k3s registries.yaml format).\n" +
	"# Changes made here are overwritten.\n"

// noHostTable ends a file without mirrors: containerd 1.6 (until 1.7.32) refuses a hosts.toml without a host
// table ("invalid `host` tree"), and then ignores it; an empty table names no mirror.
const noHostTable = "\n# No mirrors. containerd 1.6 needs a host table in every hosts.toml.\n[host]\n"

// render is the hosts.toml text of f: the server's keys first (TOML puts keys after a table header in that table),
// then a table per mirror, in order, which containerd 1.6 keeps by their line numbers.
func (f hostsFile) render() []byte {
	var b strings.Builder
	b.WriteString(fileHeader)
	if f.server != nil {
		fmt.Fprintf(&b, "server = %s\n", tomlString(f.server.url()))
	}
	f.tls.render(&b, "")
	for _, h := range f.hosts {
		fmt.Fprintf(&b, "\n[host.%s]\n", tomlString(h.url()))
		// Mirrors serve pulls only; pushes (which CRI never makes) go to the registry.
		b.WriteString(`  capabilities = ["pull", "resolve"]` + "\n")
		h.tls.render(&b, "  ")
		if h.path != "" {
			// The path is the registry API's root, as k3s and containerd's older mirror configuration read it;
			// without this containerd would append /v2.
			b.WriteString("  override_path = true\n")
		}
	}
	if len(f.hosts) == 0 {
		b.WriteString(noHostTable)
	}
	return []byte(b.String())
}

// render writes t's keys, each line indented by indent.
func (t tlsSettings) render(b *strings.Builder, indent string) {
	if t.ca != "" {
		fmt.Fprintf(b, "%sca = %s\n", indent, tomlString(t.ca))
	}
	if t.cert != "" {
		fmt.Fprintf(b, "%sclient = [[%s, %s]]\n", indent, tomlString(t.cert), tomlString(t.key))
	}
	if t.skipVerify {
		fmt.Fprintf(b, "%sskip_verify = true\n", indent)
	}
}

// tomlString is s as a TOML basic string: quotes, backslashes and control characters escaped, everything else
// as is (TOML files are UTF-8, and Validate admits only UTF-8 paths).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
