package perf

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for migrations

	"github.com/wheelhouse-dev/wheelhouse/migrations"
	"github.com/wheelhouse-dev/wheelhouse/store/pgserver"
)

// pgSettings are the only settings the harness changes from PostgreSQL's defaults. None touches durability
// (fsync, synchronous_commit, full_page_writes stay on): they make room for kine's unbounded pool and turn on
// the statistics the diagnostics read.
var pgSettings = map[string]string{
	"max_connections":          "300",
	"shared_preload_libraries": "pg_stat_statements",
	"pg_stat_statements.track": "top",
	"track_wal_io_timing":      "on",
}

// postgres is the private PostgreSQL server shared by the Wheelhouse store and kine, in separate databases.
type postgres struct {
	srv     *pgserver.Server
	dataDir string
	admin   *pgx.Conn // to the postgres database, for diagnostics
	version string
}

// Database names.
const (
	dbWheelhouse = "wheelhouse"
	dbKine       = "kine"
)

func startPostgres(ctx context.Context, dir string, extra map[string]string, log *slog.Logger) (*postgres, error) {
	settings := map[string]string{}
	for k, v := range pgSettings {
		settings[k] = v
	}
	for k, v := range extra {
		settings[k] = v
	}
	srv, err := pgserver.Start(ctx, pgserver.Config{
		DataDir: dir, TCP: true, Database: dbWheelhouse, Settings: settings, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pg := &postgres{srv: srv, dataDir: dir}
	if err := pg.prepare(ctx); err != nil {
		pg.Stop()
		return nil, err
	}
	return pg, nil
}

// prepare applies the store's migrations, creates kine's database and the statistics extension.
func (pg *postgres) prepare(ctx context.Context) error {
	db, err := sql.Open("pgx", pg.srv.TCPURL(dbWheelhouse))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	admin, err := pgx.Connect(ctx, pg.srv.TCPURL("postgres"))
	if err != nil {
		return fmt.Errorf("postgres: admin connection: %w", err)
	}
	pg.admin = admin
	for _, q := range []string{
		"CREATE DATABASE " + dbKine,
		"CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	return admin.QueryRow(ctx, "SHOW server_version").Scan(&pg.version)
}

// postmasterPID reads the server's pid from its lock file.
func (pg *postgres) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(pg.dataDir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// procs is the postmaster and its backends.
func (pg *postgres) procs() procGroup { return procGroup{pid: pg.postmasterPID(), children: true} }

// kineEndpoint is kine's --endpoint for its database on this server.
func (pg *postgres) kineEndpoint() string { return pg.srv.TCPURL(dbKine) }

func (pg *postgres) Stop() {
	if pg.admin != nil {
		pg.admin.Close(context.Background())
	}
	_ = pg.srv.Stop()
}

// vacuumAnalyze refreshes db's planner statistics and visibility map, as pgbench does after loading, so that
// the measurements see plans for the tables' real sizes rather than for the empty tables of a minute ago.
func (pg *postgres) vacuumAnalyze(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, pg.srv.TCPURL(db))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("postgres: VACUUM ANALYZE %s: %w", db, err)
	}
	return nil
}
