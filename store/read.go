package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Get returns key's current version, or ErrNotFound.
func (s *Store) Get(ctx context.Context, key Key) (Object, error) {
	if err := key.validate(); err != nil {
		return Object{}, err
	}
	obj := Object{Key: key}
	err := s.retryRead(ctx, func() error {
		return s.pool.QueryRow(ctx,
			`SELECT rev, create_rev, value FROM objects WHERE cluster = $1 AND resource = $2 AND namespace = $3 AND name = $4`,
			key.Cluster, key.Resource, key.Namespace, key.Name).Scan(&obj.Revision, &obj.CreateRevision, &obj.Value)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Object{}, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Object{}, translate("get", key, err)
	}
	return obj, nil
}

// ListOptions selects what List returns.
type ListOptions struct {
	Cluster   string // required
	Resource  string // required
	Namespace string // empty: every namespace
	// Limit bounds the items returned (0: all). When more remain, ListResult.Continue is set.
	Limit int
	// Continue is the token from the previous page; the page is read at that page's revision.
	Continue string
	// Revision reads the list as of that revision (0: current). Ignored with Continue.
	Revision int64
}

// ListResult is one page of a list.
type ListResult struct {
	Items []Object
	// Revision is the revision the list was read at (the same for every page of one list).
	Revision int64
	// Continue fetches the next page; empty on the last page.
	Continue string
}

// List returns objects in (namespace, name) order. Items and Revision come from one snapshot.
func (s *Store) List(ctx context.Context, opts ListOptions) (ListResult, error) {
	if opts.Cluster == "" || opts.Resource == "" || opts.Limit < 0 || opts.Revision < 0 {
		return ListResult{}, fmt.Errorf("list: cluster and resource are required, limit and revision >= 0: %w", ErrInvalid)
	}
	if !ValidKeyPart(opts.Cluster) || !ValidKeyPart(opts.Resource) || !ValidKeyPart(opts.Namespace) {
		return ListResult{}, fmt.Errorf("list %s: parts must be valid UTF-8 without NUL, at most 1024 bytes: %w", listKey(opts), ErrInvalid)
	}
	var after *continueToken
	rev := opts.Revision
	if opts.Continue != "" {
		tok, err := decodeContinue(opts.Continue)
		if err != nil {
			return ListResult{}, err
		}
		after, rev = &tok, tok.Revision
	}
	q, args := listQuery(opts, after, rev)
	var res ListResult
	err := s.retryRead(ctx, func() error {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return translate("list", listKey(opts), err)
		}
		res, err = scanList(rows, opts, rev) // its errors are translated
		return err
	})
	if err != nil {
		return ListResult{}, err
	}
	return res, nil
}

// retryRead runs a read again, once, when its connection turned out to be dead. After PostgreSQL restarts or a
// network cut every pooled connection is, and one idle for less than a second is handed out without a ping: the
// idle ones are pinged first (the dead ones leave the pool), so the retry gets a live or a new connection. Reads
// are safe to repeat.
func (s *Store) retryRead(ctx context.Context, read func() error) error {
	err := read()
	if err == nil || ctx.Err() != nil || !isUnavailable(err) {
		return err
	}
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		_ = c.Ping(ctx) // a failed ping closes the connection, and Release destroys a closed one
		c.Release()
	}
	return read()
}

type listKey ListOptions

func (k listKey) String() string {
	return strings.TrimSuffix(Key{Cluster: k.Cluster, Resource: k.Resource, Namespace: k.Namespace, Name: "*"}.String(), "/*")
}

// listQuery builds the one statement of a page. At revision 0 it reads objects; at a past revision it reads the
// latest history version of each key at or below it. Either way the first two columns are the compaction and
// current revision of the same snapshot.
func listQuery(opts ListOptions, after *continueToken, rev int64) (string, []any) {
	args := []any{opts.Cluster, opts.Resource}
	where := []string{"cluster = $1", "resource = $2"}
	if opts.Namespace != "" {
		args = append(args, opts.Namespace)
		where = append(where, fmt.Sprintf("namespace = $%d", len(args)))
	}
	if after != nil {
		args = append(args, after.Namespace, after.Name)
		where = append(where, fmt.Sprintf("(namespace, name) > ($%d, $%d)", len(args)-1, len(args)))
	}
	limit := ""
	if opts.Limit > 0 {
		args = append(args, opts.Limit+1) // one more tells whether another page exists
		limit = fmt.Sprintf(" LIMIT $%d", len(args))
	}
	var inner string
	if rev == 0 {
		inner = `SELECT namespace, name, rev, create_rev, value FROM objects WHERE ` + strings.Join(where, " AND ") +
			` ORDER BY namespace, name` + limit
	} else {
		args = append(args, rev)
		where = append(where, fmt.Sprintf("rev <= $%d", len(args)))
		inner = `SELECT namespace, name, rev, create_rev, value FROM (
  SELECT DISTINCT ON (namespace, name) namespace, name, rev, create_rev, type, value FROM history
  WHERE ` + strings.Join(where, " AND ") + `
  ORDER BY namespace, name, rev DESC) s
WHERE type <> 3 ORDER BY namespace, name` + limit
	}
	return `SELECT c.rev, m.rev, COALESCE(o.namespace, ''), COALESCE(o.name, ''), COALESCE(o.rev, 0),
  COALESCE(o.create_rev, 0), o.value
FROM wh_compact c CROSS JOIN wh_meta m LEFT JOIN LATERAL (` + inner + `) o ON true
WHERE c.id = 1 AND m.id = 1`, args
}

func scanList(rows pgx.Rows, opts ListOptions, rev int64) (ListResult, error) {
	defer rows.Close()
	var res ListResult
	var compacted, current int64
	for rows.Next() {
		obj := Object{Key: Key{Cluster: opts.Cluster, Resource: opts.Resource}}
		if err := rows.Scan(&compacted, &current, &obj.Namespace, &obj.Name, &obj.Revision, &obj.CreateRevision, &obj.Value); err != nil {
			return ListResult{}, translate("list", listKey(opts), err)
		}
		if obj.Name == "" {
			continue // the LEFT JOIN's empty row: nothing matched
		}
		res.Items = append(res.Items, obj)
	}
	if err := rows.Err(); err != nil {
		return ListResult{}, translate("list", listKey(opts), err)
	}
	switch {
	case rev == 0:
		res.Revision = current
	case rev < compacted:
		return ListResult{}, fmt.Errorf("list %s at revision %d (compacted to %d): %w", listKey(opts), rev, compacted, ErrCompacted)
	case rev > current:
		return ListResult{}, fmt.Errorf("list %s at revision %d (current %d): %w", listKey(opts), rev, current, ErrFutureRevision)
	default:
		res.Revision = rev
	}
	if opts.Limit > 0 && len(res.Items) > opts.Limit {
		res.Items = res.Items[:opts.Limit]
		last := res.Items[len(res.Items)-1]
		res.Continue = encodeContinue(continueToken{Revision: res.Revision, Namespace: last.Namespace, Name: last.Name})
	}
	return res, nil
}

// ScanResource calls fn for every current object of resource in every cluster, in no particular order, and
// returns the revision they are the state at: the objects and the revision come from one snapshot. It is for
// system components that follow all clusters at once (the watch cache's cross-cluster collections behind the
// controllers and the scheduler); a tenant's request never reads across clusters. fn's error stops the scan.
func (s *Store) ScanResource(ctx context.Context, resource string, fn func(Object) error) (int64, error) {
	if resource == "" {
		return 0, fmt.Errorf("scan: a resource is required: %w", ErrInvalid)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, translate("scan", nil, err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	var rev int64
	if err := tx.QueryRow(ctx, "SELECT rev FROM wh_meta WHERE id = 1").Scan(&rev); err != nil {
		return 0, translate("scan", nil, err)
	}
	rows, err := tx.Query(ctx, `SELECT cluster, namespace, name, rev, create_rev, value FROM objects WHERE resource = $1`, resource)
	if err != nil {
		return 0, translate("scan", nil, err)
	}
	defer rows.Close()
	for rows.Next() {
		obj := Object{Key: Key{Resource: resource}}
		if err := rows.Scan(&obj.Cluster, &obj.Namespace, &obj.Name, &obj.Revision, &obj.CreateRevision, &obj.Value); err != nil {
			return 0, translate("scan", nil, err)
		}
		if err := fn(obj); err != nil {
			return 0, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, translate("scan", nil, err)
	}
	return rev, nil
}
