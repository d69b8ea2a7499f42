package migrations_test

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

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
		"teams", "clusters", "users", "memberships", "api_tokens"} {
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
