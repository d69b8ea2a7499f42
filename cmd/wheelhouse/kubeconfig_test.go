package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// runKubeconfig runs `wheelhouse kubeconfig args...` with env as the environment.
func runKubeconfig(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand(func(k string) string { return env[k] }, &out, nil)
	root.SetArgs(append([]string{"kubeconfig"}, args...))
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// parseKubeconfig decodes a kubeconfig and returns its current context's server and token.
func parseKubeconfig(t *testing.T, text string) (server, token string) {
	t.Helper()
	obj, err := runtime.Decode(clientcmdlatest.Codec, []byte(text))
	if err != nil {
		t.Fatalf("decode kubeconfig: %v\n%s", err, text)
	}
	cfg := obj.(*clientcmdapi.Config)
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig has no complete current context:\n%s", text)
	}
	return cfg.Clusters[ctx.Cluster].Server, cfg.AuthInfos[ctx.AuthInfo].Token
}

// bootstrapped opens the tenancy store of a fresh bootstrapped database.
func bootstrapped(t *testing.T, url string) *tenancy.Store {
	t.Helper()
	st, err := tenancy.Open(t.Context(), tenancy.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Bootstrap(t.Context(), tenancy.BootstrapConfig{}); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestKubeconfigMintsToken(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := bootstrapped(t, url)
	out, err := runKubeconfig(t, nil, "--cluster", "default", "--database-url", url, "--server", "https://wh.example:6443/",
		"--token-ttl", "1h")
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	for _, want := range []string{"current-context: wheelhouse-default\n", "name: wheelhouse-default\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, out)
		}
	}
	server, token := parseKubeconfig(t, out)
	if server != "https://wh.example:6443/clusters/default" {
		t.Errorf("server = %q", server)
	}
	p, err := st.Authenticate(t.Context(), token)
	if err != nil || p.Email != tenancy.AdminEmail {
		t.Fatalf("the kubeconfig's token authenticates as %+v, %v", p, err)
	}
	toks, err := st.Tokens(t.Context(), p.UserID)
	if err != nil {
		t.Fatal(err)
	}
	last := toks[len(toks)-1]
	if last.ID != p.TokenID || !strings.HasPrefix(last.Name, "kubeconfig-default-") || last.ExpiresAt.IsZero() {
		t.Errorf("minted token %+v, want a kubeconfig-default-<time> token that expires", last)
	}
}

func TestKubeconfigWithToken(t *testing.T) {
	// The database URL points nowhere: with a token, no database is needed.
	env := map[string]string{"WHEELHOUSE_TOKEN": "env-token-0123456789", "WHEELHOUSE_SERVER": "http://env:8080",
		"WHEELHOUSE_DATABASE_URL": "postgres://127.0.0.1:1/none"}
	for _, tc := range []struct {
		name                  string
		args                  []string
		wantServer, wantToken string
	}{
		{"env", nil, "http://env:8080/clusters/c1", "env-token-0123456789"},
		{"flags over env", []string{"--token", "flag-token-0123456789", "--server", "http://flag"},
			"http://flag/clusters/c1", "flag-token-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runKubeconfig(t, env, append([]string{"--cluster", "c1"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			server, token := parseKubeconfig(t, out)
			if diff := cmp.Diff([]string{tc.wantServer, tc.wantToken}, []string{server, token}); diff != "" {
				t.Errorf("server, token (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKubeconfigErrors(t *testing.T) {
	url := pgtest.NewDatabase(t)
	bootstrapped(t, url)
	noServer := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown cluster", []string{"--cluster", "nope", "--database-url", url}, `cluster "nope" does not exist`},
		{"unknown user", []string{"--cluster", "default", "--database-url", url, "--user", "bob@example.com"},
			`user "bob@example.com" does not exist`},
		{"no cluster", []string{"--database-url", url}, `"cluster" not set`},
		{"bad cluster id", []string{"--cluster", "No_Such", "--database-url", url}, "--cluster"},
		{"bad server", []string{"--cluster", "default", "--server", "127.0.0.1:8080", "--token", "x123456789012345"}, "--server"},
		{"bad ttl", []string{"--cluster", "default", "--database-url", url, "--token-ttl", "forever"}, "--token-ttl"},
		{"no running server", []string{"--cluster", "default", "--data-dir", noServer}, "no running Wheelhouse PostgreSQL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runKubeconfig(t, nil, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("kubeconfig %v = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
			if out != "" {
				t.Errorf("printed output despite the error:\n%s", out)
			}
		})
	}
}

// TestKubeconfigEmbeddedPostgres finds the database of a server's embedded PostgreSQL through its data dir.
func TestKubeconfigEmbeddedPostgres(t *testing.T) {
	dataDir := filepath.Join(reachableTempDir(t), "data")
	log := slog.New(slog.DiscardHandler)
	pg, err := startPostgres(t.Context(), dataDir, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if err := migrate(t.Context(), pg.URL(""), log); err != nil {
		t.Fatal(err)
	}
	st := bootstrapped(t, pg.URL(""))
	if got, err := embeddedDatabaseURL(dataDir); err != nil || got != pg.URL("") {
		t.Errorf("embeddedDatabaseURL = %q, %v; want %q", got, err, pg.URL(""))
	}
	out, err := runKubeconfig(t, nil, "--cluster", "default", "--data-dir", dataDir)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	if _, token := parseKubeconfig(t, out); token == "" {
		t.Fatal("no token")
	} else if _, err := st.Authenticate(t.Context(), token); err != nil {
		t.Errorf("minted token does not authenticate: %v", err)
	}
}

func TestEmbeddedDatabaseURLBadPIDFile(t *testing.T) {
	for name, content := range map[string]string{
		"incomplete": "123\n/data\n1700000000\n",
		"no socket":  "123\n/data\n1700000000\n5432\n\n127.0.0.1\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pidDir := filepath.Join(dir, "postgres", "data")
			if err := os.MkdirAll(pidDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pidDir, "postmaster.pid"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if u, err := embeddedDatabaseURL(dir); err == nil {
				t.Errorf("embeddedDatabaseURL = %q, want an error", u)
			}
		})
	}
}

func TestKubeconfigHelpDoesNotPrintEnvironment(t *testing.T) {
	out, err := runKubeconfig(t, map[string]string{"WHEELHOUSE_TOKEN": "hunter2-hunter2-hunter2"}, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "hunter2") || !strings.Contains(out, "--cluster") {
		t.Errorf("--help shows a value from the environment, or no flags:\n%s", out)
	}
}
