package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Principal is who a request acts for.
type Principal struct {
	UserID  string
	Email   string
	TokenID string
	// Admin: the user is owner or admin of the default team (until per-team authorization exists).
	Admin bool
}

// Token describes an API token; its plaintext is never stored.
type Token struct {
	ID     string
	UserID string
	Name   string
	// Prefix is the token's first characters ("whp_" and four more); empty for operator-provided tokens.
	Prefix     string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never expires
	LastUsedAt time.Time // zero: never used
	RevokedAt  time.Time // zero: not revoked
}

// maxTokenNameLen bounds Token.Name.
const maxTokenNameLen = 128

// lastUsedEvery is how stale last_used_at may get before an authentication writes it again.
const lastUsedEvery = time.Minute

// cachedToken is a token that authenticated, with what must be re-checked on every use.
type cachedToken struct {
	principal Principal
	expiresAt time.Time // zero: never
}

func expired(expiresAt, now time.Time) bool { return !expiresAt.IsZero() && !now.Before(expiresAt) }

// CreateToken mints a token for user userID and returns its plaintext, which is not kept and cannot be shown
// again. expiresAt zero means the token never expires. An empty or over-long name, or an expiresAt not in the
// future, is ErrInvalid; an unknown user is ErrNotFound.
func (s *Store) CreateToken(ctx context.Context, userID, name string, expiresAt time.Time) (string, Token, error) {
	if name == "" || len(name) > maxTokenNameLen {
		return "", Token{}, fmt.Errorf("tenancy: token name must have 1 to %d bytes: %w", maxTokenNameLen, ErrInvalid)
	}
	if err := checkText("token name", name, maxTokenNameLen); err != nil {
		return "", Token{}, err
	}
	if !expiresAt.IsZero() && !expiresAt.After(s.now()) {
		return "", Token{}, fmt.Errorf("tenancy: token expiry %s is not in the future: %w", expiresAt, ErrInvalid)
	}
	if !validUUID(userID) {
		return "", Token{}, fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	plain := newToken()
	h := hashToken(plain)
	t := Token{UserID: userID, Name: name, Prefix: shownPrefix(plain), ExpiresAt: expiresAt}
	err := s.pool.QueryRow(ctx, `INSERT INTO api_tokens (user_id, name, prefix, hash, expires_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING id::text, created_at`,
		userID, name, t.Prefix, h[:], nullTime(expiresAt)).Scan(&t.ID, &t.CreatedAt)
	if pgCode(err) == codeForeignKey {
		return "", Token{}, fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	if err != nil {
		return "", Token{}, translate("create token", err)
	}
	return plain, t, nil
}

// Tokens lists the tokens of user userID, revoked and expired ones included, oldest first.
func (s *Store) Tokens(ctx context.Context, userID string) ([]Token, error) {
	if !validUUID(userID) {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, `SELECT id::text, user_id::text, name, prefix, created_at, expires_at,
		last_used_at, revoked_at FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id`, userID)
	tokens, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) {
		var t Token
		var exp, used, rev *time.Time
		err := r.Scan(&t.ID, &t.UserID, &t.Name, &t.Prefix, &t.CreatedAt, &exp, &used, &rev)
		t.ExpiresAt, t.LastUsedAt, t.RevokedAt = deref(exp), deref(used), deref(rev)
		return t, err
	})
	if err != nil {
		return nil, translate("list tokens", err)
	}
	return tokens, nil
}

// RevokeToken revokes token id. It takes effect at once in this Store and, unless Config.TokenCacheTTL is set,
// in other processes. Revoking a revoked token does nothing; an unknown id is ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	if !validUUID(id) {
		return fmt.Errorf("tenancy: token %q: %w", id, ErrNotFound)
	}
	var found bool
	err := s.pool.QueryRow(ctx, `WITH r AS (UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $2)
		WHERE id = $1 RETURNING 1) SELECT EXISTS (SELECT 1 FROM r)`, id, s.now()).Scan(&found)
	if err != nil {
		return translate("revoke token", err)
	}
	s.tokens.removeFunc(func(_ [32]byte, c cachedToken) bool { return c.principal.TokenID == id })
	if !found {
		return fmt.Errorf("tenancy: token %q: %w", id, ErrNotFound)
	}
	return nil
}

// Authenticate returns the principal of bearer, the token from an "Authorization: Bearer" header. A malformed
// token (wrong length, or a "whp_" token with a bad checksum) is rejected without a query; an unknown, revoked or
// expired token, or a disabled user, is ErrUnauthenticated too. Successes are cached for Config.TokenCacheTTL (see
// the package documentation for what that delays). A database failure is ErrUnavailable or ErrInternal, never
// ErrUnauthenticated.
func (s *Store) Authenticate(ctx context.Context, bearer string) (*Principal, error) {
	if !plausibleToken(bearer) {
		return nil, fmt.Errorf("tenancy: malformed token: %w", ErrUnauthenticated)
	}
	h := hashToken(bearer)
	now := s.now()
	if c, ok := s.tokens.get(h); ok {
		if expired(c.expiresAt, now) {
			return nil, fmt.Errorf("tenancy: token expired: %w", ErrUnauthenticated)
		}
		p := c.principal
		return &p, nil
	}
	c, err := s.lookupToken(ctx, h, now)
	if err != nil {
		return nil, err
	}
	s.tokens.put(h, c)
	p := c.principal
	return &p, nil
}

// lookupToken reads the token with hash h and checks that it may be used at now.
func (s *Store) lookupToken(ctx context.Context, h [32]byte, now time.Time) (cachedToken, error) {
	var c cachedToken
	var disabled bool
	var expires, revoked, lastUsed *time.Time
	err := s.pool.QueryRow(ctx, `SELECT t.id::text, t.user_id::text, u.email, u.disabled, t.expires_at,
			t.revoked_at, t.last_used_at,
			EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = t.user_id AND m.team_id = $2
				AND m.role IN ('owner', 'admin'))
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`, h[:], DefaultTeam).Scan(
		&c.principal.TokenID, &c.principal.UserID, &c.principal.Email, &disabled, &expires, &revoked, &lastUsed,
		&c.principal.Admin)
	c.expiresAt = deref(expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return c, fmt.Errorf("tenancy: unknown token: %w", ErrUnauthenticated)
	case err != nil:
		return c, translate("authenticate", err)
	case revoked != nil:
		return c, fmt.Errorf("tenancy: token %s revoked: %w", c.principal.TokenID, ErrUnauthenticated)
	case expired(c.expiresAt, now):
		return c, fmt.Errorf("tenancy: token %s expired: %w", c.principal.TokenID, ErrUnauthenticated)
	case disabled:
		return c, fmt.Errorf("tenancy: user %s disabled: %w", c.principal.UserID, ErrUnauthenticated)
	}
	if lastUsed == nil || now.Sub(*lastUsed) >= lastUsedEvery {
		s.touch(ctx, c.principal.TokenID, now)
	}
	return c, nil
}

// touch records that token id was used at now, unless another process did within lastUsedEvery. Failures are
// logged, not returned: they must not fail a request.
func (s *Store) touch(ctx context.Context, id string, now time.Time) {
	_, err := s.pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`, id, now, now.Add(-lastUsedEvery))
	if err != nil {
		s.log.Warn("recording token use failed", "token", id, "err", translate("touch token", err))
	}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
