package tenancy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeClock is a settable clock, at microsecond precision like timestamptz.
type fakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testDB is a fresh migrated database.
type testDB struct {
	url  string
	conn *pgx.Conn // for direct inspection and changes, as another replica would make them
}

func newTestDB(t *testing.T) *testDB {
	t.Helper()
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &testDB{url: url, conn: conn}
}

// open opens a Store on db with clock (nil: the real one); opts adjust the Config.
func (db *testDB) open(t *testing.T, clock *fakeClock, opts ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{URL: db.url}
	for _, o := range opts {
		o(&cfg)
	}
	if clock != nil {
		cfg.Now = clock.Now
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func (db *testDB) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := db.conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (db *testDB) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := db.conn.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// bootstrap runs Bootstrap and fails the test on error.
func bootstrap(t *testing.T, s *Store, cfg BootstrapConfig) BootstrapResult {
	t.Helper()
	res, err := s.Bootstrap(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	return res
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func mustAuth(t *testing.T, s *Store, token string) *Principal {
	t.Helper()
	p, err := s.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	return p
}
