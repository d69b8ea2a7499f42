package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bounds on names and free text.
const (
	// MaxNameLen bounds team and cluster names, in bytes.
	MaxNameLen = 128
	// MaxDescriptionLen bounds a join token's description, in bytes.
	MaxDescriptionLen = 256
	// MaxEmailLen bounds an email address, in bytes (RFC 5321's path limit less the angle brackets).
	MaxEmailLen = 254
	maxLocalLen = 64
)

// checkName reports a team or cluster name that is empty, blank, longer than MaxNameLen bytes, not UTF-8 or
// has control characters.
func checkName(what, name string) error {
	if err := checkText(what+" name", name, MaxNameLen); err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("tenancy: %s name must not be empty: %w", what, ErrInvalid)
	}
	return nil
}

// checkText reports text longer than max bytes, not valid UTF-8, or with control characters.
func checkText(what, text string, max int) error {
	switch {
	case len(text) > max:
		return fmt.Errorf("tenancy: %s must have at most %d bytes: %w", what, max, ErrInvalid)
	case !utf8.ValidString(text):
		return fmt.Errorf("tenancy: %s is not valid UTF-8: %w", what, ErrInvalid)
	case strings.IndexFunc(text, unicode.IsControl) >= 0:
		return fmt.Errorf("tenancy: %s must not contain control characters: %w", what, ErrInvalid)
	}
	return nil
}

// validEmail reports whether email (already normalized) looks like local@domain: one '@', a local part of 1 to
// 64 bytes, a domain of dot-separated non-empty labels, no spaces or control characters, at most MaxEmailLen
// bytes in all. It is a sanity check, not RFC 5322 (quoted local parts are refused).
func validEmail(email string) bool {
	if len(email) > MaxEmailLen || !utf8.ValidString(email) {
		return false
	}
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || len(local) > maxLocalLen || domain == "" || strings.Contains(domain, "@") {
		return false
	}
	if strings.ContainsFunc(email, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(`"(),:;<>[\]`, r)
	}) {
		return false
	}
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" {
			return false
		}
	}
	return true
}

// checkEmail normalizes email and reports one that does not look like an address.
func checkEmail(email string) (string, error) {
	n := NormalizeEmail(email)
	if !validEmail(n) {
		return "", fmt.Errorf("tenancy: %q is not an email address: %w", email, ErrInvalid)
	}
	return n, nil
}

// checkPassword reports a password outside MinPasswordLen..maxPasswordLen bytes.
func checkPassword(password string) error {
	if len(password) < MinPasswordLen || len(password) > maxPasswordLen {
		return fmt.Errorf("tenancy: password must have %d to %d bytes: %w", MinPasswordLen, maxPasswordLen, ErrInvalid)
	}
	return nil
}

// assignableRole reports whether role may be given by SetRole or an invitation: every role but owner.
func assignableRole(role string) bool {
	return role == RoleAdmin || role == RoleMember || role == RoleViewer
}

// querier is what pool and transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inTx runs fn in a transaction (committed when fn returns nil) and translates its error for operation op.
// Errors fn returns should wrap a sentinel; anything else is treated as a database failure.
func (s *Store) inTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return translate(op, pgx.BeginFunc(ctx, s.pool, fn))
}

// exists runs a "SELECT EXISTS (...)" query.
func exists(ctx context.Context, q querier, sql string, args ...any) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, sql, args...).Scan(&ok)
	return ok, err
}

// notFoundIfNoRows turns "no rows" into ErrNotFound for what.
func notFoundIfNoRows(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// forgetUser drops the cached principals of user id: their Principal.Admin may have changed, or they were
// disabled.
func (s *Store) forgetUser(id string) {
	s.tokens.removeFunc(func(_ [32]byte, c cachedToken) bool { return c.principal.UserID == id })
}

// forgetCluster drops cluster id from the cluster cache.
func (s *Store) forgetCluster(id string) {
	s.clusters.removeFunc(func(k string, _ Cluster) bool { return k == id })
}

// ForgetCluster drops cluster id from this Store's cluster cache (a deletion learnt from the access event log,
// made by another process).
func (s *Store) ForgetCluster(id string) { s.forgetCluster(id) }
