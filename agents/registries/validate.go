package registries

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every error of Parse, Load and Validate that is about the content of the
// configuration rather than about reading it.
var ErrInvalid = errors.New("registries: invalid configuration")

// FieldError is one problem with one field of a configuration. Field names it as the YAML spells it, with keys
// quoted and list indexes in brackets: mirrors."docker.io".endpoint[1], configs."mirror:5000".tls.ca_file.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "registries: " + e.Field + ": " + e.Reason }

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Validate checks c as Parse does, and reads the TLS files it names: every problem is a *FieldError, joined
// (errors.Join) in the order mirrors then configs, keys sorted. It returns nil for a usable configuration.
func (c *Config) Validate() error {
	var v validator
	if n := len(registryKeys(c)); n > MaxRegistries {
		// Too many to be worth checking one by one (each may name files to read).
		v.fail("mirrors, configs", fmt.Sprintf("%d registries; at most %d are supported", n, MaxRegistries))
		return errors.Join(v.errs...)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Mirrors)) {
		v.mirror(k, c.Mirrors[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Configs)) {
		v.config(k, c.Configs[k])
	}
	return errors.Join(v.errs...)
}

// registryKeys are the registries c names, each once: the keys of its mirrors and configs.
func registryKeys(c *Config) []string {
	keys := map[string]bool{}
	for k := range c.Mirrors {
		keys[k] = true
	}
	for k := range c.Configs {
		keys[k] = true
	}
	return slices.Sorted(maps.Keys(keys))
}

// validator collects the FieldErrors of one Validate.
type validator struct{ errs []error }

func (v *validator) fail(field, reason string) {
	v.errs = append(v.errs, &FieldError{Field: field, Reason: reason})
}

func mirrorField(key string) string { return "mirrors." + strconv.Quote(key) }
func configField(key string) string { return "configs." + strconv.Quote(key) }

func (v *validator) mirror(key string, m Mirror) {
	field := mirrorField(key)
	if key != Wildcard {
		if err := validHost(key); err != nil {
			v.fail(field, err.Error())
		}
	}
	if m.Rewrites != nil {
		v.fail(field+".rewrite", "not supported: containerd 1.6 cannot rewrite image names (give the mirror the registry's repository layout)")
	}
	if len(m.Endpoints) > MaxEndpoints {
		v.fail(field+".endpoint", fmt.Sprintf("%d endpoints; at most %d are supported", len(m.Endpoints), MaxEndpoints))
		return
	}
	seen := map[endpoint]int{}
	for i, s := range m.Endpoints {
		f := fmt.Sprintf("%s.endpoint[%d]", field, i)
		e, err := parseEndpoint(s)
		if err != nil {
			v.fail(f, fmt.Sprintf("%q: %v", s, err))
			continue
		}
		if j, ok := seen[e]; ok {
			v.fail(f, fmt.Sprintf("%q is the same endpoint as endpoint[%d]", s, j))
			continue
		}
		seen[e] = i
	}
}

func (v *validator) config(key string, rc RegistryConfig) {
	field := configField(key)
	if key == Wildcard {
		v.fail(field, `the wildcard "*" is supported under mirrors only; give each host its own entry`)
		return
	}
	if err := validHost(key); err != nil {
		v.fail(field, err.Error())
	}
	if rc.Auth != nil {
		v.auth(field+".auth", *rc.Auth)
	}
	if rc.TLS != nil {
		v.tls(field+".tls", *rc.TLS)
	}
}

func (v *validator) auth(field string, a AuthConfig) {
	forms := 0
	for _, given := range []bool{a.Username != "" || a.Password != "", a.Auth != "", a.IdentityToken != ""} {
		if given {
			forms++
		}
	}
	switch {
	case forms == 0:
		v.fail(field, "give username and password, auth, or identity_token")
	case forms > 1:
		v.fail(field, "give only one of: username and password, auth, identity_token")
	case a.Username != "" && a.Password == "":
		v.fail(field+".password", "is needed with username")
	case a.Password != "" && a.Username == "":
		v.fail(field+".username", "is needed with password")
	case a.Auth != "":
		if err := validBasicAuth(a.Auth); err != nil {
			v.fail(field+".auth", err.Error())
		}
	}
}

// validBasicAuth checks an auth value as containerd's CRI plugin decodes it (ParseAuth): standard base64 of
// "username:password".
func validBasicAuth(s string) error {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("is not base64: %v", err)
	}
	user, _, ok := strings.Cut(string(b), ":")
	if !ok || user == "" {
		return errors.New(`must be the base64 of "username:password"`)
	}
	return nil
}

func (v *validator) tls(field string, t TLSConfig) {
	if t.CAFile != "" {
		if b, err := readFile(t.CAFile); err != nil {
			v.fail(field+".ca_file", err.Error())
		} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
			// containerd loads the file the same way, and fails every pull from the host if it finds nothing.
			v.fail(field+".ca_file", fmt.Sprintf("%q holds no PEM certificate", t.CAFile))
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.fail(field+".key_file", "is needed with cert_file")
	case t.KeyFile != "" && t.CertFile == "":
		v.fail(field+".cert_file", "is needed with key_file")
	case t.CertFile != "":
		_, certErr := readFile(t.CertFile)
		if certErr != nil {
			v.fail(field+".cert_file", certErr.Error())
		}
		_, keyErr := readFile(t.KeyFile)
		if keyErr != nil {
			v.fail(field+".key_file", keyErr.Error())
		}
		if certErr == nil && keyErr == nil {
			if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
				v.fail(field+".cert_file", fmt.Sprintf("%q and key_file %q are not a certificate and its key: %v", t.CertFile, t.KeyFile, err))
			}
		}
	}
}

// readFile reads a file a configuration names: an absolute path (hosts.toml would otherwise resolve it against the
// host's directory) in UTF-8 (hosts.toml is), readable now.
func readFile(p string) ([]byte, error) {
	if !utf8.ValidString(p) {
		return nil, fmt.Errorf("%q is not valid UTF-8", p)
	}
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("%q is not an absolute path", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	return b, nil
}

// hostRe is a registry host as image references spell it (the distribution reference grammar's domain): DNS
// labels separated by dots, or an IPv6 address in brackets, then an optional port.
var hostRe = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[([0-9a-fA-F:.]+)\])(?::([0-9]+))?$`)

// validHost checks a registry name: host[:port].
func validHost(h string) error {
	switch {
	case h == "":
		return errors.New("empty registry host")
	case strings.Contains(h, "://"):
		return fmt.Errorf("%q: a registry is named host[:port], not by a URL", h)
	case strings.Contains(h, "/"):
		return fmt.Errorf("%q: a registry is named host[:port], without a path", h)
	}
	m := hostRe.FindStringSubmatch(h)
	if m == nil {
		return fmt.Errorf("%q is not a host name or IP address with an optional :port", h)
	}
	if m[1] != "" && (net.ParseIP(m[1]) == nil || !strings.Contains(m[1], ":")) {
		return fmt.Errorf("%q: %q in brackets is not an IPv6 address", h, m[1])
	}
	if m[2] != "" {
		if p, err := strconv.Atoi(m[2]); err != nil || p < 1 || p > 65535 || m[2][0] == '0' {
			return fmt.Errorf("%q: port %q is not a number from 1 to 65535", h, m[2])
		}
	}
	return nil
}

// endpoint is a mirror endpoint, normalized: the scheme, host[:port] and API root path ("" for the default /v2,
// else cleaned, without a trailing slash). Two spellings of one endpoint are equal endpoints.
type endpoint struct {
	scheme, host, path string
}

// parseEndpoint parses and checks an endpoint URL.
func parseEndpoint(s string) (endpoint, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return endpoint{}, fmt.Errorf("not a URL: %v", err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "":
		return endpoint{}, errors.New("must start with http:// or https://")
	case u.User != nil:
		return endpoint{}, errors.New("must not hold credentials (give them under configs)")
	case u.RawQuery != "" || u.ForceQuery:
		return endpoint{}, errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return endpoint{}, errors.New("must not have a fragment")
	}
	if err := validHost(u.Host); err != nil {
		return endpoint{}, fmt.Errorf("host: %v", err)
	}
	if strings.HasPrefix(u.Host, "[") {
		// containerd 1.6's TOML parser (go-toml v1) refuses "]" in a table name, even quoted, and then ignores the
		// whole hosts.toml; a registry's own IPv6 address is fine (it is a value, not a table name).
		return endpoint{}, errors.New("containerd 1.6 cannot read a mirror named by an IPv6 address; give it a host name")
	}
	e := endpoint{scheme: u.Scheme, host: u.Host}
	if p := path.Clean("/" + u.Path); p != "/" && p != "/v2" {
		e.path = p
	}
	return e, nil
}

// url is the endpoint as a hosts.toml host key: what containerd parses back into this scheme, host and path.
func (e endpoint) url() string {
	return e.scheme + "://" + e.host + (&url.URL{Path: e.path}).EscapedPath()
}

// dockerHub and its API host: containerd resolves docker.io images at registry-1.docker.io. Image names may
// also spell it index.docker.io.
const (
	dockerHub    = "docker.io"
	dockerHubAPI = "registry-1.docker.io"
	dockerHubOld = "index.docker.io"
)

// defaultEndpoint is where containerd 1.6 pulls a registry's images when no mirror serves them (ConfigureHosts):
// https://<host>, https://registry-1.docker.io for docker.io, and plain HTTP for a loopback registry (localhost,
// 127.0.0.0/8, ::1) unless configs gives it TLS settings. The loopback rule keeps a local plain-HTTP registry
// working when it gets mirrors or credentials, and a local registry with TLS settings reachable over TLS.
func (c *Config) defaultEndpoint(registry string) endpoint {
	switch {
	case registry == dockerHub:
		return endpoint{scheme: "https", host: dockerHubAPI}
	case isLoopback(registry):
		if rc, ok := c.configFor(registry); !ok || rc.TLS == nil {
			return endpoint{scheme: "http", host: registry}
		}
	}
	return endpoint{scheme: "https", host: registry}
}

// isLoopback is containerd's docker.IsLocalhost: localhost or a loopback IP address, with or without a port.
func isLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host == "localhost" || net.ParseIP(host).IsLoopback()
}
