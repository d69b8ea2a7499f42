package kubelet

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseImageName(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in, repo, normal, withTag string
	}{
		{"nginx", "docker.io/library/nginx", "docker.io/library/nginx:latest", "nginx:latest"},
		{"library/nginx:1.27", "docker.io/library/nginx", "docker.io/library/nginx:1.27", "library/nginx:1.27"},
		{"docker.io/nginx", "docker.io/library/nginx", "docker.io/library/nginx:latest", "docker.io/nginx:latest"},
		{"index.docker.io/user/app:v1", "docker.io/user/app", "docker.io/user/app:v1", "index.docker.io/user/app:v1"},
		{"user/app", "docker.io/user/app", "docker.io/user/app:latest", "user/app:latest"},
		{"reg.example.test/team/app:1", "reg.example.test/team/app", "reg.example.test/team/app:1", "reg.example.test/team/app:1"},
		{"reg.example.test:5000/app", "reg.example.test:5000/app", "reg.example.test:5000/app:latest", "reg.example.test:5000/app:latest"},
		{"localhost/app", "localhost/app", "localhost/app:latest", "localhost/app:latest"},
		{"localhost:5000/a/b/c:x.y-z", "localhost:5000/a/b/c", "localhost:5000/a/b/c:x.y-z", "localhost:5000/a/b/c:x.y-z"},
		{"Reg.Example.test/app", "Reg.Example.test/app", "Reg.Example.test/app:latest", "Reg.Example.test/app:latest"},
		{"[::1]:5000/app:1", "[::1]:5000/app", "[::1]:5000/app:1", "[::1]:5000/app:1"},
		{"nginx@" + digest, "docker.io/library/nginx", "docker.io/library/nginx@" + digest, "nginx@" + digest},
		{"nginx:1@" + digest, "docker.io/library/nginx", "docker.io/library/nginx:1@" + digest, "nginx:1@" + digest},
		{"my_app__x-y--z.w", "docker.io/library/my_app__x-y--z.w", "docker.io/library/my_app__x-y--z.w:latest", "my_app__x-y--z.w:latest"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, err := parseImageName(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			withTag, err := withDefaultTag(tc.in)
			if got := [3]string{n.repo(), n.String(), withTag}; got != [3]string{tc.repo, tc.normal, tc.withTag} || err != nil {
				t.Errorf("repo, normalized, with default tag: %q (%v), want %q", got, err, [3]string{tc.repo, tc.normal, tc.withTag})
			}
		})
	}
	for _, bad := range []string{"", "Nginx", "user/App", "nginx:", ":1", "nginx@sha256:abc", "a//b", "-a", "a b", "nginx:" + strings.Repeat("x", 129),
		strings.Repeat("ab", 32), "reg.example.test/" + strings.Repeat("a", 250), "/app", "app/"} {
		if n, err := parseImageName(bad); err == nil {
			t.Errorf("%q parsed as %+v", bad, n)
		}
		if _, err := withDefaultTag(bad); err == nil {
			t.Errorf("withDefaultTag(%q) succeeded", bad)
		}
	}
	if normalImage("busybox") != normalImage("docker.io/library/busybox:latest") || normalImage("busybox:1") == normalImage("busybox:2") ||
		normalImage("Not A Name") != "Not A Name" {
		t.Error("normalImage")
	}
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// TestKeyringLookup: which credentials an image's pull is tried with, as kubelet's keyring matches them.
func TestKeyringLookup(t *testing.T) {
	cfg := map[string]dockerConfigEntry{
		"reg.example.test":               {Username: "host", Password: "p"},
		"reg.example.test/team":          {Username: "team", Password: "p"},
		"reg.example.test/team/special":  {Username: "special", Password: "p"},
		"https://port.example.test:5000": {Auth: basicAuth("port", "p")},
		"http://plain.example.test":      {Username: "plain", Password: "p"},
		"https://v2.example.test/v2/":    {Username: "v2", Password: "p"},
		"*.wild.example.test":            {Username: "wild", Password: "p"},
		"*.*.deep.example.test":          {Username: "deep", Password: "p"},
		"localhost:5000":                 {Username: "local", Password: "p"},
		"gcr.io/proj":                    {IdentityToken: "id-token", RegistryToken: "reg-token"},
	}
	hub := func(key string) map[string]dockerConfigEntry {
		return map[string]dockerConfigEntry{key: {Username: "hub", Password: "p"}, "quay.io": {Username: "quay", Password: "p"}}
	}
	for _, tc := range []struct {
		name  string
		cfg   map[string]dockerConfigEntry
		image string
		want  []string // usernames (or identity tokens), in order
	}{
		{"host", cfg, "reg.example.test/app:1", []string{"host"}},
		{"path prefix first", cfg, "reg.example.test/team/app", []string{"team", "host"}},
		{"longest path first", cfg, "reg.example.test/team/special/x", []string{"special", "team", "host"}},
		{"path is a string prefix, as kubelet's", cfg, "reg.example.test/teamwork/app", []string{"team", "host"}},
		{"other path", cfg, "reg.example.test/other/app", []string{"host"}},
		{"port", cfg, "port.example.test:5000/app", []string{"port"}},
		{"another port", cfg, "port.example.test:5001/app", nil},
		{"no port", cfg, "port.example.test/app", nil},
		{"a host key does not match a port", cfg, "reg.example.test:5000/app", nil},
		{"http scheme", cfg, "plain.example.test/app", []string{"plain"}},
		{"/v2/ means the host", cfg, "v2.example.test/a/b", []string{"v2"}},
		{"wildcard", cfg, "a.wild.example.test/app", []string{"wild"}},
		{"wildcard is one label", cfg, "a.b.wild.example.test/app", nil},
		{"wildcard needs a label", cfg, "wild.example.test/app", nil},
		{"two wildcards", cfg, "a.b.deep.example.test/app", []string{"deep"}},
		{"localhost", cfg, "localhost:5000/app", []string{"local"}},
		{"tokens", cfg, "gcr.io/proj/app", []string{"id-token"}},
		{"tokens: other project", cfg, "gcr.io/other/app", nil},
		{"unrelated", cfg, "other.example.test/app", nil},
		{"no docker hub key", cfg, "nginx", nil},
		{"docker.io key, short name", hub("docker.io"), "nginx", []string{"hub"}},
		{"docker.io key, user image", hub("docker.io"), "user/app", []string{"hub"}},
		{"docker.io key, qualified", hub("docker.io"), "docker.io/library/nginx:1", []string{"hub"}},
		{"docker.io key, legacy host", hub("docker.io"), "index.docker.io/user/app", []string{"hub"}},
		{"index.docker.io key", hub("index.docker.io"), "nginx", []string{"hub"}},
		{"https://index.docker.io/v1/ key", hub("https://index.docker.io/v1/"), "library/nginx", []string{"hub"}},
		{"https://index.docker.io/v1/ key, user image", hub("https://index.docker.io/v1/"), "docker.io/user/app", []string{"hub"}},
		{"docker hub key, other registry", hub("https://index.docker.io/v1/"), "quay.io/app", []string{"quay"}},
		{"docker.io/user path", map[string]dockerConfigEntry{"docker.io/user": {Username: "user"}, "docker.io": {Username: "hub"}}, "user/app", []string{"user", "hub"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := keyringFromSecrets([]*corev1.Secret{configSecret(t, corev1.SecretTypeDockerConfigJson, tc.cfg)})
			if err != nil {
				t.Fatal(err)
			}
			n, err := parseImageName(tc.image)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range k.lookup(n.repo()) {
				got = append(got, a.Username+a.IdentityToken)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("credentials for %s (-want +got):\n%s", tc.image, diff)
			}
		})
	}
}

func configSecret(t *testing.T, typ corev1.SecretType, cfg map[string]dockerConfigEntry) *corev1.Secret {
	t.Helper()
	var v any = cfg
	key := corev1.DockerConfigKey
	if typ == corev1.SecretTypeDockerConfigJson {
		v, key = map[string]any{"auths": cfg}, corev1.DockerConfigJsonKey
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: typ, Data: map[string][]byte{key: b}}
}

// TestKeyringFromSecrets: both secret types, auth overriding username and password, several secrets' entries
// for one registry in order, other secret types ignored, malformed secrets refused.
func TestKeyringFromSecrets(t *testing.T) {
	secrets := []*corev1.Secret{
		configSecret(t, corev1.SecretTypeDockercfg, map[string]dockerConfigEntry{"reg.example.test": {Username: "ignored", Password: "ignored", Auth: basicAuth("cfg", "pa:ss")}}),
		configSecret(t, corev1.SecretTypeDockerConfigJson, map[string]dockerConfigEntry{"https://reg.example.test/v1/": {Username: "json", Password: "pw"}}),
		{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.example.test":{"username":"opaque"}}}`)}},
		{Type: corev1.SecretTypeDockerConfigJson}, // no data: ignored
	}
	k, err := keyringFromSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	got := k.lookup("reg.example.test/app")
	if len(got) != 2 || got[0].Username != "cfg" || got[0].Password != "pa:ss" || got[1].Username != "json" || got[1].Password != "pw" {
		t.Errorf("credentials %+v", got)
	}
	for name, s := range map[string]*corev1.Secret{
		"bad json":        {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":`)}},
		"bad dockercfg":   {Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(`[]`)}},
		"auth not base64": configSecret(t, corev1.SecretTypeDockerConfigJson, map[string]dockerConfigEntry{"r.test": {Auth: "%%%"}}),
		"auth without a colon": configSecret(t, corev1.SecretTypeDockerConfigJson,
			map[string]dockerConfigEntry{"r.test": {Auth: base64.StdEncoding.EncodeToString([]byte("nocolon"))}}),
	} {
		if _, err := keyringFromSecrets([]*corev1.Secret{s}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
