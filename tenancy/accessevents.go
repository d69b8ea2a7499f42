package tenancy

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AccessKind names what an AccessEvent took away.
type AccessKind string

// The kinds of access events (migrations/00011_access_events.sql writes them).
const (
	// AccessCluster: cluster Cluster was deleted (directly or with its team).
	AccessCluster AccessKind = "cluster"
	// AccessNode: the credential of node Subject of cluster Cluster was revoked or deleted.
	AccessNode AccessKind = "node"
	// AccessUser: user Subject lost some access: a token revoked, expired early or deleted, a membership removed
	// or its role changed, the user disabled or deleted.
	AccessUser AccessKind = "user"
)

// AccessEvent is one change that takes access away, as every replica learns of it.
type AccessEvent struct {
	ID      int64
	Kind    AccessKind
	Cluster string
	Subject string
	At      time.Time
}

// accessChannel is the channel the triggers notify; accessApplicationName names the follower's connection.
const (
	accessChannel         = "wheelhouse_access"
	accessApplicationName = "wheelhouse-access-events"
)

// AccessFollowConfig configures FollowAccessEvents. Zero values take the defaults noted.
type AccessFollowConfig struct {
	// Poll is how often the log is read even without a notification (default 5 s): a lost notification
	// delays an event by at most this much.
	Poll time.Duration
	// Retention is how long events are kept in the log (default 24 h); the follower prunes older ones hourly.
	Retention time.Duration
	// Started, when set, is called once the follower has read the log's current end: every change committed
	// after that call is delivered.
	Started func()
}

func (c *AccessFollowConfig) setDefaults() {
	if c.Poll <= 0 {
		c.Poll = 5 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
}

// FollowAccessEvents calls handle, in log order and one at a time, for every access event committed after it
// starts, until ctx ends; it returns ctx's error. It holds a LISTEN connection of its own (not one of the
// pool's) and reads the log after every notification, after every reconnect and every Poll, so a lost
// notification or a dropped connection delays events, never loses them (as long as the database is back
// within Retention). Database errors are logged and retried with back-off.
func (s *Store) FollowAccessEvents(ctx context.Context, cfg AccessFollowConfig, handle func(AccessEvent)) error {
	cfg.setDefaults()
	last, err := s.accessLogEnd(ctx)
	for err != nil {
		s.log.Warn("cannot read the access event log; retrying", "err", err)
		if !sleepCtx(ctx, cfg.Poll) {
			return ctx.Err()
		}
		last, err = s.accessLogEnd(ctx)
	}
	if cfg.Started != nil {
		cfg.Started()
	}
	f := &accessFollower{s: s, cfg: cfg, last: last, handle: handle}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		connected, err := f.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		if connected {
			backoff = 100 * time.Millisecond
		}
		s.log.Warn("access event connection lost; reconnecting", "err", err, "in", backoff)
		if !sleepCtx(ctx, backoff) {
			break
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return ctx.Err()
}

type accessFollower struct {
	s      *Store
	cfg    AccessFollowConfig
	last   int64
	pruned time.Time
	handle func(AccessEvent)
}

// listen holds one LISTEN connection until it fails, catching up at once and after every wake-up.
func (f *accessFollower) listen(ctx context.Context) (connected bool, err error) {
	cc := f.s.pool.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = accessApplicationName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+accessChannel); err != nil {
		return false, err
	}
	for {
		if err := f.catchUp(ctx, conn); err != nil {
			return true, err
		}
		wctx, cancel := context.WithTimeout(ctx, f.cfg.Poll)
		_, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && !timedOut {
			return true, err
		}
	}
}

// catchUp delivers every event after f.last, and prunes the log once an hour.
func (f *accessFollower) catchUp(ctx context.Context, conn *pgx.Conn) error {
	for {
		rows, _ := conn.Query(ctx, `SELECT id, kind, cluster, subject, at FROM access_events WHERE id > $1
			ORDER BY id LIMIT 1000`, f.last)
		evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccessEvent, error) {
			var e AccessEvent
			err := r.Scan(&e.ID, &e.Kind, &e.Cluster, &e.Subject, &e.At)
			return e, err
		})
		if err != nil {
			return translate("read access events", err)
		}
		for _, e := range evs {
			f.last = e.ID
			f.handle(e)
		}
		if len(evs) < 1000 {
			break
		}
	}
	if now := f.s.now(); now.Sub(f.pruned) >= time.Hour {
		if _, err := conn.Exec(ctx, `DELETE FROM access_events WHERE at < $1`, now.Add(-f.cfg.Retention)); err != nil {
			return translate("prune access events", err)
		}
		f.pruned = now
	}
	return nil
}

// accessLogEnd is the id of the newest access event (0 for none).
func (s *Store) accessLogEnd(ctx context.Context) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM access_events`).Scan(&id)
	if err != nil {
		return 0, translate("read access events", err)
	}
	return id, nil
}

// ClusterTombstoned reports whether id was the id of a deleted cluster (and so can never be used again).
func (s *Store) ClusterTombstoned(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cluster_tombstones WHERE id = $1)`, id).Scan(&ok)
	if err != nil {
		return false, translate(fmt.Sprintf("cluster %q", id), err)
	}
	return ok, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
