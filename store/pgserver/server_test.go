package pgserver

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	if err != nil {
		t.Fatalf("FindBinDir: %v (make test installs PostgreSQL first)", err)
	}
	for _, b := range []string{"initdb", "postgres"} {
		if !isFile(filepath.Join(dir, b)) {
			t.Fatalf("%s missing in %s", b, dir)
		}
	}
	// With nothing on PATH and no /usr/lib/postgresql, the message says what to install.
	if !strings.Contains(ErrNoBinaries.Error(), "apt-get install -y postgresql") {
		t.Fatalf("ErrNoBinaries does not say what to install: %v", ErrNoBinaries)
	}
}

func TestVersionOrder(t *testing.T) {
	if versionOf("/usr/lib/postgresql/16/bin") <= versionOf("/usr/lib/postgresql/9.6/bin") {
		t.Fatal("16 should sort above 9.6")
	}
}

// Start initialises a cluster, serves the configured database over the private socket, stops cleanly, and a
// second Start reuses the data directory (data survives).
func TestStartStopRestart(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "nested", "pg") // pgserver creates the parents
	ctx := t.Context()
	cfg := Config{DataDir: dir, Database: "wh", Logger: slog.New(slog.DiscardHandler)}
	srv := start(t, cfg)
	execSQL(t, srv, "CREATE TABLE survives (x int); INSERT INTO survives VALUES (42)")
	if srv.TCPURL("") != "" {
		t.Fatal("TCP URL without TCP")
	}
	st, err := os.Stat(srv.socketDir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir %s: mode %v, %v; want 0700", srv.socketDir, st.Mode().Perm(), err)
	}
	if os.Geteuid() == 0 { // PostgreSQL must not run as root
		pid := postmasterPID(t, dir)
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if strings.Contains(string(b), "\nUid:\t0\t") {
			t.Fatalf("postgres (pid %d) runs as root", pid)
		}
	}
	pid := postmasterPID(t, dir)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("postmaster %d still alive after Stop", pid)
	}

	srv = start(t, cfg)
	var x int
	conn, err := pgx.Connect(ctx, srv.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT x FROM survives").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: %d, %v", x, err)
	}
}

func TestTCP(t *testing.T) {
	srv := start(t, Config{DataDir: reachableDir(t), TCP: true, Settings: map[string]string{"fsync": "off"},
		Logger: slog.New(slog.DiscardHandler)})
	conn, err := pgx.Connect(t.Context(), srv.TCPURL("wheelhouse"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var fsync string
	if err := conn.QueryRow(t.Context(), "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Fatalf("fsync = %q, %v; settings not applied", fsync, err)
	}
}

func TestValidateAndErrors(t *testing.T) {
	if err := (&Config{}).Validate(); err == nil {
		t.Fatal("empty DataDir accepted")
	}
	if err := (&Config{DataDir: "x", Port: 70000}).Validate(); err == nil {
		t.Fatal("port 70000 accepted")
	}
	_, err := Start(t.Context(), Config{DataDir: reachableDir(t), BinDir: reachableDir(t), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "initdb") {
		t.Fatalf("Start with an empty BinDir: %v", err)
	}
}

// As root, a data directory the unprivileged user cannot reach is refused with a clear message.
func TestUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root hands PostgreSQL to another user")
	}
	parent := filepath.Join(t.TempDir(), "private") // t.TempDir's parent is 0700 and root-owned
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), Config{DataDir: filepath.Join(parent, "pg"), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "cannot enter") {
		t.Fatalf("err = %v, want a 'cannot enter' explanation", err)
	}
}

func TestLiveServerOnDataDirIsRefused(t *testing.T) {
	dir := reachableDir(t)
	cfg := Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	start(t, cfg)
	_, err := Start(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start on a live data dir: %v", err)
	}
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

func execSQL(t *testing.T, srv *Server, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), srv.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(errors.New("bad postmaster.pid"))
	}
	return pid
}

// reachableDir is a temporary directory whose ancestors the unprivileged PostgreSQL user can traverse
// (t.TempDir nests inside a 0700 directory).
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An initdb that is interrupted leaves nothing that a later Start mistakes for a cluster.
func TestInterruptedInitdbIsRedone(t *testing.T) {
	dir := reachableDir(t)
	cfg := Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for !isFile(filepath.Join(dir, "data.initdb", "PG_VERSION")) {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel() // initdb is half-way: PG_VERSION is written, the rest is not
	}()
	if srv, err := Start(ctx, cfg); err == nil {
		srv.Stop() // initdb beat the cancel; the test proves less, but Start must still be sound
	}
	cancel()
	srv := start(t, cfg)
	execSQL(t, srv, "SELECT 1")
}
