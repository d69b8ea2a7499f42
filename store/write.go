package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type opKind int

const (
	opCreate opKind = iota
	opUpdate
	opDelete
)

func (k opKind) String() string { return [...]string{"create", "update", "delete"}[k] }

// op is one write waiting for, or inside, a batch.
type op struct {
	kind   opKind
	key    Key
	value  []byte
	expect int64 // CAS revision for update/delete; 0 = any
	ctx    context.Context
	state  atomic.Int32 // opPending → opClaimed by a writer, or → opCanceled by the caller
	done   chan result  // buffered(1)

	// filled while the batch runs
	res result
}

const (
	opPending int32 = iota
	opClaimed
	opCanceled
)

type result struct {
	obj Object
	err error
}

// Create stores a new key. It fails with ErrExists if the key exists.
func (s *Store) Create(ctx context.Context, key Key, value []byte) (Object, error) {
	return s.submit(ctx, &op{kind: opCreate, key: key, value: value})
}

// Update replaces key's value if its revision is expectRev (0: whatever it is). ErrNotFound, ErrConflict.
func (s *Store) Update(ctx context.Context, key Key, value []byte, expectRev int64) (Object, error) {
	return s.submit(ctx, &op{kind: opUpdate, key: key, value: value, expect: expectRev})
}

// Delete removes key if its revision is expectRev (0: whatever it is) and returns its last state, with Revision
// set to the delete's revision. ErrNotFound, ErrConflict.
func (s *Store) Delete(ctx context.Context, key Key, expectRev int64) (Object, error) {
	return s.submit(ctx, &op{kind: opDelete, key: key, expect: expectRev})
}

// priorityKey marks a context whose writes go ahead of the queue (WithPriority).
type priorityKey struct{}

// WithPriority returns ctx with its writes marked urgent: they join the next batch ahead of every queued
// write. For heartbeats whose loss does harm out of proportion to their cost: the controller lease (a renewal
// that times out behind a burst of writes stops the controllers) and node Leases (a node that misses its
// renewals is taken for lost and its pods evicted) — what upstream's API priority and fairness gives its
// leader-election and node-high levels.
func WithPriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, priorityKey{}, true)
}

func isPriority(ctx context.Context) bool { v, _ := ctx.Value(priorityKey{}).(bool); return v }

func (s *Store) submit(ctx context.Context, o *op) (Object, error) {
	if err := o.key.validate(); err != nil {
		return Object{}, err
	}
	if o.expect < 0 {
		return Object{}, fmt.Errorf("%s %s: negative revision: %w", o.kind, o.key, ErrInvalid)
	}
	if o.value == nil && o.kind != opDelete {
		o.value = []byte{}
	}
	o.ctx, o.done = ctx, make(chan result, 1)
	queue := s.ops
	if isPriority(ctx) {
		queue = s.urgent
	}
	select {
	case queue <- o:
	case <-ctx.Done():
		return Object{}, s.ctxErr(o, ctx)
	}
	select {
	case r := <-o.done:
		return r.obj, r.err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opPending, opCanceled) {
			return Object{}, s.ctxErr(o, ctx) // never reached a batch: nothing written
		}
		// A batch has it; its deadline is no later than ours, so the answer is coming.
		r := <-o.done
		return r.obj, r.err
	}
}

func (s *Store) ctxErr(o *op, ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s %s: %w", o.kind, o.key, context.Canceled)
	}
	return fmt.Errorf("%s %s: %w", o.kind, o.key, ErrUnavailable)
}

// writeLoop gathers queued operations into batches and commits them.
func (s *Store) writeLoop(ctx context.Context) {
	batch := make([]*op, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.urgent:
			batch = s.claim(batch, o)
		default:
			select {
			case <-ctx.Done():
				return
			case o := <-s.urgent:
				batch = s.claim(batch, o)
			case o := <-s.ops:
				batch = s.claim(batch, o)
			}
		}
	fill:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case o := <-s.urgent: // urgent writes first, whatever waits in ops
				batch = s.claim(batch, o)
				continue
			default:
			}
			select {
			case o := <-s.ops:
				batch = s.claim(batch, o)
			default:
				break fill
			}
		}
		if len(batch) > 0 {
			s.runBatch(batch)
		}
	}
}

// claim adds o to batch unless its caller gave up or its deadline already passed.
func (s *Store) claim(batch []*op, o *op) []*op {
	if !o.state.CompareAndSwap(opPending, opClaimed) {
		return batch
	}
	if o.ctx.Err() != nil {
		o.done <- result{err: s.ctxErr(o, o.ctx)}
		return batch
	}
	return append(batch, o)
}

// failQueued answers every operation still queued at Close.
func (s *Store) failQueued() {
	for {
		var o *op
		select {
		case o = <-s.ops:
		case o = <-s.urgent:
		default:
			return
		}
		if o.state.CompareAndSwap(opPending, opClaimed) {
			o.done <- result{err: fmt.Errorf("%s %s: %w", o.kind, o.key, ErrClosed)}
		}
	}
}

// runBatch commits batch as one transaction and answers every op. If the batch fails for a reason other than
// the database being unreachable, each op is retried on its own so one bad op cannot fail the others.
func (s *Store) runBatch(batch []*op) {
	ctx, cancel := s.batchContext(batch)
	defer cancel()
	err := s.execBatch(ctx, batch)
	switch {
	case err == nil:
		for _, o := range batch {
			o.done <- o.res
		}
		s.hub.wakeUp()
	case len(batch) > 1 && !isUnavailable(err) && !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrUnavailable):
		for _, o := range batch {
			s.runBatch([]*op{o})
		}
	default:
		for _, o := range batch {
			o.done <- result{err: s.batchError(o, err)}
		}
	}
}

func (s *Store) batchError(o *op, err error) error {
	var amb *AmbiguousError
	if errors.As(err, &amb) {
		return &AmbiguousError{Key: o.key, XID: amb.XID, Revision: o.res.obj.Revision}
	}
	return translate(o.kind.String(), o.key, err)
}

// batchContext ends at the earliest caller deadline (or WriteTimeout), so no caller waits past its own.
func (s *Store) batchContext(batch []*op) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(s.cfg.WriteTimeout)
	for _, o := range batch {
		if d, ok := o.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
	}
	return context.WithDeadline(context.Background(), deadline)
}

// execBatch runs one transaction: take the revision lock (reserving len(batch) revisions), run every op's
// statement in one pipelined round trip, notify, commit. It fills each op's res.
func (s *Store) execBatch(ctx context.Context, batch []*op) error {
	tx, err := s.sys.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after commit
	if s.hooks.afterBegin != nil {
		s.hooks.afterBegin()
	}
	n := len(batch)
	b := &pgx.Batch{}
	b.Queue(sqlLock, n)
	for i, o := range batch {
		queueOp(b, o, int64(n-1-i))
	}
	b.Queue(sqlNotify)
	br := tx.SendBatch(ctx, b)
	var top int64
	var xidText string
	if err := br.QueryRow().Scan(&top, &xidText); err != nil {
		br.Close()
		return err
	}
	for i, o := range batch {
		if err := scanOp(br, o, top-int64(n-1-i)); err != nil {
			br.Close()
			return err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	if s.hooks.beforeCommit != nil {
		s.hooks.beforeCommit()
	}
	xid, _ := strconv.ParseUint(xidText, 10, 64)
	return s.commit(ctx, tx, xid)
}

// commit commits tx; when the outcome is unknown (the connection broke after COMMIT was sent) it asks the
// database whether transaction xid committed.
func (s *Store) commit(ctx context.Context, tx pgx.Tx, xid uint64) error {
	err := tx.Commit(ctx)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return err // the server answered: it did not commit
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	committed, rerr := s.ResolveCommit(rctx, xid)
	switch {
	case rerr != nil:
		s.log.Warn("commit outcome unknown", "xid", xid, "err", rerr)
		return &AmbiguousError{XID: xid}
	case committed:
		return nil
	default:
		return fmt.Errorf("commit: transaction %d aborted: %w", xid, ErrUnavailable)
	}
}

// ResolveCommit tells whether transaction xid (from an *AmbiguousError) committed. It waits while the
// transaction is still in progress, up to ctx's deadline.
func (s *Store) ResolveCommit(ctx context.Context, xid uint64) (bool, error) {
	for {
		var status *string
		err := s.sys.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(xid, 10)).Scan(&status)
		if err != nil {
			return false, translate("resolve commit", nil, err)
		}
		switch {
		case status == nil:
			return false, fmt.Errorf("transaction %d is too old to resolve: %w", xid, ErrInternal)
		case *status == "committed":
			return true, nil
		case *status == "aborted":
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("transaction %d still in progress: %w", xid, ErrUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

const sqlLock = `UPDATE wh_meta SET rev = rev + $1 WHERE id = 1 RETURNING rev, pg_current_xact_id()::text`

const sqlNotify = `SELECT pg_notify('wheelhouse_rev', rev::text) FROM wh_meta WHERE id = 1`

// Each op statement returns exactly one row. $1 is the op's offset below the batch's top revision.
const sqlCreate = `
WITH r AS (SELECT rev - $1::bigint AS rev FROM wh_meta WHERE id = 1),
ins AS (
  INSERT INTO objects (cluster, resource, namespace, name, rev, create_rev, value)
  SELECT $2, $3, $4, $5, r.rev, r.rev, $6 FROM r
  ON CONFLICT (cluster, resource, namespace, name) DO NOTHING
  RETURNING rev),
h AS (
  INSERT INTO history (rev, cluster, resource, namespace, name, type, create_rev, prev_rev, value)
  SELECT ins.rev, $2, $3, $4, $5, 1, ins.rev, 0, $6 FROM ins)
SELECT (SELECT rev FROM ins)`

const sqlUpdate = `
WITH r AS (SELECT rev - $1::bigint AS rev FROM wh_meta WHERE id = 1),
old AS (SELECT rev, create_rev FROM objects WHERE cluster = $2 AND resource = $3 AND namespace = $4 AND name = $5),
up AS (
  UPDATE objects o SET rev = r.rev, value = $6 FROM r, old
  WHERE o.cluster = $2 AND o.resource = $3 AND o.namespace = $4 AND o.name = $5 AND ($7::bigint = 0 OR old.rev = $7)
  RETURNING o.rev, o.create_rev, old.rev AS prev),
h AS (
  INSERT INTO history (rev, cluster, resource, namespace, name, type, create_rev, prev_rev, value)
  SELECT up.rev, $2, $3, $4, $5, 2, up.create_rev, up.prev, $6 FROM up)
SELECT (SELECT rev FROM old), (SELECT create_rev FROM old), (SELECT rev FROM up)`

const sqlDelete = `
WITH r AS (SELECT rev - $1::bigint AS rev FROM wh_meta WHERE id = 1),
del AS (
  DELETE FROM objects WHERE cluster = $2 AND resource = $3 AND namespace = $4 AND name = $5
  AND ($6::bigint = 0 OR rev = $6)
  RETURNING rev, create_rev, value),
h AS (
  INSERT INTO history (rev, cluster, resource, namespace, name, type, create_rev, prev_rev, value)
  SELECT r.rev, $2, $3, $4, $5, 3, del.create_rev, del.rev, del.value FROM r, del
  RETURNING rev)
SELECT (SELECT rev FROM objects WHERE cluster = $2 AND resource = $3 AND namespace = $4 AND name = $5),
       (SELECT rev FROM h), (SELECT create_rev FROM del), (SELECT value FROM del)`

func queueOp(b *pgx.Batch, o *op, offset int64) {
	k := o.key
	switch o.kind {
	case opCreate:
		b.Queue(sqlCreate, offset, k.Cluster, k.Resource, k.Namespace, k.Name, o.value)
	case opUpdate:
		b.Queue(sqlUpdate, offset, k.Cluster, k.Resource, k.Namespace, k.Name, o.value, o.expect)
	case opDelete:
		b.Queue(sqlDelete, offset, k.Cluster, k.Resource, k.Namespace, k.Name, o.expect)
	}
}

// scanOp reads o's row and records its outcome; rev is the revision o gets if it succeeded.
func scanOp(br pgx.BatchResults, o *op, rev int64) error {
	obj := Object{Key: o.key, Value: o.value}
	switch o.kind {
	case opCreate:
		var got *int64
		if err := br.QueryRow().Scan(&got); err != nil {
			return err
		}
		if got == nil {
			o.res = result{err: fmt.Errorf("create %s: %w", o.key, ErrExists)}
			return nil
		}
		obj.Revision, obj.CreateRevision = *got, *got
	case opUpdate:
		var cur, created, got *int64
		if err := br.QueryRow().Scan(&cur, &created, &got); err != nil {
			return err
		}
		if err := casOutcome(o, cur, got); err != nil {
			o.res = result{err: err}
			return nil
		}
		obj.Revision, obj.CreateRevision = *got, *created
	case opDelete:
		var cur, got, created *int64
		if err := br.QueryRow().Scan(&cur, &got, &created, &obj.Value); err != nil {
			return err
		}
		if err := casOutcome(o, cur, got); err != nil {
			o.res = result{err: err}
			return nil
		}
		obj.Revision, obj.CreateRevision = *got, *created
	}
	if obj.Revision != rev {
		return fmt.Errorf("%s %s: revision %d, expected %d: %w", o.kind, o.key, obj.Revision, rev, ErrInternal)
	}
	o.res = result{obj: obj}
	return nil
}

func casOutcome(o *op, cur, got *int64) error {
	switch {
	case cur == nil:
		return fmt.Errorf("%s %s: %w", o.kind, o.key, ErrNotFound)
	case got == nil:
		return fmt.Errorf("%s %s: at revision %d, not %d: %w", o.kind, o.key, *cur, o.expect, ErrConflict)
	}
	return nil
}
