package registries

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// Limits of a registries file, so that a mistaken file (or a hostile one) cannot make the agent write thousands of
// host directories or hold megabytes of YAML in memory.
const (
	// MaxFileSize is the largest registries file Load and Parse read, in bytes.
	MaxFileSize = 1 << 20
	// MaxRegistries bounds the registries a file names: the keys of mirrors and configs together, counted once.
	MaxRegistries = 256
	// MaxEndpoints bounds the endpoints of one mirror.
	MaxEndpoints = 16
)

// Wildcard is the mirrors key whose endpoints serve every registry that has no entry of its own.
const Wildcard = "*"

// Config is a registries.yaml file as k3s reads it: the mirrors of registries and the TLS and credentials of
// registry hosts. The zero value (no file) configures nothing. Load and Parse return validated configurations;
// one built by hand must pass Validate before WriteHostsDir accepts it, and Credentials expects it to.
type Config struct {
	// Mirrors maps a registry host[:port] as image names spell it ("docker.io" for Docker Hub), or Wildcard, to
	// the endpoints to try before the registry itself.
	Mirrors map[string]Mirror `yaml:"mirrors,omitempty"`
	// Configs maps a registry or mirror host[:port] to its TLS settings and credentials.
	Configs map[string]RegistryConfig `yaml:"configs,omitempty"`
}

// Mirror is the list of endpoints of a registry's mirrors.
type Mirror struct {
	// Endpoints are http or https URLs with an optional path (the registry API's root when it is neither empty,
	// "/" nor "/v2"), tried in order before the registry's own default endpoint.
	Endpoints []string `yaml:"endpoint,omitempty"`
	// Rewrites is k3s's image name rewriting. It is refused: containerd 1.6 has no equivalent.
	Rewrites map[string]string `yaml:"rewrite,omitempty"`
}

// RegistryConfig is what a registry host needs to be reached: credentials and TLS settings.
type RegistryConfig struct {
	Auth *AuthConfig `yaml:"auth,omitempty"`
	TLS  *TLSConfig  `yaml:"tls,omitempty"`
}

// AuthConfig is a host's credentials, in exactly one of three forms: Username and Password; Auth, the base64 of
// "username:password"; or IdentityToken, an OAuth2 refresh token.
type AuthConfig struct {
	Username      string `yaml:"username,omitempty"`
	Password      string `yaml:"password,omitempty"`
	Auth          string `yaml:"auth,omitempty"`
	IdentityToken string `yaml:"identity_token,omitempty"`
}

// TLSConfig is how a host's HTTPS connections are verified and authenticated. Files are absolute paths that the
// containerd process reads at every pull (hosts.toml names them; it holds no copy).
type TLSConfig struct {
	// CAFile holds PEM certificates trusted for the host, in addition to the system's.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are the PEM client certificate and key presented to the host: both or neither.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`
}

// Load reads and validates the registries file at path (Parse). A missing file is an error that matches
// fs.ErrNotExist, so that the caller can treat it as an empty configuration.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registries: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("registries: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a registries file strictly (unknown fields, duplicate keys, wrong types and more than one YAML
// document are errors) and validates it (Validate). Every error it returns about the content matches ErrInvalid;
// those about one field are *FieldError. An empty document is an empty configuration.
func Parse(b []byte) (*Config, error) {
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%w: the file is larger than %d bytes", ErrInvalid, MaxFileSize)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one YAML document", ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
