package store

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestReadsCannotStarveWritesOrWatches: with every read connection taken (reads piling up under load), writes
// still commit and watchers still get their events, because the writers and the watch hub have connections of
// their own.
func TestReadsCannotStarveWritesOrWatches(t *testing.T) {
	s := openURL(t, pgtest.NewDatabase(t), func(c *Config) { c.MaxConns = 2 })
	ctx := t.Context()
	w, err := s.Watch(ctx, WatchOptions{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var held []*pgxpool.Conn
	for range s.cfg.MaxConns {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	if got := s.pool.Stat().IdleConns(); got != 0 {
		t.Fatalf("%d idle read connections, want every one held", got)
	}
	o, err := s.Create(ctx, key("c1", "ns", "a"), []byte("x"))
	if err != nil {
		t.Fatalf("a write with every read connection busy: %v", err)
	}
	select {
	case ev := <-w.Events():
		if ev.Object.Revision != o.Revision || ev.Object.Key.Name != "a" {
			t.Fatalf("event %+v, want the create at %d", ev, o.Revision)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event with every read connection busy")
	}
}

// TestReadsSurviveDeadConnections: after the read pool's connections die (PostgreSQL restarted them away), the
// next reads succeed on fresh ones rather than failing once per dead connection.
func TestReadsSurviveDeadConnections(t *testing.T) {
	s := openURL(t, pgtest.NewDatabase(t), func(c *Config) { c.MaxConns = 2 })
	ctx := t.Context()
	k := key("c1", "ns", "a")
	if _, err := s.Create(ctx, k, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Two connections idle in the read pool (used just now, so handed out again without a ping).
	var held []*pgxpool.Conn
	for range 2 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	if _, err := s.sys.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'wheelhouse' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := s.Get(ctx, k); err != nil {
			t.Fatalf("get %d after the read connections died: %v", i, err)
		}
		if _, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: k.Resource}); err != nil {
			t.Fatalf("list %d after the read connections died: %v", i, err)
		}
	}
}
