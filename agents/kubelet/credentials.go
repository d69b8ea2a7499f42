package kubelet

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image names and registry credentials as kubelet reads them (pkg/util/parsers over the distribution reference
// grammar, pkg/credentialprovider's keyring), written small: an image's repository is matched against the
// registries of the pod's imagePullSecrets to choose the credentials its pull is tried with.

const (
	dockerHub       = "docker.io"
	dockerHubLegacy = "index.docker.io"
	defaultTag      = "latest"
)

// referenceRe is the distribution reference grammar: [domain[:port]/]path[:tag][@digest], the path in lower case.
var referenceRe = func() *regexp.Regexp {
	const (
		label     = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain    = `(?:` + label + `(?:\.` + label + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
		component = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^((?:` + domain + `/)?` + component + `(?:/` + component + `)*)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
}()

var hex64Re = regexp.MustCompile(`^[a-f0-9]{64}$`)

// imageName is a parsed image reference, its domain normalized as docker's: "nginx" is docker.io/library/nginx.
type imageName struct {
	domain, path string
	tag, digest  string // either may be empty
}

// parseImageName parses an image reference as kubelet's ParseNormalizedNamed does.
func parseImageName(s string) (imageName, error) {
	m := referenceRe.FindStringSubmatch(s)
	switch {
	case m == nil && strings.ToLower(s) != s && referenceRe.MatchString(strings.ToLower(s)):
		return imageName{}, fmt.Errorf("invalid reference format: repository name (%s) must be lowercase", s)
	case m == nil:
		return imageName{}, errors.New("invalid reference format")
	case len(m[1]) > 255:
		return imageName{}, errors.New("repository name must not be more than 255 characters")
	case hex64Re.MatchString(m[1]):
		return imageName{}, fmt.Errorf("invalid repository name (%s), cannot specify 64-byte hexadecimal strings", m[1])
	}
	n := imageName{tag: m[2], digest: m[3]}
	name := m[1]
	if i := strings.IndexByte(name, '/'); i < 0 || (!strings.ContainsAny(name[:i], ".:") && name[:i] != "localhost" && strings.ToLower(name[:i]) == name[:i]) {
		n.domain, n.path = dockerHub, name
	} else {
		n.domain, n.path = name[:i], name[i+1:]
	}
	if n.domain == dockerHubLegacy {
		n.domain = dockerHub
	}
	if n.domain == dockerHub && !strings.Contains(n.path, "/") {
		n.path = "library/" + n.path
	}
	if strings.ToLower(n.path) != n.path {
		return imageName{}, fmt.Errorf("invalid reference format: repository name (%s) must be lowercase", n.path)
	}
	return n, nil
}

// repo is the repository, domain included: what credentials are matched against.
func (n imageName) repo() string { return n.domain + "/" + n.path }

// String is the normalized reference, the default tag added when there is neither tag nor digest.
func (n imageName) String() string {
	s := n.repo()
	if n.tag != "" || n.digest == "" {
		s += ":" + cmp.Or(n.tag, defaultTag)
	}
	if n.digest != "" {
		s += "@" + n.digest
	}
	return s
}

// withDefaultTag is image with ":latest" appended when it has neither tag nor digest, as kubelet's
// applyDefaultImageTag: the name stays as the user wrote it otherwise (not docker.io-qualified).
func withDefaultTag(image string) (string, error) {
	n, err := parseImageName(image)
	if err != nil {
		return "", err
	}
	if n.tag == "" && n.digest == "" {
		image += ":" + defaultTag
	}
	return image, nil
}

// dockerConfigEntry is one registry's credentials in a .dockerconfigjson or .dockercfg.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"` // base64 of username:password, which it overrides
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// authConfig is the entry as CRI credentials; a malformed auth field is an error, as kubelet's.
func (e dockerConfigEntry) authConfig() (*runtimeapi.AuthConfig, error) {
	a := &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
	if e.Auth != "" {
		b, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, err
		}
		user, pass, ok := strings.Cut(string(b), ":")
		if !ok {
			return nil, errors.New("unable to parse auth field, must be formatted as base64(username:password)")
		}
		a.Username, a.Password = user, pass
	}
	return a, nil
}

// keyring holds registry credentials by location ("host[:port][/path]"), as kubelet's BasicDockerKeyring.
type keyring struct {
	index []string // locations, reverse-sorted: more specific paths first
	creds map[string][]*runtimeapi.AuthConfig
}

// keyringFromSecrets reads the credentials of the pod's pull secrets: kubernetes.io/dockerconfigjson
// (.dockerconfigjson, {"auths": {location: entry}}) and kubernetes.io/dockercfg (.dockercfg, {location: entry}).
// Secrets of other types, or without the key, are ignored; one that does not parse is an error.
func keyringFromSecrets(secrets []*corev1.Secret) (*keyring, error) {
	k := &keyring{creds: map[string][]*runtimeapi.AuthConfig{}}
	for _, s := range secrets {
		var cfg map[string]dockerConfigEntry
		switch b := s.Data[corev1.DockerConfigJsonKey]; {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(b) > 0:
			var wrapped struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if err := json.Unmarshal(b, &wrapped); err != nil {
				return nil, fmt.Errorf("secret %q: %w", s.Name, err)
			}
			cfg = wrapped.Auths
		case s.Type == corev1.SecretTypeDockercfg && len(s.Data[corev1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg); err != nil {
				return nil, fmt.Errorf("secret %q: %w", s.Name, err)
			}
		}
		if err := k.add(cfg); err != nil {
			return nil, fmt.Errorf("secret %q: %w", s.Name, err)
		}
	}
	return k, nil
}

// add adds a config's entries. A location is a URL with or without scheme; "/v1/" and "/v2/" paths mean the
// host itself, as docker's client reads them.
func (k *keyring) add(cfg map[string]dockerConfigEntry) error {
	for _, loc := range slices.Sorted(maps.Keys(cfg)) {
		auth, err := cfg[loc].authConfig()
		if err != nil {
			return err
		}
		value := loc
		if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
			value = "https://" + value
		}
		u, err := url.Parse(value)
		if err != nil {
			continue // kubelet ignores a location it cannot parse
		}
		path := u.Path
		if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
			path = path[3:]
		}
		key := u.Host
		if path != "" && path != "/" {
			key += path
		}
		if _, ok := k.creds[key]; !ok {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], auth)
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
	return nil
}

// lookup returns the credentials for a repository (imageName.repo()), most specific location first; none:
// pull anonymously. docker.io repositories also match the locations index.docker.io and
// https://index.docker.io/v1/ when nothing else does.
func (k *keyring) lookup(repo string) []*runtimeapi.AuthConfig {
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		if locationMatches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDockerHub(repo) {
		out = k.creds[dockerHubLegacy]
	}
	return out
}

// isDockerHub reports whether a repository is pulled from Docker Hub.
func isDockerHub(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found, first == dockerHub, first == dockerHubLegacy:
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// locationMatches reports whether a credential location matches a repository, as kubelet's URLsMatch: the same
// port, the same number of host labels each matching (a label of the location may be a glob: "*" matches one
// label), and the location's path a prefix of the repository's.
func locationMatches(location, repo string) bool {
	lu, err := url.Parse("https://" + location)
	if err != nil {
		return false
	}
	ru, err := url.Parse("https://" + repo)
	if err != nil {
		return false
	}
	lLabels, lPort := splitHost(lu.Host)
	rLabels, rPort := splitHost(ru.Host)
	if lPort != rPort || len(lLabels) != len(rLabels) || !strings.HasPrefix(ru.Path, lu.Path) {
		return false
	}
	for i := range lLabels {
		if ok, err := filepath.Match(lLabels[i], rLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) (labels []string, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}
