package tenancy

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAudit(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	at := clock.Now().Add(-time.Minute)
	in := []AuditEvent{
		{At: at, TeamID: "acme", ClusterID: "prod", Actor: "alice@example.com", ActorID: "u1", Action: "POST /teams",
			Resource: "/teams/acme", Result: "201", Source: "192.0.2.1", UserAgent: "curl/8",
			Detail: map[string]any{"role": "admin", "count": 2, "nested": map[string]any{"ok": true}}},
		{TeamID: "acme", Action: "login", Result: "401"}, // At zero: now
	}
	if err := s.Audit(ctx, in...); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(ctx); err != nil {
		t.Errorf("an empty batch: %v", err)
	}
	got, err := s.AuditLog(ctx, AuditQuery{TeamID: "acme"})
	if err != nil || len(got) != 2 {
		t.Fatalf("AuditLog = %+v, %v", got, err)
	}
	want := []AuditEvent{in[1], in[0]}
	want[0].At = clock.Now()
	want[1].Detail = map[string]any{"role": "admin", "count": 2.0, "nested": map[string]any{"ok": true}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(AuditEvent{}, "ID"), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("AuditLog (-want +got):\n%s", diff)
	}
	if got[0].ID <= got[1].ID {
		t.Errorf("ids %d, %d: not newest first", got[0].ID, got[1].ID)
	}
	var nulls int
	if err := db.conn.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE cluster_id IS NULL AND detail IS NULL").Scan(&nulls); err != nil || nulls != 1 {
		t.Errorf("%d records with NULL cluster and detail, want 1 (%v)", nulls, err)
	}

	// What the database cannot store is made storable; text is cut at 1024 bytes, on a character boundary.
	long := strings.Repeat("é", 600) // 1200 bytes
	if err := s.Audit(ctx, AuditEvent{TeamID: "odd", Action: "a\x00b", UserAgent: long, Actor: "bad \xff utf-8",
		Detail: map[string]any{"nul": "x\x00y", "backslash": `\u0000`, "bad": "\xfe"}}); err != nil {
		t.Fatal(err)
	}
	odd, err := s.AuditLog(ctx, AuditQuery{TeamID: "odd"})
	if err != nil || len(odd) != 1 {
		t.Fatalf("AuditLog(odd) = %+v, %v", odd, err)
	}
	e := odd[0]
	if e.Action != "ab" || e.UserAgent != long[:1024] || e.Actor != "bad \uFFFD utf-8" ||
		e.Detail["nul"] != "x\uFFFDy" || e.Detail["backslash"] != `\u0000` || e.Detail["bad"] != "\uFFFD" {
		t.Errorf("sanitized record: %+v", e)
	}

	before := db.count(t, "audit_log")
	for _, tc := range []struct {
		name string
		ev   AuditEvent
	}{
		{"no action", AuditEvent{TeamID: "acme"}},
		{"only NUL action", AuditEvent{Action: "\x00"}},
		{"unencodable detail", AuditEvent{Action: "x", Detail: map[string]any{"ch": make(chan int)}}},
		{"NaN detail", AuditEvent{Action: "x", Detail: map[string]any{"n": math.NaN()}}},
		{"huge detail", AuditEvent{Action: "x", Detail: map[string]any{"big": strings.Repeat("x", maxAuditDetail)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, s.Audit(ctx, AuditEvent{TeamID: "acme", Action: "fine"}, tc.ev), ErrInvalid)
		})
	}
	if n := db.count(t, "audit_log"); n != before+5 {
		t.Errorf("batches of one valid and one refused event wrote %d records, want the 5 valid ones", n-before)
	}
	s.Close()
	wantErr(t, s.Audit(ctx, AuditEvent{Action: "x"}), ErrClosed)
}

func TestReplaceNULEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`"a\u0000b"`:       `"a\ufffdb"`,
		`"\\u0000"`:        `"\\u0000"`,
		`"\\\u0000"`:       `"\\\ufffd"`,
		`{"\u0000":"\n"}`:  `{"\ufffd":"\n"}`,
		`"\u00001"`:        `"\ufffd1"`,
		`"\u0001\u0000"`:   `"\u0001\ufffd"`,
		`"no escapes"`:     `"no escapes"`,
		`"trailing \u000"`: `"trailing \u000"`,
		`"\\\\\\\\\u0000"`: `"\\\\\\\\\ufffd"`,
	} {
		if got := string(replaceNULEscapes([]byte(in))); got != want {
			t.Errorf("replaceNULEscapes(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAuditLog(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	t0 := clock.Now()
	var events []AuditEvent
	for i := range 1100 {
		events = append(events, AuditEvent{
			At:        t0.Add(time.Duration(i) * time.Second),
			TeamID:    "acme",
			ClusterID: []string{"", "prod", "dev"}[i%3],
			Actor:     fmt.Sprintf("user%d@example.com", i%4),
			ActorID:   fmt.Sprintf("id%d", i%4),
			Action:    []string{"create", "delete"}[i%2],
			Detail:    map[string]any{"i": i},
		})
	}
	events = append(events, AuditEvent{TeamID: "other", Action: "create", Actor: "user0@example.com"})
	if err := s.Audit(ctx, events...); err != nil {
		t.Fatal(err)
	}
	index := func(e AuditEvent) int { return int(e.Detail["i"].(float64)) }
	check := func(name string, q AuditQuery, want func(i int) bool, limit int) []AuditEvent {
		t.Helper()
		got, err := s.AuditLog(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var wantIdx []int
		for i := len(events) - 2; i >= 0 && len(wantIdx) < limit; i-- { // newest first
			if want(i) {
				wantIdx = append(wantIdx, i)
			}
		}
		var gotIdx []int
		for _, e := range got {
			if e.TeamID != "acme" {
				t.Fatalf("%s: a record of team %q", name, e.TeamID)
			}
			gotIdx = append(gotIdx, index(e))
		}
		if diff := cmp.Diff(wantIdx, gotIdx); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		return got
	}
	all := func(int) bool { return true }
	check("default limit", AuditQuery{TeamID: "acme"}, all, DefaultAuditLimit)
	check("limit 7", AuditQuery{TeamID: "acme", Limit: 7}, all, 7)
	check("limit clamped", AuditQuery{TeamID: "acme", Limit: 5000}, all, MaxAuditLimit)
	check("cluster", AuditQuery{TeamID: "acme", ClusterID: "prod", Limit: 1000}, func(i int) bool { return i%3 == 1 }, 1000)
	check("actor by email", AuditQuery{TeamID: "acme", Actor: "user1@example.com", Limit: 1000}, func(i int) bool { return i%4 == 1 }, 1000)
	check("actor by id", AuditQuery{TeamID: "acme", Actor: "id2", Limit: 1000}, func(i int) bool { return i%4 == 2 }, 1000)
	check("action", AuditQuery{TeamID: "acme", Action: "delete", Limit: 1000}, func(i int) bool { return i%2 == 1 }, 1000)
	check("since and until", AuditQuery{TeamID: "acme", Since: t0.Add(10 * time.Second), Until: t0.Add(20 * time.Second)},
		func(i int) bool { return i >= 10 && i < 20 }, 1000)
	check("everything at once", AuditQuery{TeamID: "acme", ClusterID: "dev", Actor: "id1", Action: "delete",
		Since: t0.Add(100 * time.Second), Until: t0.Add(700 * time.Second), Limit: 1000},
		func(i int) bool { return i%3 == 2 && i%4 == 1 && i%2 == 1 && i >= 100 && i < 700 }, 1000)
	if got, err := s.AuditLog(ctx, AuditQuery{TeamID: "nobody"}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("a team without records: %v, %v", got, err)
	}

	// Paging with Before visits every record once, newest first.
	var seen []int
	q := AuditQuery{TeamID: "acme", Action: "create", Limit: 150}
	for pages := 0; ; pages++ {
		page, err := s.AuditLog(ctx, q)
		if err != nil || pages > 10 {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			seen = append(seen, index(e))
		}
		q.Before = page[len(page)-1].ID
	}
	if len(seen) != 550 || seen[0] != 1098 || seen[549] != 0 {
		t.Errorf("paged through %d records (%d ... %d), want 550 (1098 ... 0)", len(seen), seen[0], seen[len(seen)-1])
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]-2 {
			t.Fatalf("paging: %d after %d", seen[i], seen[i-1])
		}
	}

	for _, tc := range []struct {
		name string
		q    AuditQuery
	}{
		{"no team", AuditQuery{}},
		{"bad team", AuditQuery{TeamID: "Acme"}},
		{"negative limit", AuditQuery{TeamID: "acme", Limit: -1}},
		{"negative cursor", AuditQuery{TeamID: "acme", Before: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AuditLog(ctx, tc.q)
			wantErr(t, err, ErrInvalid)
		})
	}
}

func TestPruneAudit(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	t0 := clock.Now()
	old := make([]AuditEvent, pruneBatch+5) // more than one batch
	for i := range old {
		old[i] = AuditEvent{At: t0.Add(-time.Hour - time.Duration(i)*time.Millisecond), Action: "old"}
	}
	if err := s.Audit(ctx, old...); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(ctx, AuditEvent{At: t0, TeamID: "acme", Action: "edge"},
		AuditEvent{At: t0.Add(time.Second), TeamID: "acme", Action: "new"}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneAudit(ctx, t0)
	if err != nil || n != int64(len(old)) {
		t.Fatalf("PruneAudit = %d, %v; want %d", n, err, len(old))
	}
	left, err := s.AuditLog(ctx, AuditQuery{TeamID: "acme"})
	if err != nil || len(left) != 2 {
		t.Errorf("after pruning: %+v, %v", left, err)
	}
	if n, err := s.PruneAudit(ctx, t0); err != nil || n != 0 {
		t.Errorf("pruning again = %d, %v", n, err)
	}
	s.Close()
	_, err = s.PruneAudit(ctx, t0)
	wantErr(t, err, ErrClosed)
}

func TestAuditWriterBatchesAndFlushesOnClose(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	bootstrap(t, s, BootstrapConfig{})
	w := s.NewAuditWriter(AuditWriterConfig{BatchSize: 100, FlushInterval: time.Hour})
	for i := range 1234 {
		w.Record(AuditEvent{TeamID: DefaultTeam, Actor: "a", Action: "create", Resource: fmt.Sprint("/r/", i), Result: "201"})
	}
	w.Close()
	if w.Dropped() != 0 {
		t.Fatalf("dropped %d", w.Dropped())
	}
	if n := db.count(t, "audit_log"); n != 1234 {
		t.Fatalf("%d audit rows, want 1234", n)
	}
	// A full queue drops (and counts) instead of blocking the caller. The writer is not started, so the queue
	// stays full.
	full := newAuditWriter(s, AuditWriterConfig{QueueSize: 1})
	for range 10 {
		full.Record(AuditEvent{TeamID: DefaultTeam, Actor: "a", Action: "x"})
	}
	if full.Dropped() != 9 {
		t.Fatalf("dropped %d, want 9", full.Dropped())
	}
}
