package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

var (
	ErrNotFound       = errors.New("store: not found")
	ErrExists         = errors.New("store: already exists")
	ErrConflict       = errors.New("store: revision conflict")
	ErrCompacted      = errors.New("store: revision has been compacted")
	ErrFutureRevision = errors.New("store: revision is newer than the current revision")
	ErrUnavailable    = errors.New("store: database unavailable")
	ErrAmbiguous      = errors.New("store: commit outcome unknown")
	ErrBadContinue    = errors.New("store: invalid continue token")
	ErrWatcherSlow    = errors.New("store: watcher fell behind and was closed")
	ErrInvalid        = errors.New("store: invalid argument")
	ErrInternal       = errors.New("store: internal database error")
	ErrClosed         = errors.New("store: closed")
)

// AmbiguousError reports a write whose COMMIT was sent but whose outcome could not be learned. XID identifies
// the transaction; Store.ResolveCommit(ctx, XID) tells whether it committed.
type AmbiguousError struct {
	Key Key
	XID uint64
	// Revision is the revision the write received if it committed.
	Revision int64
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("store: %s: commit outcome unknown (transaction %d, revision %d if committed)", e.Key, e.XID, e.Revision)
}

func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// translate turns a driver error into a store sentinel; pgx types never escape this package.
func translate(op string, key fmt.Stringer, err error) error {
	if err == nil {
		return nil
	}
	what := op
	if key != nil {
		what = op + " " + key.String()
	}
	switch {
	case errors.Is(err, puddle.ErrClosedPool):
		return fmt.Errorf("%s: %w", what, ErrClosed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, context.Canceled)
	case isUnavailable(err):
		return fmt.Errorf("%s: %w", what, ErrUnavailable)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "22021", "22P05": // character_not_in_repertoire (NUL, invalid UTF-8), untranslatable_character
			return fmt.Errorf("%s: text PostgreSQL cannot hold: %w", what, ErrInvalid)
		}
		return fmt.Errorf("%s: SQLSTATE %s: %w", what, pgErr.Code, ErrInternal)
	}
	return fmt.Errorf("%s: %w", what, ErrInternal)
}

// isUnavailable reports errors that mean "the database did not answer" rather than "it said no".
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "58": // connection, resources, operator intervention, system error
			return true
		case "40": // serialization failure, deadlock: nothing written, try again
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) ||
		pgconn.Timeout(err) || errors.Is(err, net.ErrClosed) || isClosedConn(err)
}

func isClosedConn(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range []string{"conn closed", "connection reset", "broken pipe", "connection refused"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
