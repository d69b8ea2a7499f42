// Package migrations holds Wheelhouse's numbered SQL schema migrations, embedded in the binary, and applies
// them with goose. Each migration runs in its own transaction and goose records the schema version in
// goose_db_version; a PostgreSQL session advisory lock keeps replicas that start together from racing.
//
// Migrations are never edited once released; a change is a new numbered file.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration to db and returns the resulting schema version.
func Up(ctx context.Context, db *sql.DB) (int64, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrations: locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrations: up: %w", err)
	}
	// Fresh tables have no statistics, and the planner then picks sequential scans for the store's
	// "history WHERE rev > $1 ORDER BY rev" polls until autovacuum analyzes them (measured: 5-10 ms per poll
	// instead of 0.02 ms). Analyze once at start; it is cheap on small tables and autovacuum takes over.
	if _, err := db.ExecContext(ctx, "ANALYZE wh_meta, wh_compact, objects, history"); err != nil {
		return 0, fmt.Errorf("migrations: analyze: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

// Latest is the highest version among the embedded migrations.
func Latest() (int64, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	var latest int64
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return 0, fmt.Errorf("migrations: %s: %w", n, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// Fingerprint identifies the exact set of embedded migrations (a short SHA-256 over names and contents), so
// caches such as test template databases can tell when the schema changed.
func Fingerprint() string {
	names, _ := fs.Glob(files, "*.sql")
	h := sha256.New()
	for _, n := range names {
		b, _ := files.ReadFile(n)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
