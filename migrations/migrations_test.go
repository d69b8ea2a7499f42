package migrations_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/wheelhouse-dev/wheelhouse/migrations"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestUpOnEmptyDatabase(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if latest < 1 {
		t.Fatalf("Latest() = %d, want at least one migration", latest)
	}
	for i := range 2 { // the second run must be a no-op
		v, err := migrations.Up(t.Context(), db)
		if err != nil {
			t.Fatalf("run %d: Up: %v", i, err)
		}
		if v != latest {
			t.Fatalf("run %d: schema version %d, want %d", i, v, latest)
		}
	}
	for _, table := range []string{"wh_meta", "wh_compact", "objects", "history", "goose_db_version",
		"teams", "clusters", "users", "memberships", "api_tokens", "invitations", "join_tokens", "audit_log",
		"sessions", "node_credentials", "agent_tunnels"} {
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	var rev int64
	if err := db.QueryRowContext(t.Context(), "SELECT rev FROM wh_meta WHERE id = 1").Scan(&rev); err != nil || rev != 0 {
		t.Fatalf("wh_meta.rev = %d, %v; want 0", rev, err)
	}
}

func TestFingerprintStable(t *testing.T) {
	if a, b := migrations.Fingerprint(), migrations.Fingerprint(); a != b || len(a) != 12 {
		t.Fatalf("Fingerprint() = %q then %q", a, b)
	}
}

// TestPlatformDown: the newest migration rolls back cleanly, leaving the tenancy rows it does not own, and
// applies again.
func TestPlatformDown(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	latest, err := migrations.Up(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		fsys[n] = &fstest.MapFile{Data: b}
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO teams (id, name) VALUES ('t', 'T')",
		"INSERT INTO users (email) VALUES ('a@example.com')",
		"INSERT INTO memberships (team_id, user_id, role) SELECT 't', id, 'owner' FROM users",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.ExecContext(ctx, `WITH u AS (INSERT INTO users (email) VALUES ('b@example.com') RETURNING id)
		INSERT INTO memberships (team_id, user_id, role) SELECT 't', id, 'owner' FROM u`)
	if err == nil || !strings.Contains(err.Error(), "memberships_one_owner") {
		t.Errorf("a second owner: %v, want a memberships_one_owner violation", err)
	}
	// Down to just before 00004 (later migrations go first).
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 3 {
		t.Fatalf("version after Down = %d, %v; want 3", v, err)
	}
	for _, rel := range []string{"invitations", "join_tokens", "audit_log", "sessions", "memberships_one_owner"} {
		var exists bool
		if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", rel).Scan(&exists); err != nil || exists {
			t.Errorf("%s still exists after Down (%v)", rel, err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM memberships").Scan(&n); err != nil || n != 1 {
		t.Errorf("memberships after Down: %d, %v", n, err)
	}
	if v, err := migrations.Up(ctx, db); err != nil || v != latest {
		t.Fatalf("Up after Down = %d, %v", v, err)
	}
}
