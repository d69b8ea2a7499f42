package tenancy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// AuditWriter writes audit events in the background, in batches, so that recording a request never waits for
// the database: Record queues (it never blocks) and a writer inserts what is queued every FlushInterval or as
// soon as BatchSize events wait. Events are checked one by one: an invalid event is logged and dropped alone,
// never with the rest of its batch. When the queue is full (the database is down or far behind) events are
// dropped and counted, and the drop is logged: audit must not stop the API.
type AuditWriter struct {
	s       *Store
	log     *slog.Logger
	queue   chan AuditEvent
	batch   int
	every   time.Duration
	dropped atomic.Int64
	done    chan struct{}
	closeMu sync.Once
	stop    chan struct{}
}

// AuditWriterConfig configures an AuditWriter. Zero values take the defaults noted.
type AuditWriterConfig struct {
	QueueSize     int           // default 100,000 events
	BatchSize     int           // default 500
	FlushInterval time.Duration // default 200 ms
}

// NewAuditWriter starts a writer; Close flushes and stops it.
func (s *Store) NewAuditWriter(cfg AuditWriterConfig) *AuditWriter {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 100_000
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 200 * time.Millisecond
	}
	w := newAuditWriter(s, cfg)
	go w.run()
	return w
}

func newAuditWriter(s *Store, cfg AuditWriterConfig) *AuditWriter {
	return &AuditWriter{s: s, log: s.log, queue: make(chan AuditEvent, cfg.QueueSize), batch: cfg.BatchSize,
		every: cfg.FlushInterval, done: make(chan struct{}), stop: make(chan struct{})}
}

// Record queues ev (At zero: now); it never blocks.
func (w *AuditWriter) Record(ev AuditEvent) {
	if ev.At.IsZero() {
		ev.At = w.s.now()
	}
	select {
	case w.queue <- ev:
	default:
		if w.dropped.Add(1)%1000 == 1 {
			w.log.Error("audit queue full; dropping audit events", "dropped", w.dropped.Load())
		}
	}
}

// Dropped is how many events were dropped because the queue was full.
func (w *AuditWriter) Dropped() int64 { return w.dropped.Load() }

// Close writes what is queued (for up to 10 s) and stops the writer.
func (w *AuditWriter) Close() {
	w.closeMu.Do(func() { close(w.stop) })
	<-w.done
}

func (w *AuditWriter) run() {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	var buf []AuditEvent
	flush := func(ctx context.Context) {
		for len(buf) > 0 {
			n := min(len(buf), w.batch)
			w.write(ctx, buf[:n])
			buf = buf[n:]
		}
		buf = nil
	}
	for {
		select {
		case ev := <-w.queue:
			buf = append(buf, ev)
			if len(buf) >= w.batch {
				flush(context.Background())
			}
		case <-t.C:
			flush(context.Background())
		case <-w.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for drained := false; !drained; {
				select {
				case ev := <-w.queue:
					buf = append(buf, ev)
				default:
					drained = true
				}
			}
			flush(ctx)
			cancel()
			return
		}
	}
}

// write writes one batch. A bad event costs no other: an invalid event is logged (with what identifies it) and
// dropped, the rest are written; a batch the database refuses for a reason other than being unreachable is
// written again one event at a time, so that only the event it cannot store is lost.
func (w *AuditWriter) write(ctx context.Context, batch []AuditEvent) {
	invalid, err := w.s.audit(ctx, batch)
	switch {
	case err == nil:
	case errors.Is(err, ErrInternal) && len(batch) > 1:
		for i := range batch {
			w.write(ctx, batch[i:i+1])
		}
		return
	default:
		w.log.Error("writing audit events failed; they are lost", "events", len(batch), "err", err)
		return
	}
	for _, bad := range invalid {
		e := batch[bad.index]
		w.log.Error("dropping an invalid audit event", "err", bad.err, "team", e.TeamID, "cluster", e.ClusterID,
			"actor", e.Actor, "action", e.Action, "resource", e.Resource, "result", e.Result, "source", e.Source,
			"at", e.At)
	}
}
