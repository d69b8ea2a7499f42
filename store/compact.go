package store

import (
	"context"
	"fmt"
	"time"
)

// compactChunk bounds the revisions one compaction transaction covers, so no transaction runs long.
const compactChunk = 10000

// Compact discards history that no read at revision >= rev needs. It is idempotent and safe to run from
// several processes; compacting to at or below the current compaction revision does nothing.
// ErrFutureRevision if rev is above the current revision.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	for {
		done, err := s.compactStep(ctx, rev)
		if err != nil || done {
			return err
		}
	}
}

// compactStep compacts one chunk towards rev and reports whether rev is reached.
func (s *Store) compactStep(ctx context.Context, rev int64) (bool, error) {
	tx, err := s.sys.Begin(ctx)
	if err != nil {
		return false, translate("compact", nil, err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after commit
	var from, current int64
	err = tx.QueryRow(ctx, `SELECT c.rev, m.rev FROM wh_compact c CROSS JOIN wh_meta m
		WHERE c.id = 1 AND m.id = 1 FOR UPDATE OF c`).Scan(&from, &current)
	if err != nil {
		return false, translate("compact", nil, err)
	}
	if rev > current {
		return false, fmt.Errorf("compact to %d (current %d): %w", rev, current, ErrFutureRevision)
	}
	s.hub.noteCompacted(from)
	if rev <= from {
		return true, nil
	}
	to := min(rev, from+compactChunk)
	// Every version superseded by a change in (from, to], then the tombstones of (from, to].
	if _, err := tx.Exec(ctx, `DELETE FROM history WHERE rev IN (
		SELECT prev_rev FROM history WHERE rev > $1 AND rev <= $2 AND prev_rev > 0)`, from, to); err != nil {
		return false, translate("compact", nil, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM history WHERE rev > $1 AND rev <= $2 AND type = 3`, from, to); err != nil {
		return false, translate("compact", nil, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE wh_compact SET rev = $1 WHERE id = 1`, to); err != nil {
		return false, translate("compact", nil, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, translate("compact", nil, err)
	}
	s.hub.noteCompacted(to)
	return to == rev, nil
}

// revSample is the current revision at one moment.
type revSample struct {
	at  time.Time
	rev int64
}

// compactLoop samples the current revision every CompactInterval and compacts to the newest sample at least
// Retention old.
func (s *Store) compactLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CompactInterval)
	defer t.Stop()
	var samples []revSample
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			samples = s.compactTick(ctx, now, samples)
		}
	}
}

func (s *Store) compactTick(ctx context.Context, now time.Time, samples []revSample) []revSample {
	rev, err := s.CurrentRevision(ctx)
	if err != nil {
		return samples
	}
	samples = append(samples, revSample{at: now, rev: rev})
	target := int64(0)
	i := 0
	for ; i < len(samples) && !samples[i].at.After(now.Add(-s.cfg.Retention)); i++ {
		target = samples[i].rev
	}
	if target == 0 {
		return samples
	}
	if err := s.Compact(ctx, target); err != nil {
		s.log.Warn("compaction failed", "to", target, "err", err)
		return samples
	}
	return samples[i-1:] // keep the sample we compacted to; older ones are useless
}

// deleteClusterChunk bounds the rows one statement of DeleteCluster removes.
const deleteClusterChunk = 5000

// DeleteCluster removes every object of cluster and its history, in chunks, without events: the cluster is
// gone (the platform deleted it), so nobody may read or watch it any more. Watches of it that are open see no
// further events; their clients get 404 on their next request. It is idempotent.
func (s *Store) DeleteCluster(ctx context.Context, cluster string) error {
	if cluster == "" {
		return fmt.Errorf("delete cluster: a cluster is required: %w", ErrInvalid)
	}
	for _, table := range []string{"objects", "history"} {
		q := `DELETE FROM ` + table + ` WHERE ctid IN (SELECT ctid FROM ` + table + ` WHERE cluster = $1 LIMIT $2)`
		for {
			tag, err := s.sys.Exec(ctx, q, cluster, deleteClusterChunk)
			if err != nil {
				return translate("delete cluster", nil, err)
			}
			if tag.RowsAffected() < deleteClusterChunk {
				break
			}
		}
	}
	return nil
}
