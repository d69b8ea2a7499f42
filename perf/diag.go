package perf

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// cpuMeter accounts the CPU used by the harness, PostgreSQL and the target's server during one repetition.
type cpuMeter struct {
	groups map[string]procGroup
	start  map[string]int64
	t0     time.Time
}

func (r *runner) newCPUMeter(sys *system) *cpuMeter {
	g := map[string]procGroup{"harness": {pid: os.Getpid()}}
	if r.pg != nil {
		g["postgres"] = r.pg.procs()
	}
	if sys.serverPID != 0 {
		g[sys.name] = procGroup{pid: sys.serverPID}
	}
	m := &cpuMeter{groups: g, start: map[string]int64{}, t0: time.Now()}
	for name, grp := range g {
		m.start[name] = grp.ticks()
	}
	return m
}

// cores returns each component's average CPU use, in cores, since the meter started.
func (m *cpuMeter) cores() map[string]float64 {
	secs := time.Since(m.t0).Seconds()
	out := map[string]float64{}
	for name, grp := range m.groups {
		out[name] = float64(grp.ticks()-m.start[name]) / clockTick / secs
	}
	return out
}

// Diagnosis is what PostgreSQL was doing during one unmeasured extra run of a throughput point.
type Diagnosis struct {
	Target      string
	Op          string
	Concurrency int
	Rate        float64
	Ops         int
	Elapsed     time.Duration
	// Statements are the target database's top statements by total execution time.
	Statements []Statement
	// Waits is the share of samples of the target's busy backends in each state ("CPU" = active, not waiting).
	Waits   []Share
	Samples int
	// Busy is the mean number of the target's backends active or idle in a transaction per sample.
	Busy float64
	// WALPerOp is the WAL written per successful operation, in bytes.
	WALPerOp float64
	// Commits is the number of COMMIT statements (the wheelhouse store commits each batch explicitly).
	Commits int64
}

// Statement is one pg_stat_statements row.
type Statement struct {
	Query         string
	Calls         int64
	MeanMS, Total float64 // Total in ms
	Rows          int64
}

// Share is a fraction of samples.
type Share struct {
	What  string
	Share float64
}

// diagnose runs one extra repetition of l with PostgreSQL statistics on.
func (r *runner) diagnose(ctx context.Context, sys *system, l writeLoad) (Diagnosis, error) {
	d := Diagnosis{Target: sys.name, Op: l.op, Concurrency: l.concurrency}
	conn, err := pgx.Connect(ctx, r.pg.srv.TCPURL("postgres"))
	if err != nil {
		return d, fmt.Errorf("diagnostics connection: %w", err)
	}
	defer conn.Close(context.Background())
	var lsn0 string
	if err := conn.QueryRow(ctx, "SELECT pg_stat_statements_reset()::text, pg_current_wal_lsn()::text").Scan(new(string), &lsn0); err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	sampleCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var samples waitSamples
	wg.Go(func() { samples = sampleWaits(sampleCtx, r.pg.srv.TCPURL("postgres"), sys.database) })
	rep := l.run(ctx)
	stop()
	wg.Wait()
	d.Rate, d.Ops, d.Elapsed = rep.Rate(), rep.OK, rep.Elapsed
	d.Waits, d.Samples, d.Busy = samples.shares(), samples.n, samples.meanBusy()
	var wal float64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", lsn0).Scan(&wal); err != nil {
		return d, fmt.Errorf("diagnostics: %w", err)
	}
	if rep.OK > 0 {
		d.WALPerOp = wal / float64(rep.OK)
	}
	d.Statements, d.Commits, err = topStatements(ctx, conn, sys.database)
	return d, err
}

func topStatements(ctx context.Context, conn *pgx.Conn, db string) ([]Statement, int64, error) {
	rows, err := conn.Query(ctx, `
SELECT s.calls, s.total_exec_time, s.mean_exec_time, s.rows, s.query
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = $1 ORDER BY s.total_exec_time DESC`, db)
	if err != nil {
		return nil, 0, fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer rows.Close()
	var out []Statement
	var commits int64
	for rows.Next() {
		var s Statement
		if err := rows.Scan(&s.Calls, &s.Total, &s.MeanMS, &s.Rows, &s.Query); err != nil {
			return nil, 0, err
		}
		s.Query = shortQuery(s.Query)
		if strings.EqualFold(s.Query, "commit") {
			commits += s.Calls
		}
		if len(out) < 6 {
			out = append(out, s)
		}
	}
	return out, commits, rows.Err()
}

// shortQuery squeezes whitespace and truncates, for a table cell.
func shortQuery(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	q = strings.ReplaceAll(q, "|", `\|`)
	if len(q) > 110 {
		q = q[:107] + "..."
	}
	return q
}

// waitSamples counts what the target's backends were doing, sampled every 10 ms from pg_stat_activity.
type waitSamples struct {
	n      int
	busy   int
	counts map[string]int
}

func sampleWaits(ctx context.Context, url, db string) waitSamples {
	s := waitSamples{counts: map[string]int{}}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return s
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return s
		case <-tick.C:
		}
		rows, err := conn.Query(ctx, `
SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU') ELSE state END
FROM pg_stat_activity WHERE datname = $1 AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()`, db)
		if err != nil {
			return s
		}
		whats, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return s
		}
		s.n++
		for _, w := range whats {
			s.counts[w]++
			s.busy++
		}
	}
}

func (s waitSamples) shares() []Share {
	var out []Share
	for what, c := range s.counts {
		out = append(out, Share{What: what, Share: float64(c) / float64(max(s.busy, 1))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Share > out[j].Share })
	return out
}

func (s waitSamples) meanBusy() float64 { return float64(s.busy) / float64(max(s.n, 1)) }
