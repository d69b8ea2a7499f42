package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wheelhouse-dev/wheelhouse/server/platform"
)

// joinTokenConfig is `wheelhouse join-token create`'s configuration.
type joinTokenConfig struct {
	Server, Token, Cluster, Description string
	ExpiresIn                           time.Duration
	MaxUses                             int
	CAFile, DataDir                     string
}

func newJoinTokenCommand(getenv func(string) string, out io.Writer) *cobra.Command {
	parent := &cobra.Command{Use: "join-token", Short: "Manage node join tokens of a cluster"}
	cfg := joinTokenConfig{}
	create := &cobra.Command{
		Use:   "create --cluster ID --token API_TOKEN",
		Short: "Create a join token for adding nodes to a cluster (printed once)",
		Long: "Create a join token through the platform API of a running server. The token carries the hash of the " +
			"server's CA, so a new node can pin it; give it to the agent install script (--token).",
		Example: "  wheelhouse join-token create --server https://wh.example.com --token $WHEELHOUSE_TOKEN --cluster prod --max-uses 3",
		Args:    cobra.NoArgs,
	}
	f := create.Flags()
	f.StringVar(&cfg.Server, "server", "https://127.0.0.1:8080", "URL of the Wheelhouse server (env WHEELHOUSE_SERVER)")
	f.StringVar(&cfg.Token, "token", "", "API token of a team admin (env WHEELHOUSE_TOKEN)")
	f.StringVar(&cfg.Cluster, "cluster", "", "id of the cluster")
	f.StringVar(&cfg.Description, "description", "", "what the token is for")
	f.DurationVar(&cfg.ExpiresIn, "expires-in", platform.DefaultJoinTokenTTL, "lifetime of the token (for example 2h); 0: no expiry (the token works until revoked)")
	f.IntVar(&cfg.MaxUses, "max-uses", 0, "how many nodes may join with it; 0: unlimited")
	f.StringVar(&cfg.CAFile, "certificate-authority", "", "PEM file of the CA of the server's certificate; empty: <data-dir>/tls/ca.crt if present")
	f.StringVar(&cfg.DataDir, "data-dir", "./.wheelhouse", "the server's data directory (for its CA)")
	_ = create.MarkFlagRequired("cluster")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		for flag, env := range map[string]string{"server": "WHEELHOUSE_SERVER", "token": "WHEELHOUSE_TOKEN"} {
			if v := getenv(env); v != "" && !cmd.Flags().Changed(flag) {
				_ = cmd.Flags().Set(flag, v)
			}
		}
		return createJoinToken(cmd.Context(), cfg, out)
	}
	parent.AddCommand(create)
	return parent
}

func createJoinToken(ctx context.Context, cfg joinTokenConfig, out io.Writer) error {
	if cfg.Token == "" {
		return errors.New("--token/WHEELHOUSE_TOKEN is required: an API token of an admin of the cluster's team")
	}
	if cfg.MaxUses < 0 || cfg.ExpiresIn < 0 {
		return errors.New("--max-uses and --expires-in must not be negative")
	}
	base, err := url.Parse(cfg.Server)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return fmt.Errorf("--server %q: want an http(s) URL", cfg.Server)
	}
	ca, err := kubeconfigConfig{CAFile: cfg.CAFile, DataDir: cfg.DataDir}.caData()
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return errors.New("certificate authority: no PEM certificate in it")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	body := map[string]any{"description": cfg.Description}
	if cfg.MaxUses > 0 {
		body["maxUses"] = cfg.MaxUses
	}
	if cfg.ExpiresIn > 0 {
		body["expiresAt"] = time.Now().Add(cfg.ExpiresIn).UTC().Format(time.RFC3339)
	} else {
		body["neverExpires"] = true // asked for explicitly: the flag's default is a day
	}
	b, _ := json.Marshal(body)
	endpoint := strings.TrimRight(cfg.Server, "/") + "/platform/v1/clusters/" + url.PathEscape(cfg.Cluster) + "/join-tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("create join token: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		var p struct{ Title, Detail string }
		if json.Unmarshal(answer, &p) == nil && p.Detail != "" {
			return fmt.Errorf("create join token: %s: %s", p.Title, p.Detail)
		}
		return fmt.Errorf("create join token: HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	var created struct{ Token string }
	if err := json.Unmarshal(answer, &created); err != nil || created.Token == "" {
		return errors.New("create join token: the server's answer has no token")
	}
	_, err = fmt.Fprintln(out, created.Token)
	return err
}
