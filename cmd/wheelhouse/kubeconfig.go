package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeconfig"
	"github.com/wheelhouse-dev/wheelhouse/server/servingcert"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// kubeconfigConfig is `wheelhouse kubeconfig`'s configuration, bound from flags and WHEELHOUSE_* variables.
type kubeconfigConfig struct {
	Cluster     string
	Server      string // base URL of the Wheelhouse server
	Token       string // empty: mint one for User in the database
	User        string
	DatabaseURL string // empty: the embedded PostgreSQL of the server running on DataDir
	DataDir     string
	TokenTTL    string // lifetime of a minted token; empty: it never expires
	// CAFile is the PEM CA that signed the server's certificate; empty: <data-dir>/tls/ca.crt when it exists
	// (the server's self-managed CA), else the system's roots.
	CAFile string
}

// Validate reports a configuration that cannot work.
func (c kubeconfigConfig) Validate() error {
	if !tenancy.ValidID(c.Cluster) {
		return fmt.Errorf("--cluster %q: want a cluster id (a DNS label such as \"default\")", c.Cluster)
	}
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--server/WHEELHOUSE_SERVER %q: want an http(s) URL such as http://127.0.0.1:8080", c.Server)
	}
	if c.Token != "" && len(c.Token) < tenancy.MinTokenLen {
		return fmt.Errorf("--token/WHEELHOUSE_TOKEN: too short to be a Wheelhouse token")
	}
	if c.Token == "" && c.DatabaseURL == "" && c.DataDir == "" {
		return errors.New("without --token, --database-url/WHEELHOUSE_DATABASE_URL or --data-dir/WHEELHOUSE_DATA_DIR is required")
	}
	if c.TokenTTL != "" {
		if d, err := time.ParseDuration(c.TokenTTL); err != nil || d <= 0 {
			return fmt.Errorf("--token-ttl %q: want a positive duration such as 720h", c.TokenTTL)
		}
	}
	return nil
}

// serverURL is the cluster's Kubernetes API base URL.
func (c kubeconfigConfig) serverURL() string {
	return strings.TrimRight(c.Server, "/") + "/clusters/" + url.PathEscape(c.Cluster)
}

func newKubeconfigCommand(getenv func(string) string, out io.Writer) *cobra.Command {
	cfg := kubeconfigConfig{}
	cmd := &cobra.Command{
		Use:   "kubeconfig --cluster ID",
		Short: "Print a kubeconfig for one cluster",
		Long: "Print a kubeconfig for one cluster, for kubectl and client-go. Without --token it mints a new API " +
			"token for --user, in the database given by --database-url or, without one, in the embedded PostgreSQL " +
			"of the server running on --data-dir.",
		Example: "  wheelhouse kubeconfig --cluster default > ~/.kube/wheelhouse && KUBECONFIG=~/.kube/wheelhouse kubectl get ns",
		Args:    cobra.NoArgs,
	}
	bindings := []struct {
		p                 *string
		flag, env, def, u string
	}{
		{&cfg.Cluster, "cluster", "", "", "id of the cluster"},
		{&cfg.Server, "server", "WHEELHOUSE_SERVER", "https://127.0.0.1:8080", "URL of the Wheelhouse server"},
		{&cfg.CAFile, "certificate-authority", "WHEELHOUSE_CERTIFICATE_AUTHORITY", "", "PEM file of the CA of the server's certificate; empty: <data-dir>/tls/ca.crt if present"},
		{&cfg.Token, "token", "WHEELHOUSE_TOKEN", "", "API token to put in the kubeconfig; empty mints a new one"},
		{&cfg.User, "user", "", tenancy.AdminEmail, "email of the user a new token is minted for"},
		{&cfg.TokenTTL, "token-ttl", "", "", "lifetime of a minted token (for example 720h); empty: it never expires"},
		{&cfg.DatabaseURL, "database-url", "WHEELHOUSE_DATABASE_URL", "", "PostgreSQL URL; empty uses the server's embedded PostgreSQL in <data-dir>/postgres"},
		{&cfg.DataDir, "data-dir", "WHEELHOUSE_DATA_DIR", "./.wheelhouse", "the server's data directory"},
	}
	for _, b := range bindings {
		usage := b.u
		if b.env != "" {
			usage += " (env " + b.env + ")"
		}
		cmd.Flags().StringVar(b.p, b.flag, b.def, usage)
	}
	_ = cmd.MarkFlagRequired("cluster")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// As for `server`: flag over environment over default, and --help never shows the environment.
		for _, b := range bindings {
			if b.env == "" || cmd.Flags().Changed(b.flag) {
				continue
			}
			if v := getenv(b.env); v != "" {
				*b.p = v
			}
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		return writeKubeconfig(cmd.Context(), cfg, out, time.Now)
	}
	return cmd
}

// writeKubeconfig writes the kubeconfig of cfg to out, minting a token first when cfg has none.
func writeKubeconfig(ctx context.Context, cfg kubeconfigConfig, out io.Writer, now func() time.Time) error {
	token := cfg.Token
	if token == "" {
		var err error
		if token, err = mintToken(ctx, cfg, now()); err != nil {
			return err
		}
	}
	ca, err := cfg.caData()
	if err != nil {
		return err
	}
	b, err := kubeconfig.Build(cfg.Cluster, cfg.serverURL(), token, ca)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// mintToken creates an API token for cfg.User, after checking that cfg.Cluster exists.
func mintToken(ctx context.Context, cfg kubeconfigConfig, now time.Time) (string, error) {
	dbURL := cfg.DatabaseURL
	if dbURL == "" {
		var err error
		if dbURL, err = embeddedDatabaseURL(cfg.DataDir); err != nil {
			return "", err
		}
	}
	st, err := tenancy.Open(ctx, tenancy.Config{URL: dbURL, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", fmt.Errorf("database: %w", err)
	}
	defer st.Close()
	if _, err := st.Cluster(ctx, cfg.Cluster); errors.Is(err, tenancy.ErrNotFound) {
		return "", fmt.Errorf("cluster %q does not exist", cfg.Cluster)
	} else if err != nil {
		return "", err
	}
	user, err := st.UserByEmail(ctx, cfg.User)
	if errors.Is(err, tenancy.ErrNotFound) {
		return "", fmt.Errorf("user %q does not exist", cfg.User)
	} else if err != nil {
		return "", err
	}
	var expires time.Time
	if cfg.TokenTTL != "" {
		ttl, _ := time.ParseDuration(cfg.TokenTTL) // validated
		expires = now.Add(ttl)
	}
	name := "kubeconfig-" + cfg.Cluster + "-" + now.UTC().Format("20060102T150405Z")
	token, _, err := st.CreateToken(ctx, user.ID, name, expires)
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	return token, nil
}

// embeddedDatabaseURL is the unix-socket URL of the PostgreSQL that `wheelhouse server` runs in
// dataDir/postgres (see store/pgserver: database "wheelhouse", user "postgres"). It is read from the server's
// postmaster.pid, whose 4th line is the port and 5th the socket directory, so it also finds a socket directory
// that pgserver had to place outside a deep data directory. It does not start PostgreSQL.
func embeddedDatabaseURL(dataDir string) (string, error) {
	pidFile := filepath.Join(dataDir, "postgres", "data", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no running Wheelhouse PostgreSQL under %s (no %s): start `wheelhouse server --data-dir %s`, "+
			"or pass --database-url or --token", dataDir, pidFile, dataDir)
	}
	if err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		return "", fmt.Errorf("embedded PostgreSQL: %s is incomplete (the server may be starting); try again", pidFile)
	}
	port, socketDir := strings.TrimSpace(lines[3]), strings.TrimSpace(lines[4])
	if _, err := strconv.Atoi(port); err != nil || socketDir == "" {
		return "", fmt.Errorf("embedded PostgreSQL: %s names no unix socket", pidFile)
	}
	q := url.Values{"host": {socketDir}, "port": {port}, "user": {"postgres"}, "sslmode": {"disable"}}
	return "postgres:///wheelhouse?" + q.Encode(), nil
}

// caData reads the CA to pin: --certificate-authority, else the server's self-managed CA in the data dir if it
// exists (nil: the system's roots).
func (c kubeconfigConfig) caData() ([]byte, error) {
	path := c.CAFile
	if path == "" {
		if c.DataDir == "" {
			return nil, nil
		}
		path = filepath.Join(c.DataDir, "tls", servingcert.CAFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certificate authority: %w", err)
	}
	return b, nil
}
