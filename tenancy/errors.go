package tenancy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

var (
	ErrNotFound        = errors.New("tenancy: not found")
	ErrUnauthenticated = errors.New("tenancy: unauthenticated")
	ErrInvalid         = errors.New("tenancy: invalid argument")
	ErrConflict        = errors.New("tenancy: conflict")
	ErrUnavailable     = errors.New("tenancy: database unavailable")
	ErrInternal        = errors.New("tenancy: internal database error")
	ErrClosed          = errors.New("tenancy: closed")
)

// sentinels are this package's own errors, passed through translate unchanged.
var sentinels = []error{ErrNotFound, ErrUnauthenticated, ErrInvalid, ErrConflict, ErrUnavailable, ErrInternal, ErrClosed}

// PostgreSQL error codes translated to sentinels.
const (
	codeForeignKey     = "23503"
	codeUnique         = "23505"
	codeUndefinedTable = "42P01"
	// codeBadText and codeUntranslatable: text PostgreSQL cannot hold (a NUL byte, invalid UTF-8).
	codeBadText        = "22021"
	codeUntranslatable = "22P05"
)

// translate turns a driver error from operation op into a sentinel; pgx types never escape this package.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return fmt.Errorf("tenancy: %s: %w", op, err)
		}
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, puddle.ErrClosedPool):
		return fmt.Errorf("tenancy: %s: %w", op, ErrClosed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("tenancy: %s: %w", op, context.Canceled)
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("tenancy: %s: %w", op, ErrNotFound)
	case isUnavailable(err):
		return fmt.Errorf("tenancy: %s: %w", op, ErrUnavailable)
	case errors.As(err, &pgErr) && (pgErr.Code == codeBadText || pgErr.Code == codeUntranslatable):
		// A backstop: inputs are checked before they reach a query; one that was not is the caller's error.
		return fmt.Errorf("tenancy: %s: text with a NUL byte or invalid UTF-8: %w", op, ErrInvalid)
	case errors.As(err, &pgErr):
		return fmt.Errorf("tenancy: %s: SQLSTATE %s: %w", op, pgErr.Code, ErrInternal)
	}
	return fmt.Errorf("tenancy: %s: %w", op, ErrInternal)
}

// pgCode is the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// pgConstraint is the constraint a PostgreSQL error names (such as "clusters_pkey"), or "".
func pgConstraint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// isUnavailable reports errors that mean "the database did not answer" rather than "it said no".
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "58", "40": // connection, resources, operator, system; serialization/deadlock
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
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
