package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// parseServer runs `wheelhouse server args...` with env as the environment and returns the config run got.
func parseServer(t *testing.T, env map[string]string, args ...string) serverConfig {
	t.Helper()
	var got serverConfig
	fakeRun := func(_ context.Context, cfg serverConfig) error { got = cfg; return nil }
	root := newRootCommand(func(k string) string { return env[k] }, &bytes.Buffer{}, fakeRun)
	root.SetArgs(append([]string{"server"}, args...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("server %v: %v", args, err)
	}
	return got
}

func TestServerFlagsAndEnv(t *testing.T) {
	defaults := serverConfig{Listen: "127.0.0.1:8080", DataDir: "./.wheelhouse", LogLevel: "info", LogFormat: "text",
		Retention: "5m", WatchCache: "on", AuditRetention: "2160h", TLS: "on", NodeMonitorGracePeriod: "40s", NodeEvictionRate: "0.1", DefaultTolerationSeconds: "300", LocalAgent: "off", LocalAgentRuntime: "auto"}
	env := map[string]string{
		"WHEELHOUSE_LISTEN": "0.0.0.0:9000", "WHEELHOUSE_DATABASE_URL": "postgres://env/db",
		"WHEELHOUSE_DATA_DIR": "/env/data", "WHEELHOUSE_LOG_LEVEL": "debug", "WHEELHOUSE_LOG_FORMAT": "json",
		"WHEELHOUSE_HISTORY_RETENTION": "10m", "WHEELHOUSE_WATCH_CACHE": "off", "WHEELHOUSE_NODE_MONITOR_GRACE_PERIOD": "5s",
	}
	fromEnv := serverConfig{Listen: "0.0.0.0:9000", DatabaseURL: "postgres://env/db", DataDir: "/env/data",
		LogLevel: "debug", LogFormat: "json", Retention: "10m", WatchCache: "off", AuditRetention: "2160h", TLS: "on",
		NodeMonitorGracePeriod: "5s", NodeEvictionRate: "0.1", DefaultTolerationSeconds: "300", LocalAgent: "off", LocalAgentRuntime: "auto"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want serverConfig
	}{
		{"defaults", nil, nil, defaults},
		{"env over default", env, nil, fromEnv},
		{"flag over env", env, []string{"--listen", "127.0.0.1:1", "--database-url", "postgres://flag/db",
			"--data-dir", "/flag", "--log-level", "warn", "--log-format", "text", "--history-retention", "1h",
			"--watch-cache", "on", "--node-monitor-grace-period", "1m", "--node-eviction-rate", "2", "--default-toleration-seconds", "-1"},
			serverConfig{Listen: "127.0.0.1:1", DatabaseURL: "postgres://flag/db", DataDir: "/flag", LogLevel: "warn",
				LogFormat: "text", Retention: "1h", WatchCache: "on", AuditRetention: "2160h", TLS: "on",
				NodeMonitorGracePeriod: "1m", NodeEvictionRate: "2", DefaultTolerationSeconds: "-1", LocalAgent: "off", LocalAgentRuntime: "auto"}},
		{"flag equal to default still wins", env, []string{"--listen", "127.0.0.1:8080"},
			func() serverConfig { c := fromEnv; c.Listen = "127.0.0.1:8080"; return c }()},
		{"empty env is unset", map[string]string{"WHEELHOUSE_LISTEN": ""}, nil, defaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseServer(t, tc.env, tc.args...)); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHelpDoesNotPrintEnvironment(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand(func(k string) string { return "postgres://user:hunter2@db/x" }, &out, nil)
	root.SetArgs([]string{"server", "--help"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("--help shows a value from the environment:\n%s", out.String())
	}
}

func TestServerConfigValidate(t *testing.T) {
	badSchedulerConfig = filepath.Join(t.TempDir(), "sched.yaml")
	if err := os.WriteFile(badSchedulerConfig, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeResourcesFit\n        weight: 500\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := serverConfig{Listen: "127.0.0.1:8080", DataDir: "d", LogLevel: "info", LogFormat: "text", Retention: "5m",
		WatchCache: "on", AuditRetention: "24h", TLS: "on", NodeMonitorGracePeriod: "40s", NodeEvictionRate: "0.1", DefaultTolerationSeconds: "300", LocalAgent: "off", LocalAgentRuntime: "auto"}
	for _, tc := range []struct {
		name    string
		change  func(*serverConfig)
		wantErr string
	}{
		{"valid", func(*serverConfig) {}, ""},
		{"external database needs no data dir", func(c *serverConfig) { c.DataDir, c.DatabaseURL = "", "postgres://x/y" }, ""},
		{"bad listen", func(c *serverConfig) { c.Listen = "8080" }, "--listen"},
		{"no data dir", func(c *serverConfig) { c.DataDir = "" }, "--data-dir"},
		{"bad level", func(c *serverConfig) { c.LogLevel = "loud" }, "--log-level"},
		{"bad format", func(c *serverConfig) { c.LogFormat = "xml" }, "--log-format"},
		{"bad retention", func(c *serverConfig) { c.Retention = "soon" }, "--history-retention"},
		{"retention too short", func(c *serverConfig) { c.Retention = "10s" }, "--history-retention"},
		{"bad watch cache", func(c *serverConfig) { c.WatchCache = "maybe" }, "--watch-cache"},
		{"bad tls", func(c *serverConfig) { c.TLS = "maybe" }, "--tls"},
		{"tls off with a certificate", func(c *serverConfig) { c.TLS, c.TLSCertFile = "off", "x.crt" }, "--tls off"},
		{"audit retention too short", func(c *serverConfig) { c.AuditRetention = "5m" }, "--audit-retention"},
		{"bad grace period", func(c *serverConfig) { c.NodeMonitorGracePeriod = "forty" }, "--node-monitor-grace-period"},
		{"grace period too short", func(c *serverConfig) { c.NodeMonitorGracePeriod = "10ms" }, "--node-monitor-grace-period"},
		{"zero eviction rate", func(c *serverConfig) { c.NodeEvictionRate = "0" }, "--node-eviction-rate"},
		{"NaN eviction rate", func(c *serverConfig) { c.NodeEvictionRate = "NaN" }, "--node-eviction-rate"},
		{"bad local agent", func(c *serverConfig) { c.LocalAgent = "yes" }, "--local-agent"},
		{"bad local agent runtime", func(c *serverConfig) { c.LocalAgentRuntime = "docker" }, "--local-agent-runtime"},
		{"bad toleration seconds", func(c *serverConfig) { c.DefaultTolerationSeconds = "5m" }, "--default-toleration-seconds"},
		{"advertise URL", func(c *serverConfig) { c.AdvertiseURL = "https://replica-1.internal:8443" }, ""},
		{"advertise URL without a scheme", func(c *serverConfig) { c.AdvertiseURL = "replica-1:8443" }, "--advertise-url"},
		{"advertise URL with a path", func(c *serverConfig) { c.AdvertiseURL = "https://lb/clusters" }, "--advertise-url"},
		{"trusted proxies", func(c *serverConfig) { c.TrustedProxies = "10.0.0.0/8, 192.0.2.7" }, ""},
		{"bad trusted proxies", func(c *serverConfig) { c.TrustedProxies = "10.0.0.0/8,lb.internal" }, "--trusted-proxies"},
		{"debug listen on loopback", func(c *serverConfig) { c.DebugListen = "127.0.0.1:6060" }, ""},
		{"debug listen on every address", func(c *serverConfig) { c.DebugListen = "0.0.0.0:6060" }, "--debug-listen"},
		{"missing scheduler config", func(c *serverConfig) { c.SchedulerConfig = "/nonexistent/sched.yaml" }, "--scheduler-config"},
		{"invalid scheduler config", func(c *serverConfig) { c.SchedulerConfig = badSchedulerConfig }, "profiles[0].plugins.score.enabled[0].weight: Invalid value: 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.change(&cfg)
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate = %v, want an error mentioning %s", err, tc.wantErr)
			}
		})
	}
}

// badSchedulerConfig is a KubeSchedulerConfiguration with an out-of-range weight (written by the test).
var badSchedulerConfig string

func TestVersionCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "Version:    " + version.Get().GitVersion + "\n"},
		{[]string{"--version"}, "wheelhouse version " + version.Get().GitVersion + "\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			root := newRootCommand(func(string) string { return "" }, &out, nil)
			root.SetArgs(tc.args)
			if err := root.ExecuteContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("output %q, want it to start with %q", out.String(), tc.want)
			}
		})
	}
	var out bytes.Buffer
	root := newRootCommand(func(string) string { return "" }, &out, nil)
	root.SetArgs([]string{"version", "-o", "json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got version.Info
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out.String())
	}
	if diff := cmp.Diff(version.Get(), got); diff != "" {
		t.Errorf("version -o json (-want +got):\n%s", diff)
	}
}

// TestServerBaseURL: the local agent reaches the server at the listener's own address (with --listen host:0 only
// the listener knows the port), over loopback when the server listens on every address.
func TestServerBaseURL(t *testing.T) {
	for _, tc := range []struct {
		tls, addr, want string
	}{
		{"on", "127.0.0.1:43123", "https://127.0.0.1:43123"},
		{"on", "0.0.0.0:8080", "https://127.0.0.1:8080"},
		{"on", "[::]:8080", "https://127.0.0.1:8080"},
		{"off", "10.0.0.5:8080", "http://10.0.0.5:8080"},
	} {
		if got := serverBaseURL(serverConfig{TLS: tc.tls}, tc.addr); got != tc.want {
			t.Errorf("serverBaseURL(tls %s, %s) = %s, want %s", tc.tls, tc.addr, got, tc.want)
		}
	}
}
