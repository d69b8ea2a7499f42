package registries

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	p := newTestPKI(t)
	yml := fmt.Sprintf(`
mirrors:
  docker.io:
    endpoint:
      - "https://mirror.example.com:5000"
      - http://10.0.0.1:5000/cache/v2
  "*":
    endpoint: ["https://cache.example.com"]
  "registry.example.com": {}
configs:
  "mirror.example.com:5000":
    auth:
      username: user
      password: "p:ss"
    tls:
      ca_file: %s
      cert_file: %s
      key_file: %s
  "[fd00::1]:5000":
    auth:
      auth: dXNlcjpwYXNz
    tls:
      insecure_skip_verify: true
  registry.example.com:
    auth: {identity_token: tok}
  "docker.io":
`, p.CAFile, p.CertFile, p.KeyFile)
	c, err := Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Mirrors: map[string]Mirror{
			"docker.io":            {Endpoints: []string{"https://mirror.example.com:5000", "http://10.0.0.1:5000/cache/v2"}},
			"*":                    {Endpoints: []string{"https://cache.example.com"}},
			"registry.example.com": {},
		},
		Configs: map[string]RegistryConfig{
			"mirror.example.com:5000": {
				Auth: &AuthConfig{Username: "user", Password: "p:ss"},
				TLS:  &TLSConfig{CAFile: p.CAFile, CertFile: p.CertFile, KeyFile: p.KeyFile},
			},
			"[fd00::1]:5000":       {Auth: &AuthConfig{Auth: "dXNlcjpwYXNz"}, TLS: &TLSConfig{InsecureSkipVerify: true}},
			"registry.example.com": {Auth: &AuthConfig{IdentityToken: "tok"}},
			"docker.io":            {},
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, yml := range []string{"", "\n# nothing yet\n", "---\n", "mirrors: {}\nconfigs: {}\n"} {
		c, err := Parse([]byte(yml))
		if err != nil {
			t.Errorf("Parse(%q): %v", yml, err)
			continue
		}
		if len(c.Mirrors)+len(c.Configs) != 0 {
			t.Errorf("Parse(%q) = %+v, want no registries", yml, c)
		}
	}
}

// TestParseErrors checks each refusal of Parse: the error matches ErrInvalid and, for a field, is a *FieldError
// naming it with a reason that says what is wrong.
func TestParseErrors(t *testing.T) {
	p := newTestPKI(t)
	tlsCfg := func(body string) string { return "configs:\n  reg.example.com:\n    tls: " + body + "\n" }
	authCfg := func(body string) string { return "configs:\n  reg.example.com:\n    auth: " + body + "\n" }
	endpoint := func(e string) string { return "mirrors:\n  docker.io:\n    endpoint: [" + e + "]\n" }
	key := func(k string) string { return "mirrors:\n  " + k + ":\n    endpoint: [\"https://m.example.com\"]\n" }
	many := func(n int, line func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i))
		}
		return b.String()
	}
	const ep = `mirrors."docker.io".endpoint[0]`
	tests := []struct {
		name, yaml string
		field      string // "" for an error of the whole document
		reason     string // a substring of the error
	}{
		{"unknown top-level field", "mirror:\n  docker.io: {}\n", "", "field mirror not found"},
		{"unknown mirror field", "mirrors:\n  docker.io:\n    endpoints: [\"https://m\"]\n", "", "field endpoints not found"},
		{"unknown tls field", tlsCfg("{ca: /x}"), "", "field ca not found"},
		{"unknown auth field", authCfg("{token: x}"), "", "field token not found"},
		{"wrong type", "mirrors:\n  docker.io:\n    endpoint: https://m.example.com\n", "", "cannot unmarshal"},
		{"bool as string", tlsCfg(`{insecure_skip_verify: "maybe"}`), "", "cannot unmarshal"},
		{"duplicate key", "mirrors:\n  docker.io: {}\n  docker.io: {}\n", "", "already defined"},
		{"two documents", "mirrors: {}\n---\nconfigs: {}\n", "", "more than one YAML document"},
		{"not YAML", "mirrors: [\n", "", "yaml"},
		{"too large", "# " + strings.Repeat("x", MaxFileSize) + "\n", "", "larger than"},
		{"too many registries", "configs:\n" + many(MaxRegistries+1, func(i int) string { return fmt.Sprintf("  r%d.example.com: {}\n", i) }),
			"mirrors, configs", "257 registries; at most 256"},
		{"too many endpoints", "mirrors:\n  docker.io:\n    endpoint:\n" + many(MaxEndpoints+1, func(i int) string { return fmt.Sprintf("      - https://m%d.example.com\n", i) }),
			`mirrors."docker.io".endpoint`, "17 endpoints; at most 16"},
		{"rewrite", "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com\"]\n    rewrite:\n      \"^rancher/(.*)\": \"mirror/$1\"\n",
			`mirrors."docker.io".rewrite`, "not supported"},
		{"registry URL", key(`"https://reg.example.com"`), `mirrors."https://reg.example.com"`, "not by a URL"},
		{"registry path", key(`"reg.example.com/library"`), `mirrors."reg.example.com/library"`, "without a path"},
		{"registry bad name", key(`"reg_example.com"`), `mirrors."reg_example.com"`, "not a host name"},
		{"registry empty", key(`""`), `mirrors.""`, "empty registry host"},
		{"registry port 0", key(`"reg.example.com:0"`), `mirrors."reg.example.com:0"`, "port"},
		{"registry port too big", key(`"reg.example.com:65536"`), `mirrors."reg.example.com:65536"`, "port"},
		{"registry bad IPv6", key(`"[fd00::zz]:5000"`), `mirrors."[fd00::zz]:5000"`, "not a host name"},
		{"registry IPv4 in brackets", key(`"[10.0.0.1]"`), `mirrors."[10.0.0.1]"`, "not an IPv6 address"},
		{"configs wildcard", "configs:\n  \"*\":\n    tls: {insecure_skip_verify: true}\n", `configs."*"`, "under mirrors only"},
		{"configs bad key", "configs:\n  \"reg.example.com/x\": {}\n", `configs."reg.example.com/x"`, "without a path"},
		{"endpoint without scheme", endpoint(`"mirror.example.com:5000"`), ep, "must start with http:// or https://"},
		{"endpoint ftp", endpoint(`"ftp://mirror.example.com"`), ep, "must start with http:// or https://"},
		{"endpoint without host", endpoint(`"https:///v2"`), ep, "host: empty registry host"},
		{"endpoint bad host", endpoint(`"https://mir ror.example.com"`), ep, "not a URL"},
		{"endpoint user info", endpoint(`"https://u:p@mirror.example.com"`), ep, "must not hold credentials"},
		{"endpoint query", endpoint(`"https://mirror.example.com/v2?x=1"`), ep, "must not have a query"},
		{"endpoint fragment", endpoint(`"https://mirror.example.com/#x"`), ep, "must not have a fragment"},
		{"endpoint IPv6", endpoint(`"https://[fd00::1]:5000"`), ep, "IPv6 address"},
		{"endpoint bad port", endpoint(`"https://mirror.example.com:99999"`), ep, "port"},
		{"endpoint repeated", endpoint(`"https://m.example.com", "https://m.example.com/v2/"`), `mirrors."docker.io".endpoint[1]`, "same endpoint as endpoint[0]"},
		{"auth empty", authCfg("{}"), `configs."reg.example.com".auth`, "give username and password, auth, or identity_token"},
		{"auth two forms", authCfg("{username: u, password: p, identity_token: t}"), `configs."reg.example.com".auth`, "only one of"},
		{"auth username only", authCfg("{username: u}"), `configs."reg.example.com".auth.password`, "is needed with username"},
		{"auth password only", authCfg("{password: p}"), `configs."reg.example.com".auth.username`, "is needed with password"},
		{"auth not base64", authCfg("{auth: \"u:p\"}"), `configs."reg.example.com".auth.auth`, "is not base64"},
		{"auth without colon", authCfg("{auth: dXNlcg==}"), `configs."reg.example.com".auth.auth`, `base64 of "username:password"`},
		{"auth empty user", authCfg("{auth: OnBhc3M=}"), `configs."reg.example.com".auth.auth`, `base64 of "username:password"`},
		{"tls relative ca", tlsCfg("{ca_file: ca.pem}"), `configs."reg.example.com".tls.ca_file`, "not an absolute path"},
		{"tls missing ca", tlsCfg("{ca_file: /nonexistent/ca.pem}"), `configs."reg.example.com".tls.ca_file`, "cannot be read"},
		{"tls ca is a directory", tlsCfg("{ca_file: " + filepath.Dir(p.CAFile) + "}"), `configs."reg.example.com".tls.ca_file`, "cannot be read"},
		{"tls ca not PEM", tlsCfg("{ca_file: " + p.NotPEMFile + "}"), `configs."reg.example.com".tls.ca_file`, "holds no PEM certificate"},
		{"tls cert without key", tlsCfg("{cert_file: " + p.CertFile + "}"), `configs."reg.example.com".tls.key_file`, "is needed with cert_file"},
		{"tls key without cert", tlsCfg("{key_file: " + p.KeyFile + "}"), `configs."reg.example.com".tls.cert_file`, "is needed with key_file"},
		{"tls missing key", tlsCfg("{cert_file: " + p.CertFile + ", key_file: /nonexistent/key.pem}"), `configs."reg.example.com".tls.key_file`, "cannot be read"},
		{"tls relative cert", tlsCfg("{cert_file: client.pem, key_file: " + p.KeyFile + "}"), `configs."reg.example.com".tls.cert_file`, "not an absolute path"},
		{"tls mismatched pair", tlsCfg("{cert_file: " + p.CertFile + ", key_file: " + p.OtherKeyFile + "}"), `configs."reg.example.com".tls.cert_file`, "are not a certificate and its key"},
		{"tls cert not PEM", tlsCfg("{cert_file: " + p.NotPEMFile + ", key_file: " + p.KeyFile + "}"), `configs."reg.example.com".tls.cert_file`, "are not a certificate and its key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not match ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
			var fe *FieldError
			switch {
			case tt.field == "" && errors.As(err, &fe):
				t.Errorf("error %q is about field %s, want one about the document", err, fe.Field)
			case tt.field != "" && !errors.As(err, &fe):
				t.Errorf("error %q is not a *FieldError", err)
			case tt.field != "" && fe.Field != tt.field:
				t.Errorf("error %q names field %s, want %s", err, fe.Field, tt.field)
			}
		})
	}
}

// TestValidateReportsAll checks that one Validate reports every problem, in a stable order.
func TestValidateReportsAll(t *testing.T) {
	c := &Config{
		Mirrors: map[string]Mirror{
			"b.example.com": {Endpoints: []string{"ftp://x", "https://ok.example.com", "https://u@y"}},
			"a.example.com": {Rewrites: map[string]string{}},
		},
		Configs: map[string]RegistryConfig{"c.example.com": {Auth: &AuthConfig{}, TLS: &TLSConfig{CAFile: "rel"}}},
	}
	err := c.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{
		`mirrors."a.example.com".rewrite`,
		`mirrors."b.example.com".endpoint[0]`,
		`mirrors."b.example.com".endpoint[2]`,
		`configs."c.example.com".auth`,
		`configs."c.example.com".tls.ca_file`,
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields of %q (-want +got):\n%s", err, diff)
	}
}

func TestValidateNonUTF8Path(t *testing.T) {
	c := &Config{Configs: map[string]RegistryConfig{"r.example.com": {TLS: &TLSConfig{CAFile: "/tmp/\xff.pem"}}}}
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != `configs."r.example.com".tls.ca_file` || !strings.Contains(fe.Reason, "UTF-8") {
		t.Errorf("Validate = %v, want a ca_file error about UTF-8", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "registries.yaml")
	writeTestFile(t, good, []byte("mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com\"]\n"))
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Mirrors["docker.io"].Endpoints; len(got) != 1 || got[0] != "https://m.example.com" {
		t.Errorf("Load: docker.io endpoints %q", got)
	}

	if _, err := Load(filepath.Join(dir, "absent.yaml")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("Load of a missing file = %v, want fs.ErrNotExist", err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeTestFile(t, bad, []byte("mirrors:\n  docker.io:\n    endpoint: [\"ftp://m\"]\n"))
	_, err = Load(bad)
	var fe *FieldError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load of an invalid file = %v, want a *FieldError naming the file", err)
	}

	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Load(big); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of a 2 MiB file = %v, want it refused as too large", err)
	}
}
