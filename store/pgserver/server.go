package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config describes one private PostgreSQL server.
type Config struct {
	// DataDir is the cluster's data directory; initdb runs there when it holds no cluster yet.
	DataDir string
	// BinDir holds initdb and postgres; empty means FindBinDir.
	BinDir string
	// User is the account PostgreSQL runs as when the caller is root; empty means postgres, else nobody.
	User string
	// TCP also listens on 127.0.0.1:Port (Port 0 picks a free port). Without it only the unix socket exists.
	TCP  bool
	Port int
	// Database is created on start when missing (default "wheelhouse").
	Database string
	// Settings are extra postgres -c settings, for example fsync=off for throwaway test servers.
	Settings map[string]string
	// StartTimeout bounds how long Start waits for the server to accept connections (default 60 s).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Database == "" {
		c.Database = "wheelhouse"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("pgserver: DataDir is required")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("pgserver: port %d out of range", c.Port)
	}
	return nil
}

// Server is a running PostgreSQL child process.
type Server struct {
	cfg       Config
	socketDir string
	port      int
	cmd       *exec.Cmd
	logFile   *os.File
	done      chan struct{}
	waitErr   error
	stopOnce  sync.Once
	tmpSocket bool
}

// Start initialises (first time) and starts the server, and returns once it accepts connections and
// cfg.Database exists.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BinDir == "" {
		dir, err := FindBinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	}
	who, err := chooseUser(cfg.User)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: data dir: %w", err)
	}
	cfg.DataDir = abs
	s := &Server{cfg: cfg, done: make(chan struct{})}
	if err := s.prepare(ctx, who); err != nil {
		return nil, err
	}
	if err := s.launch(who); err != nil {
		s.cleanupSocket()
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// prepare creates the directories, runs initdb when needed and picks the port and socket directory.
func (s *Server) prepare(ctx context.Context, who *runAs) error {
	// Parents stay traversable (0755) so an unprivileged server user can reach its own 0700 directory.
	if err := os.MkdirAll(filepath.Dir(s.cfg.DataDir), 0o755); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := os.Mkdir(s.cfg.DataDir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := who.checkReachable(s.cfg.DataDir); err != nil {
		return err
	}
	s.socketDir = filepath.Join(s.cfg.DataDir, "run")
	// A unix socket path is limited to 107 bytes; fall back to a private temp dir for deep data dirs.
	if len(s.socketDir)+len("/.s.PGSQL.65535") > 100 {
		d, err := os.MkdirTemp("", "whpg-")
		if err != nil {
			return fmt.Errorf("pgserver: socket dir: %w", err)
		}
		s.socketDir, s.tmpSocket = d, true
	}
	if err := os.MkdirAll(s.socketDir, 0o700); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := s.initdb(ctx, who); err != nil {
		return err
	}
	if err := who.own(s.cfg.DataDir); err != nil {
		return fmt.Errorf("pgserver: chown data dir: %w", err)
	}
	if s.tmpSocket {
		if err := who.own(s.socketDir); err != nil {
			return fmt.Errorf("pgserver: chown socket dir: %w", err)
		}
	}
	s.port = s.cfg.Port
	if s.port == 0 && s.cfg.TCP {
		p, err := freePort()
		if err != nil {
			return err
		}
		s.port = p
	}
	if s.port == 0 {
		s.port = 5432 // socket only: the port just names the socket file in our private directory
	}
	return nil
}

func (s *Server) pgdata() string { return filepath.Join(s.cfg.DataDir, "data") }

func (s *Server) initdb(ctx context.Context, who *runAs) error {
	if isFile(filepath.Join(s.pgdata(), "PG_VERSION")) {
		return nil
	}
	// initdb builds into a scratch directory that is renamed into place only when complete, so an initdb
	// interrupted half-way (a signal, a full disk) never leaves a cluster that looks initialised.
	scratch := s.pgdata() + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if err := who.own(s.cfg.DataDir); err != nil {
		return fmt.Errorf("pgserver: chown data dir: %w", err)
	}
	s.cfg.Logger.Info("initialising PostgreSQL data directory", "dir", s.pgdata())
	cmd := exec.CommandContext(ctx, filepath.Join(s.cfg.BinDir, "initdb"),
		"-D", scratch, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions")
	cmd.SysProcAttr = who.sysProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Dir = s.cfg.DataDir
	cmd.Env = childEnv(who)
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(scratch)
		return fmt.Errorf("pgserver: initdb failed: %w\n%s", err, bytes.TrimSpace(out))
	}
	_ = os.RemoveAll(s.pgdata()) // an earlier, incomplete attempt
	if err := os.Rename(scratch, s.pgdata()); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return nil
}

func (s *Server) launch(who *runAs) error {
	if err := s.clearStalePID(); err != nil {
		return err
	}
	listen := ""
	if s.cfg.TCP {
		listen = "127.0.0.1"
	}
	args := []string{"-D", s.pgdata(), "-p", strconv.Itoa(s.port), "-k", s.socketDir,
		"-c", "listen_addresses=" + listen, "-c", "unix_socket_permissions=0700"}
	for k, v := range s.cfg.Settings {
		args = append(args, "-c", k+"="+v)
	}
	logPath := filepath.Join(s.cfg.DataDir, "postgres.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgserver: log file: %w", err)
	}
	cmd := exec.Command(filepath.Join(s.cfg.BinDir, "postgres"), args...)
	cmd.SysProcAttr = who.sysProcAttr()
	cmd.Dir = s.cfg.DataDir
	cmd.Env = childEnv(who)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	s.cmd, s.logFile = cmd, f
	go func() {
		s.waitErr = cmd.Wait()
		f.Close()
		close(s.done)
	}()
	s.cfg.Logger.Info("started PostgreSQL", "pid", cmd.Process.Pid, "socket", s.socketDir, "port", s.port, "log", logPath)
	return nil
}

// clearStalePID removes postmaster.pid left by a server that died with its owner; a live one is an error.
func (s *Server) clearStalePID() error {
	pidFile := filepath.Join(s.pgdata(), "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		return fmt.Errorf("pgserver: a PostgreSQL server (pid %d) is already running on %s; stop it first", pid, s.pgdata())
	}
	return nil // postgres itself replaces a stale lock file
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("pgserver: postgres exited during start-up (%v); see %s", s.waitErr,
				filepath.Join(s.cfg.DataDir, "postgres.log"))
		default:
		}
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = ensureDatabase(ctx, conn, s.cfg.Database)
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: postgres did not accept connections in %s: %w", s.cfg.StartTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ensureDatabase(ctx context.Context, conn *pgx.Conn, name string) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// URL is a connection URL for database db (the configured database when empty), over the unix socket.
func (s *Server) URL(db string) string {
	if db == "" {
		db = s.cfg.Database
	}
	q := url.Values{"host": {s.socketDir}, "port": {strconv.Itoa(s.port)}, "user": {"postgres"}, "sslmode": {"disable"}}
	return "postgres:///" + url.PathEscape(db) + "?" + q.Encode()
}

// TCPURL is a loopback TCP URL for database db; empty when Config.TCP is off.
func (s *Server) TCPURL(db string) string {
	if !s.cfg.TCP {
		return ""
	}
	if db == "" {
		db = s.cfg.Database
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, url.PathEscape(db))
}

// Port is the server's port (TCP, or the number naming its socket).
func (s *Server) Port() int { return s.port }

// Stop shuts the server down (fast shutdown) and waits for it. It is safe to call more than once.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.done:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Signal(syscall.SIGQUIT)
				<-s.done
			}
			var exit *exec.ExitError
			if s.waitErr != nil && !errors.As(s.waitErr, &exit) {
				err = fmt.Errorf("pgserver: stop: %w", s.waitErr)
			}
		}
		s.cleanupSocket()
	})
	return err
}

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) cleanupSocket() {
	if s.tmpSocket {
		_ = os.RemoveAll(s.socketDir)
	}
}

func childEnv(who *runAs) []string {
	env := []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C"}
	if who != nil {
		return append(env, "HOME="+who.home, "USER="+who.name)
	}
	if h, err := os.UserHomeDir(); err == nil {
		env = append(env, "HOME="+h)
	}
	return env
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
