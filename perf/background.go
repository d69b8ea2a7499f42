package perf

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// background records PostgreSQL's own work while something is measured: autovacuum workers seen running,
// checkpoints completed, and WAL written. All targets share the machine, so this matters to etcd's numbers too.
type background struct {
	conn   *pgx.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lsn0   string
	ckpt0  int64
	mu     sync.Mutex // guards seen
	seen   []string
}

// Background is what background work overlapped one measurement.
type Background struct {
	// Autovacuum lists the autovacuum runs seen ("database: VACUUM public.history").
	Autovacuum []string `json:",omitempty"`
	// Checkpoints completed during the measurement.
	Checkpoints int64 `json:",omitempty"`
	// WALBytes written by the whole cluster during the measurement.
	WALBytes float64 `json:",omitempty"`
}

const sqlCheckpoints = "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"

// watchBackground starts sampling; nil when there is no PostgreSQL. Stop it with done.
func (r *runner) watchBackground(ctx context.Context) *background {
	if r.pg == nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, r.pg.srv.TCPURL("postgres"))
	if err != nil {
		return nil
	}
	b := &background{conn: conn}
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, ("+sqlCheckpoints+")").Scan(&b.lsn0, &b.ckpt0); err != nil {
		conn.Close(context.Background())
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	b.wg.Go(func() { b.sample(sctx) })
	return b
}

// sample polls pg_stat_activity for autovacuum workers every 200 ms.
func (b *background) sample(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := b.conn.Query(ctx, `SELECT datname || ': ' || regexp_replace(query, '^autovacuum: ', '')
FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND query <> ''`)
		if err != nil {
			return
		}
		runs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return
		}
		b.mu.Lock()
		for _, q := range runs {
			if !slices.Contains(b.seen, q) {
				b.seen = append(b.seen, q)
			}
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// done stops sampling and returns what overlapped the measurement.
func (b *background) done(ctx context.Context) Background {
	if b == nil {
		return Background{}
	}
	b.cancel()
	b.wg.Wait()
	defer b.conn.Close(context.Background())
	var out Background
	var ckpt int64
	err := b.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8, ("+sqlCheckpoints+")",
		b.lsn0).Scan(&out.WALBytes, &ckpt)
	if err == nil {
		out.Checkpoints = ckpt - b.ckpt0
	}
	out.Autovacuum = b.seen
	return out
}

// String is a short table cell.
func (bg Background) String() string {
	var parts []string
	if bg.Checkpoints > 0 {
		parts = append(parts, fmt.Sprintf("%d checkpoint(s) completed", bg.Checkpoints))
	}
	for _, a := range bg.Autovacuum {
		parts = append(parts, "autovacuum "+a)
	}
	switch {
	case len(parts) == 0:
		return "none seen"
	case len(parts) > 3:
		return strings.Join(parts[:3], "; ") + fmt.Sprintf(" and %d more", len(parts)-3)
	}
	return strings.Join(parts, "; ")
}
