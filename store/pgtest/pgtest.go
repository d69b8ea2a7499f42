// Package pgtest gives each test its own PostgreSQL database with the schema applied.
//
// Databases are cloned from a template (CREATE DATABASE ... TEMPLATE), built once per schema fingerprint under
// an advisory lock, so packages can run in parallel against one server. The server is
// WHEELHOUSE_TEST_DATABASE_URL (set by `make test`); when it is unset, Main starts a private throwaway server
// for the test binary with pgserver and removes it afterwards, so plain `go test` works too.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for migrations

	"github.com/wheelhouse-dev/wheelhouse/migrations"
	"github.com/wheelhouse-dev/wheelhouse/store/pgserver"
)

// EnvURL names the environment variable holding an admin URL of the test server.
const EnvURL = "WHEELHOUSE_TEST_DATABASE_URL"

// TestSettings make a throwaway server fast; durability does not matter for it.
var TestSettings = map[string]string{
	"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "400",
}

// Main runs the tests of a package, first starting a private server when EnvURL is unset.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(EnvURL) != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "wheelhouse-pgtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := pgserver.Start(context.Background(), pgserver.Config{
		DataDir: dir, TCP: true, Settings: TestSettings, Database: "postgres",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: no", EnvURL, "and could not start a private PostgreSQL:", err)
		return 1
	}
	defer srv.Stop()
	os.Setenv(EnvURL, srv.TCPURL("postgres"))
	return m.Run()
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// NewDatabase creates a fresh database with every migration applied and returns its URL; it is dropped when
// the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("pgtest: template database: %v", templateErr)
	}
	return createDatabase(t, admin, "TEMPLATE "+templateName)
}

// NewEmptyDatabase creates a database with no schema at all (for migration tests) and returns its URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return createDatabase(t, adminURL(t), "")
}

// AdminURL is the URL of the test server's maintenance database.
func AdminURL(t testing.TB) string {
	t.Helper()
	return adminURL(t)
}

func adminURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		t.Fatalf("pgtest: %s is not set: run `make test`, or call pgtest.Main from TestMain", EnvURL)
	}
	return admin
}

func createDatabase(t testing.TB, admin, clause string) string {
	t.Helper()
	name := "wh_test_" + randHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", EnvURL, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+clause); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(admin, name) })
	return WithDatabase(admin, name)
}

// WithDatabase returns u with its database replaced by db.
func WithDatabase(u, db string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + db
	parsed.RawPath = ""
	return parsed.String()
}

func dropDatabase(admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// ensureTemplate builds the template database for the current migrations once per server.
func ensureTemplate(admin string) (string, error) {
	name := "wh_template_" + migrations.Fingerprint()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(727274)")
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	build := name + "_build"
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+build+" WITH (FORCE)")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+build); err != nil {
		return "", err
	}
	if err := migrate(ctx, WithDatabase(admin, build)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+build+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

func migrate(ctx context.Context, dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = migrations.Up(ctx, db)
	return err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
