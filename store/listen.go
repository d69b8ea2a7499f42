package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the LISTEN/NOTIFY channel every write batch notifies, with its top revision as payload.
const notifyChannel = "wheelhouse_rev"

// listenLoop keeps one LISTEN connection open for the process and wakes the hub on every notification and
// after every (re)connect, so a dropped connection costs latency, never events.
func (s *Store) listenLoop(ctx context.Context) {
	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		connected, err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff.reset()
		}
		if err == nil {
			continue // idle replacement
		}
		d := backoff.next()
		s.log.Warn("LISTEN connection lost; reconnecting", "err", err, "in", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context) (connected bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.listen)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	s.hub.wakeUp() // catch up on whatever committed while we were not listening
	for {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.ListenIdle)
		_, err := conn.WaitForNotification(wctx)
		idle := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		if idle {
			return true, nil // silent for ListenIdle: replace the connection, in case it died quietly
		}
		if err != nil {
			return true, err
		}
		s.hub.wakeUp()
	}
}
