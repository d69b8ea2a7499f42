package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for migrations
	"github.com/spf13/cobra"

	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/migrations"
	"github.com/wheelhouse-dev/wheelhouse/scheduler"
	"github.com/wheelhouse-dev/wheelhouse/server"
	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/server/servingcert"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgserver"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

// serverConfig is `wheelhouse server`'s configuration, bound from flags and WHEELHOUSE_* variables.
type serverConfig struct {
	Listen      string
	DatabaseURL string // empty: run PostgreSQL from the machine's binaries in DataDir/postgres
	DataDir     string
	LogLevel    string
	LogFormat   string
	// Retention is how long the store keeps history for watches and paged lists to resume from (a duration).
	Retention string
	// BootstrapToken and BootstrapPassword (env only: WHEELHOUSE_BOOTSTRAP_TOKEN / _PASSWORD) become the first
	// admin's API token and dashboard password; unset, generated ones are printed once.
	BootstrapToken, BootstrapPassword string
	// TLSCertFile and TLSKeyFile serve HTTPS with that certificate; empty, the server keeps its own CA and
	// serving certificate in DataDir/tls.
	TLSCertFile, TLSKeyFile string
	// WatchCache is "on" (default) or "off": off sends every Kubernetes API read to PostgreSQL (for comparison).
	WatchCache string
	// SchedulerConfig is a KubeSchedulerConfiguration file for the scheduler ("" is kube-scheduler's defaults).
	SchedulerConfig string
	// AuditRetention is how long audit records are kept (a duration).
	AuditRetention string
	// TLS is "on" (default: HTTPS) or "off" (plain HTTP, for local development only).
	TLS string
	// NodeMonitorGracePeriod (a duration), NodeEvictionRate (nodes a second) and DefaultTolerationSeconds
	// (seconds; negative: no default tolerations) are kube-controller-manager's and kube-apiserver's flags of
	// those names: how long a node may go unheard before it is NotReady (Unknown), how fast lost nodes get the
	// NoExecute taints that evict their pods, and how long a pod tolerates them unless it says otherwise.
	NodeMonitorGracePeriod, NodeEvictionRate, DefaultTolerationSeconds string
	// LocalAgent "on" runs a node agent of the default cluster as a child process (make run; needs root), with
	// LocalAgentRuntime: containerd, process, or auto (containerd when it and runc are installed).
	LocalAgent, LocalAgentRuntime string
	// AgentBinaryDir holds prebuilt agents, wheelhouse-linux-<arch>, for the arches other than the server's own.
	AgentBinaryDir string
	// AdvertiseURL is where the other server replicas reach this one (to forward requests for nodes whose agent
	// tunnel this replica holds); empty: the scheme, the listen address's host (the host name when it listens on
	// every address) and the port.
	AdvertiseURL string
	// TrustedProxies is a comma-separated list of networks (CIDR, or single addresses) of the reverse proxies in
	// front of the server, whose X-Forwarded-For names the client; empty: the connection's address is the
	// client's, whatever the headers say.
	TrustedProxies string
	// DebugListen, when set, serves Go's profiler (net/http/pprof) on that address, unauthenticated: loopback
	// only, for perf work.
	DebugListen string
}

// nodeLifecycle is the node lifecycle controller's configuration; call it only on a valid config.
func (c serverConfig) nodeLifecycle() controllers.NodeLifecycleConfig {
	grace, _ := time.ParseDuration(c.NodeMonitorGracePeriod)
	rate, _ := strconv.ParseFloat(c.NodeEvictionRate, 64)
	return controllers.NodeLifecycleConfig{MonitorGracePeriod: grace, EvictionRate: rate}
}

// tolerationSeconds is the DefaultTolerationSeconds admission step's value; call it only on a valid config.
func (c serverConfig) tolerationSeconds() int64 {
	v, _ := strconv.ParseInt(c.DefaultTolerationSeconds, 10, 64)
	return v
}

// Validate reports a configuration that cannot work.
func (c serverConfig) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen/WHEELHOUSE_LISTEN %q: want host:port", c.Listen)
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		return errors.New("--data-dir/WHEELHOUSE_DATA_DIR is required when --database-url is not set")
	}
	if d, err := time.ParseDuration(c.Retention); err != nil || d < time.Minute {
		return fmt.Errorf("--history-retention/WHEELHOUSE_HISTORY_RETENTION %q: want a duration of at least 1m", c.Retention)
	}
	if d, err := time.ParseDuration(c.AuditRetention); err != nil || d < time.Hour {
		return fmt.Errorf("--audit-retention/WHEELHOUSE_AUDIT_RETENTION %q: want a duration of at least 1h", c.AuditRetention)
	}
	if c.TLS != "on" && c.TLS != "off" {
		return fmt.Errorf("--tls/WHEELHOUSE_TLS %q: want on or off", c.TLS)
	}
	if c.TLS == "off" && (c.TLSCertFile != "" || c.TLSKeyFile != "") {
		return errors.New("--tls off contradicts --tls-cert-file/--tls-key-file")
	}
	if c.WatchCache != "on" && c.WatchCache != "off" {
		return fmt.Errorf("--watch-cache/WHEELHOUSE_WATCH_CACHE %q: want on or off", c.WatchCache)
	}
	if d, err := time.ParseDuration(c.NodeMonitorGracePeriod); err != nil || d < time.Second {
		return fmt.Errorf("--node-monitor-grace-period/WHEELHOUSE_NODE_MONITOR_GRACE_PERIOD %q: want a duration of at least 1s", c.NodeMonitorGracePeriod)
	}
	if r, err := strconv.ParseFloat(c.NodeEvictionRate, 64); err != nil || !(r > 0) || math.IsInf(r, 0) {
		return fmt.Errorf("--node-eviction-rate/WHEELHOUSE_NODE_EVICTION_RATE %q: want a positive number of nodes a second", c.NodeEvictionRate)
	}
	if c.LocalAgent != "on" && c.LocalAgent != "off" {
		return fmt.Errorf("--local-agent/WHEELHOUSE_LOCAL_AGENT %q: want on or off", c.LocalAgent)
	}
	switch c.LocalAgentRuntime {
	case "auto", "containerd", "process":
	default:
		return fmt.Errorf("--local-agent-runtime/WHEELHOUSE_LOCAL_AGENT_RUNTIME %q: want auto, containerd or process", c.LocalAgentRuntime)
	}
	if c.LocalAgent == "on" && c.DataDir == "" {
		return errors.New("--local-agent on needs --data-dir (the agent keeps its state there)")
	}
	if _, err := strconv.ParseInt(c.DefaultTolerationSeconds, 10, 64); err != nil {
		return fmt.Errorf("--default-toleration-seconds/WHEELHOUSE_DEFAULT_TOLERATION_SECONDS %q: want a whole number of seconds", c.DefaultTolerationSeconds)
	}
	if _, err := scheduler.LoadConfig(c.SchedulerConfig); err != nil {
		return fmt.Errorf("--scheduler-config/WHEELHOUSE_SCHEDULER_CONFIG: %w", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level/WHEELHOUSE_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.AdvertiseURL != "" {
		if u, err := url.Parse(c.AdvertiseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("--advertise-url/WHEELHOUSE_ADVERTISE_URL %q: want scheme://host:port", c.AdvertiseURL)
		}
	}
	if _, err := clientip.ParseNetworks(c.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies/WHEELHOUSE_TRUSTED_PROXIES: %w", err)
	}
	if err := checkDebugListen(c.DebugListen); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format/WHEELHOUSE_LOG_FORMAT %q: want text or json", c.LogFormat)
	}
	return nil
}

// logger builds the process logger; call it only on a valid config.
func (c serverConfig) logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func newServerCommand(getenv func(string) string, runServer func(context.Context, serverConfig) error) *cobra.Command {
	cfg := serverConfig{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Wheelhouse server",
		Long: "Run the Wheelhouse server. Without --database-url it runs its own PostgreSQL from this machine's " +
			"PostgreSQL binaries, in <data-dir>/postgres, and stops it on exit.",
		Args: cobra.NoArgs,
	}
	bindings := []struct {
		p                 *string
		flag, env, def, u string
	}{
		{&cfg.Listen, "listen", "WHEELHOUSE_LISTEN", "127.0.0.1:8080", "address (host:port) to serve HTTP on"},
		{&cfg.DatabaseURL, "database-url", "WHEELHOUSE_DATABASE_URL", "", "PostgreSQL URL; empty runs an embedded PostgreSQL in <data-dir>/postgres"},
		{&cfg.DataDir, "data-dir", "WHEELHOUSE_DATA_DIR", "./.wheelhouse", "directory for the server's state"},
		{&cfg.LogLevel, "log-level", "WHEELHOUSE_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
		{&cfg.LogFormat, "log-format", "WHEELHOUSE_LOG_FORMAT", "text", "log format: text or json"},
		{&cfg.TLSCertFile, "tls-cert-file", "WHEELHOUSE_TLS_CERT_FILE", "", "serving certificate (PEM); empty: a self-managed CA and certificate in <data-dir>/tls"},
		{&cfg.TLSKeyFile, "tls-key-file", "WHEELHOUSE_TLS_KEY_FILE", "", "private key of --tls-cert-file (PEM)"},
		{&cfg.Retention, "history-retention", "WHEELHOUSE_HISTORY_RETENTION", "5m", "how long change history is kept for watches to resume from"},
		{&cfg.TLS, "tls", "WHEELHOUSE_TLS", "on", "serve HTTPS (on) or plain HTTP (off: local development only; Kubernetes clients send tokens only over TLS)"},
		{&cfg.AuditRetention, "audit-retention", "WHEELHOUSE_AUDIT_RETENTION", "2160h", "how long audit records are kept (default 90 days)"},
		{&cfg.WatchCache, "watch-cache", "WHEELHOUSE_WATCH_CACHE", "on", "serve Kubernetes API watches and lists from memory: on or off (every read from PostgreSQL)"},
		{&cfg.SchedulerConfig, "scheduler-config", "WHEELHOUSE_SCHEDULER_CONFIG", "", "KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file for the scheduler; empty: kube-scheduler's defaults"},
		{&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", "WHEELHOUSE_NODE_MONITOR_GRACE_PERIOD", "40s", "how long a node's lease may go unrenewed before the node is marked NotReady (Ready=Unknown) and tainted unreachable"},
		{&cfg.NodeEvictionRate, "node-eviction-rate", "WHEELHOUSE_NODE_EVICTION_RATE", "0.1", "nodes per second, per cluster, given the NoExecute taints that evict their pods"},
		{&cfg.DebugListen, "debug-listen", "WHEELHOUSE_DEBUG_LISTEN", "", "serve Go's profiler (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060 (unauthenticated: loopback only)"},
		{&cfg.LocalAgent, "local-agent", "WHEELHOUSE_LOCAL_AGENT", "off", "run a node agent of the default cluster on this machine as a child process: on or off (needs root)"},
		{&cfg.LocalAgentRuntime, "local-agent-runtime", "WHEELHOUSE_LOCAL_AGENT_RUNTIME", "auto", "the local agent's container runtime: containerd (container images), process (host processes, no images), or auto: containerd when containerd and runc are installed"},
		{&cfg.DefaultTolerationSeconds, "default-toleration-seconds", "WHEELHOUSE_DEFAULT_TOLERATION_SECONDS", "300", "seconds a new pod tolerates the not-ready and unreachable taints unless it says otherwise (negative: add no such tolerations)"},
		{&cfg.AdvertiseURL, "advertise-url", "WHEELHOUSE_ADVERTISE_URL", "", "URL the other server replicas reach this one at (they forward requests for nodes whose agent is connected here); default: scheme://<listen host or host name>:<port>"},
		{&cfg.TrustedProxies, "trusted-proxies", "WHEELHOUSE_TRUSTED_PROXIES", "", "comma-separated networks (CIDR) of the reverse proxies in front of the server: from them, X-Forwarded-For names the client (audit log, sign-in throttling); empty: the connection's address, headers ignored"},
		{&cfg.AgentBinaryDir, "agent-binary-dir", "WHEELHOUSE_AGENT_BINARY_DIR", "", "directory of prebuilt agents named wheelhouse-linux-<arch>, served to machines of other architectures than the server's (which gets the server's own executable)"},
	}
	for _, b := range bindings {
		cmd.Flags().StringVar(b.p, b.flag, b.def, b.u+" (env "+b.env+")")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Flag over environment over default. The environment is applied here rather than as the flag's
		// default so that --help never prints a value from it (a database URL may hold a password).
		for _, b := range bindings {
			if v := getenv(b.env); v != "" && !cmd.Flags().Changed(b.flag) {
				*b.p = v
			}
		}
		cfg.BootstrapToken, cfg.BootstrapPassword = getenv("WHEELHOUSE_BOOTSTRAP_TOKEN"), getenv("WHEELHOUSE_BOOTSTRAP_PASSWORD")
		return runServer(cmd.Context(), cfg)
	}
	return cmd
}

// errPostgresExited ends the server when the embedded PostgreSQL dies under it.
var errPostgresExited = errors.New("embedded PostgreSQL exited unexpectedly")

// run runs the server until ctx ends: embedded PostgreSQL (without a database URL), migrations, store, HTTP.
// It stops them in reverse order. A ctx that ends during start-up is a clean stop, not an error.
func run(ctx context.Context, cfg serverConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.logger(os.Stderr)
	v := version.Get()
	log.Info("starting wheelhouse", "version", v.GitVersion, "commit", v.GitCommit, "go", v.GoVersion)
	err := serve(ctx, cfg, log)
	if err != nil && ctx.Err() != nil {
		log.Warn("stopped during start-up", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("wheelhouse stopped")
	return nil
}

func serve(ctx context.Context, cfg serverConfig, log *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	url := cfg.DatabaseURL
	if url == "" {
		pg, err := startPostgres(ctx, cfg.DataDir, log)
		if err != nil {
			return err
		}
		defer stopPostgres(pg, log)
		go func() {
			select {
			case <-pg.Done():
				cancel(errPostgresExited)
			case <-ctx.Done():
			}
		}()
		url = pg.URL("")
	}
	if err := migrate(ctx, url, log); err != nil {
		return err
	}
	retention, _ := time.ParseDuration(cfg.Retention) // validated
	st, err := store.Open(ctx, store.Config{URL: url, Retention: retention, Logger: log.With("component", "store")})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	// Tokens are checked against the database on every request (no positive cache), so revocations apply at
	// once on every replica; cluster rows are cached briefly.
	ten, err := tenancy.Open(ctx, tenancy.Config{URL: url, Logger: log.With("component", "tenancy"), MaxConns: 16})
	if err != nil {
		return fmt.Errorf("open tenancy store: %w", err)
	}
	defer ten.Close()
	tlsCfg, caPEM, err := servingTLS(ctx, cfg, ten)
	if err != nil {
		return err
	}
	// Listening before the APIs exist tells the replica its own address, which it advertises to the others.
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	self, err := replicaSelf(cfg, l.Addr(), tlsCfg != nil, caPEM)
	if err != nil {
		l.Close()
		return err
	}
	mount, closeAPI, err := apis(ctx, cfg, ten, st, caPEM, self, log)
	if err != nil {
		l.Close()
		return err
	}
	defer closeAPI()
	proxies, _ := clientip.ParseNetworks(cfg.TrustedProxies) // validated
	srv, err := server.New(server.Config{Listener: l, Store: st, Logger: log.With("component", "http"),
		Mount: mount, TLS: tlsCfg, TrustedProxies: proxies})
	if err != nil {
		return err
	}
	// People find the dashboard here (the log line "serving HTTP" has the same address).
	fmt.Fprintf(os.Stderr, "\nDashboard: %s/ui/  (sign in as admin@localhost on a fresh install)\n\n", self.url)
	var agentDone chan struct{}
	if cfg.DebugListen != "" {
		go serveDebug(ctx, cfg.DebugListen, log)
	}
	if cfg.LocalAgent == "on" {
		agentDone = make(chan struct{})
		go func() { defer close(agentDone); localAgent(ctx, cfg, l.Addr().String(), ten, caPEM, log) }()
	}
	err = srv.Start(ctx)
	if agentDone != nil {
		<-agentDone
	}
	if err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, errPostgresExited) {
		return cause
	}
	return nil
}

// startPostgres runs the embedded PostgreSQL in dataDir/postgres.
func startPostgres(ctx context.Context, dataDir string, log *slog.Logger) (*pgserver.Server, error) {
	// 0711: PostgreSQL may run as another user (root hands it to "postgres"), which must traverse dataDir.
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// A signal during start-up stops it; pgserver keeps an interrupted initdb from leaving a broken cluster.
	pg, err := pgserver.Start(ctx, pgserver.Config{
		DataDir: filepath.Join(dataDir, "postgres"),
		Logger:  log.With("component", "postgres"),
	})
	if err != nil {
		return nil, fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	return pg, nil
}

func stopPostgres(pg *pgserver.Server, log *slog.Logger) {
	log.Info("stopping PostgreSQL")
	if err := pg.Stop(); err != nil {
		log.Error("stopping PostgreSQL failed", "err", err)
		return
	}
	log.Info("PostgreSQL stopped")
}

// migrate applies the pending schema migrations.
func migrate(ctx context.Context, url string, log *slog.Logger) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer db.Close()
	v, err := migrations.Up(ctx, db)
	if err != nil {
		return err
	}
	log.Info("database schema is up to date", "version", v)
	return nil
}

// servingTLS loads the configured certificate, or the self-managed one in DataDir/tls (created on first start;
// its CA goes into kubeconfigs).
func servingTLS(ctx context.Context, cfg serverConfig, shared servingcert.CAStore) (*tls.Config, []byte, error) {
	if cfg.TLS == "off" {
		return nil, nil, nil
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil, nil
	}
	var hosts []string
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" && h != "0.0.0.0" && h != "::" {
		hosts = append(hosts, h)
	}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	cert, caPEM, err := servingcert.EnsureShared(ctx, shared, filepath.Join(cfg.DataDir, "tls"), hosts, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caPEM, nil
}

// checkDebugListen checks a --debug-listen address: empty (off) or a loopback host:port.
func checkDebugListen(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--debug-listen/WHEELHOUSE_DEBUG_LISTEN %q: want a loopback host:port such as 127.0.0.1:6060", addr)
	}
	return nil
}

// serveDebug serves net/http/pprof on addr (loopback, checked by Validate) until ctx ends.
func serveDebug(ctx context.Context, addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("profiler listening", "addr", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("profiler stopped", "err", err)
	}
}
