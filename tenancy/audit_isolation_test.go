package tenancy

import (
	"bytes"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A bad event never costs another: Audit writes every valid event of a batch and refuses only the bad ones
// (issue 34: one refused request's event without an action erased every tenant's records of its batch).
func TestAuditBadEventCostsNoOther(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	bad := []AuditEvent{
		{TeamID: "attacker", Resource: "no action"},
		{TeamID: "attacker", Action: "\x00"},
		{TeamID: "attacker", Action: "x", Detail: map[string]any{"ch": make(chan int)}},
		{TeamID: "attacker", Action: "x", Detail: map[string]any{"n": math.NaN()}},
		{TeamID: "attacker", Action: "x", Detail: map[string]any{"big": strings.Repeat("x", maxAuditDetail)}},
		{TeamID: "attacker", Action: "x", At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	var batch []AuditEvent
	for i, b := range bad {
		batch = append(batch, AuditEvent{TeamID: "acme", Action: "create", Resource: "/before/" + string(rune('a'+i))}, b,
			AuditEvent{TeamID: "globex", Action: "create", Resource: "/after/" + string(rune('a'+i))})
	}
	err := s.Audit(ctx, batch...)
	wantErr(t, err, ErrInvalid)
	for i := range bad {
		if !strings.Contains(err.Error(), "audit event "+strconv.Itoa(3*i+1)+" ") {
			t.Errorf("the error does not name bad event %d: %v", 3*i+1, err)
		}
	}
	for _, team := range []string{"acme", "globex"} {
		got, err := s.AuditLog(ctx, AuditQuery{TeamID: team})
		if err != nil || len(got) != len(bad) {
			t.Errorf("team %s has %d records (%v), want %d", team, len(got), err, len(bad))
		}
	}
	if got, err := s.AuditLog(ctx, AuditQuery{TeamID: "attacker"}); err != nil || len(got) != 0 {
		t.Errorf("bad events were written: %+v, %v", got, err)
	}
}

// The background writer logs a bad event it is handed, with what identifies it, and writes the rest of its
// batch.
func TestAuditWriterBadEventCostsNoOther(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	var logs syncBuffer
	w := newAuditWriter(s, AuditWriterConfig{QueueSize: 100, BatchSize: 100, FlushInterval: time.Hour})
	w.log = slog.New(slog.NewTextHandler(&logs, nil))
	go w.run()
	for i := range 30 {
		w.Record(AuditEvent{TeamID: "acme", Action: "create", Resource: "/r/" + strconv.Itoa(i)})
		if i%10 == 0 {
			w.Record(AuditEvent{TeamID: "attacker", Resource: "/refused/" + strconv.Itoa(i), Source: "192.0.2.9"})
		}
	}
	w.Close()
	if got, err := s.AuditLog(t.Context(), AuditQuery{TeamID: "acme"}); err != nil || len(got) != 30 {
		t.Fatalf("team acme has %d records (%v), want 30", len(got), err)
	}
	out := logs.String()
	if strings.Contains(out, "they are lost") || strings.Count(out, "dropping an invalid audit event") != 3 ||
		!strings.Contains(out, "/refused/20") || !strings.Contains(out, "192.0.2.9") {
		t.Errorf("log:\n%s\nwant one line per invalid event, naming it, and no lost batch", out)
	}
}

// An event the database refuses for a reason Audit does not check (a trigger here, standing for any constraint
// not foreseen) costs only itself: the writer writes its batch again one event at a time.
func TestAuditWriterDatabaseRefusalCostsNoOther(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	db.exec(t, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.resource = '/poison' THEN RAISE EXCEPTION 'poison'; END IF; RETURN NEW; END $$`)
	db.exec(t, `CREATE TRIGGER refuse_poison BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)
	var logs syncBuffer
	w := newAuditWriter(s, AuditWriterConfig{QueueSize: 100, BatchSize: 100, FlushInterval: time.Hour})
	w.log = slog.New(slog.NewTextHandler(&logs, nil))
	go w.run()
	for i := range 20 {
		w.Record(AuditEvent{TeamID: "acme", Action: "create", Resource: "/r/" + strconv.Itoa(i)})
		if i == 10 {
			w.Record(AuditEvent{TeamID: "attacker", Action: "create", Resource: "/poison"})
		}
	}
	w.Close()
	if got, err := s.AuditLog(t.Context(), AuditQuery{TeamID: "acme"}); err != nil || len(got) != 20 {
		t.Fatalf("team acme has %d records (%v), want 20", len(got), err)
	}
	if out := logs.String(); strings.Count(out, "they are lost") != 1 || !strings.Contains(out, "events=1 ") {
		t.Errorf("log:\n%s\nwant one lost event", out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a logger's destination).
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
