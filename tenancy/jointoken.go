package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// JoinToken lets nodes join one cluster; its secret is returned once.
type JoinToken struct {
	ID          string
	ClusterID   string
	Description string
	CreatedBy   string // "" when created without a user or when the user was deleted
	CreatedAt   time.Time
	ExpiresAt   time.Time // zero: never
	RevokedAt   time.Time // zero: not revoked
	LastUsedAt  time.Time // zero: never used
	MaxUses     int       // 0: unlimited
	Uses        int
}

// Join token format: JoinTokenPrefix + caHash + "::" + id + "." + secret.
const (
	// JoinTokenPrefix starts every join token, as k3s's "secure" tokens.
	JoinTokenPrefix  = "K10"
	joinIDLen        = 6
	joinSecretLen    = 32 // 32 × log2(62) ≈ 190 bits
	minJoinSecretLen = 22 // 22 × log2(62) ≈ 131 bits
	maxJoinSecretLen = 128
	caHashLen        = 2 * sha256.Size
	joinIDAlphabet   = "abcdefghijklmnopqrstuvwxyz0123456789"
	// joinIDAttempts bounds the retries when a random id is taken (36^6 ≈ 2.2 × 10^9 ids).
	joinIDAttempts = 8
)

const joinTokenColumns = `id, cluster_id, description, coalesce(created_by::text, ''), created_at, expires_at,
	revoked_at, last_used_at, coalesce(max_uses, 0), uses`

func scanJoinToken(r pgx.Row) (JoinToken, error) {
	var jt JoinToken
	var expires, revoked, used *time.Time
	err := r.Scan(&jt.ID, &jt.ClusterID, &jt.Description, &jt.CreatedBy, &jt.CreatedAt, &expires, &revoked, &used,
		&jt.MaxUses, &jt.Uses)
	jt.ExpiresAt, jt.RevokedAt, jt.LastUsedAt = deref(expires), deref(revoked), deref(used)
	return jt, err
}

// ParseJoinToken splits a join token "K10<caHash>::<id>.<secret>" into its parts. caHash is "" (no CA pin)
// or 64 lower-case hex digits, id 6 lower-case letters and digits, secret 22 to 128 base62 characters; anything
// else is ErrInvalid.
func ParseJoinToken(token string) (caHash, id, secret string, err error) {
	bad := func(why string) (string, string, string, error) {
		return "", "", "", fmt.Errorf("tenancy: malformed join token: %s: %w", why, ErrInvalid)
	}
	rest, ok := strings.CutPrefix(token, JoinTokenPrefix)
	if !ok {
		return bad("no " + JoinTokenPrefix + " prefix")
	}
	caHash, cred, ok := strings.Cut(rest, "::")
	if !ok {
		return bad(`no "::"`)
	}
	if caHash != "" && (len(caHash) != caHashLen || !onlyOf(caHash, "0123456789abcdef")) {
		return bad("the CA hash is not a lower-case hex SHA-256")
	}
	id, secret, ok = strings.Cut(cred, ".")
	switch {
	case !ok:
		return bad(`no "." between id and secret`)
	case len(id) != joinIDLen || !onlyOf(id, joinIDAlphabet):
		return bad("bad id")
	case len(secret) < minJoinSecretLen || len(secret) > maxJoinSecretLen || !onlyOf(secret, base62):
		return bad("bad secret")
	}
	return caHash, id, secret, nil
}

// onlyOf reports whether every byte of s is in alphabet.
func onlyOf(s, alphabet string) bool {
	for i := range len(s) {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// validJoinID reports whether id has the form of a join token id.
func validJoinID(id string) bool { return len(id) == joinIDLen && onlyOf(id, joinIDAlphabet) }

// newJoinID returns joinIDLen uniformly random characters of joinIDAlphabet from crypto/rand.
func newJoinID() string {
	out := make([]byte, 0, joinIDLen)
	var buf [2 * joinIDLen]byte
	for len(out) < joinIDLen {
		_, _ = rand.Read(buf[:]) // never fails (crypto/rand)
		for _, b := range buf {
			if b < 252 && len(out) < joinIDLen { // 252 = 7 × 36: reject the rest to keep the draw uniform
				out = append(out, joinIDAlphabet[b%36])
			}
		}
	}
	return string(out)
}

// CreateJoinToken mints a join token for cluster clusterID and returns it; only the SHA-256 of its secret is
// stored, so it cannot be shown again. The token is "K10" + caHash + "::" + id + "." + secret (see
// ParseJoinToken): caHash, the lower-case hex SHA-256 of the cluster CA certificate (DER), lets the node pin
// the server's CA ("" pins nothing; upper-case hex is lower-cased); id is public and names the token in lists;
// the secret has 32 random base62 characters (about 190 bits). createdBy is the creating user's id or "";
// expiresAt zero never expires; maxUses 0 is unlimited. A malformed caHash, createdBy or description (at most
// MaxDescriptionLen bytes of UTF-8 without control characters), an expiresAt not in the future or a
// negative maxUses is ErrInvalid; an unknown cluster ErrNotFound.
func (s *Store) CreateJoinToken(ctx context.Context, clusterID, createdBy, description string, expiresAt time.Time,
	maxUses int, caHash string) (string, JoinToken, error) {
	caHash = strings.ToLower(caHash)
	if caHash != "" && (len(caHash) != caHashLen || !onlyOf(caHash, "0123456789abcdef")) {
		return "", JoinToken{}, fmt.Errorf("tenancy: CA hash %q is not a hex SHA-256: %w", caHash, ErrInvalid)
	}
	if err := checkText("join token description", description, MaxDescriptionLen); err != nil {
		return "", JoinToken{}, err
	}
	now := s.now()
	if !expiresAt.IsZero() && !expiresAt.After(now) {
		return "", JoinToken{}, fmt.Errorf("tenancy: join token expiry %s is not in the future: %w", expiresAt, ErrInvalid)
	}
	if maxUses < 0 || maxUses > 1<<31-1 {
		return "", JoinToken{}, fmt.Errorf("tenancy: join token max uses %d must be between 0 (unlimited) and 2147483647: %w", maxUses, ErrInvalid)
	}
	var creator *string
	if createdBy != "" {
		if !validUUID(createdBy) {
			return "", JoinToken{}, fmt.Errorf("tenancy: creating user %q: %w", createdBy, ErrInvalid)
		}
		creator = &createdBy
	}
	if !ValidID(clusterID) {
		return "", JoinToken{}, fmt.Errorf("tenancy: cluster %q: %w", clusterID, ErrNotFound)
	}
	var limit *int
	if maxUses > 0 {
		limit = &maxUses
	}
	secret := randomBase62(joinSecretLen)
	h := sha256.Sum256([]byte(secret))
	for range joinIDAttempts {
		id := newJoinID()
		jt, err := scanJoinToken(s.pool.QueryRow(ctx, `INSERT INTO join_tokens
			(id, cluster_id, secret_hash, description, created_by, created_at, expires_at, max_uses)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING `+joinTokenColumns,
			id, clusterID, h[:], description, creator, now, nullTime(expiresAt), limit))
		switch {
		case errors.Is(err, pgx.ErrNoRows): // id taken: draw another
			continue
		case pgCode(err) == codeForeignKey && pgConstraint(err) == "join_tokens_created_by_fkey":
			return "", JoinToken{}, fmt.Errorf("tenancy: creating user %q: %w", createdBy, ErrInvalid)
		case pgCode(err) == codeForeignKey:
			return "", JoinToken{}, fmt.Errorf("tenancy: cluster %q: %w", clusterID, ErrNotFound)
		case err != nil:
			return "", JoinToken{}, translate("create join token", err)
		}
		return JoinTokenPrefix + caHash + "::" + id + "." + secret, jt, nil
	}
	return "", JoinToken{}, fmt.Errorf("tenancy: create join token: no free id in %d attempts: %w", joinIDAttempts, ErrInternal)
}

// JoinTokens lists the join tokens of cluster clusterID, revoked, expired and used-up ones included, oldest
// first; ErrNotFound for an unknown cluster.
func (s *Store) JoinTokens(ctx context.Context, clusterID string) ([]JoinToken, error) {
	if !ValidID(clusterID) {
		return nil, fmt.Errorf("tenancy: cluster %q: %w", clusterID, ErrNotFound)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+joinTokenColumns+` FROM join_tokens WHERE cluster_id = $1
		ORDER BY created_at, id`, clusterID)
	jts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JoinToken, error) { return scanJoinToken(r) })
	if err == nil && len(jts) == 0 {
		err = s.mustExist(ctx, "clusters", "cluster", clusterID)
	}
	if err != nil {
		return nil, translate("list join tokens", err)
	}
	return jts, nil
}

// RevokeJoinToken revokes join token id of cluster clusterID: it no longer lets nodes join (nodes that joined
// keep their credentials). Revoking a revoked token does nothing; an unknown id, or one of another cluster, is
// ErrNotFound.
func (s *Store) RevokeJoinToken(ctx context.Context, clusterID, id string) error {
	if !ValidID(clusterID) || !validJoinID(id) {
		return fmt.Errorf("tenancy: join token %q of cluster %q: %w", id, clusterID, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE join_tokens SET revoked_at = coalesce(revoked_at, $3)
		WHERE cluster_id = $1 AND id = $2`, clusterID, id, s.now())
	if err != nil {
		return translate("revoke join token", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenancy: join token %q of cluster %q: %w", id, clusterID, ErrNotFound)
	}
	return nil
}

// UseJoinToken spends one use of join token token and returns it (with its cluster, and the use counted). In
// one statement it checks the secret (by its hash), revocation, expiry and the use count, and increments uses
// and sets last_used_at: concurrent uses never exceed MaxUses. A malformed, unknown, revoked, expired or used-up
// token, or a wrong secret, is ErrUnauthenticated; the wrapped message says which, for logs. The CA hash in the
// token is for the node and is not checked here. A database failure is ErrUnavailable or ErrInternal.
func (s *Store) UseJoinToken(ctx context.Context, token string) (JoinToken, error) {
	return s.useJoinToken(ctx, s.pool, token)
}

// useJoinToken is UseJoinToken through q (the pool, or a transaction whose rollback takes the use back).
func (s *Store) useJoinToken(ctx context.Context, q querier, token string) (JoinToken, error) {
	_, id, secret, err := ParseJoinToken(token)
	if err != nil {
		return JoinToken{}, fmt.Errorf("tenancy: malformed join token: %w", ErrUnauthenticated)
	}
	h := sha256.Sum256([]byte(secret))
	now := s.now()
	jt, err := scanJoinToken(q.QueryRow(ctx, `UPDATE join_tokens SET uses = uses + 1, last_used_at = $3
		WHERE id = $1 AND secret_hash = $2 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $3)
			AND (max_uses IS NULL OR uses < max_uses)
		RETURNING `+joinTokenColumns, id, h[:], now))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return JoinToken{}, fmt.Errorf("tenancy: join token %q %s: %w", id, s.whyRejected(ctx, q, id, h, now), ErrUnauthenticated)
	case err != nil:
		return JoinToken{}, translate("use join token", err)
	}
	return jt, nil
}

// whyRejected says, for logs, why join token id with secret hash h was refused at now.
func (s *Store) whyRejected(ctx context.Context, q querier, id string, h [32]byte, now time.Time) string {
	var stored []byte
	var jt JoinToken
	var expires, revoked *time.Time
	err := q.QueryRow(ctx, `SELECT secret_hash, expires_at, revoked_at, coalesce(max_uses, 0), uses
		FROM join_tokens WHERE id = $1`, id).Scan(&stored, &expires, &revoked, &jt.MaxUses, &jt.Uses)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "unknown"
	case err != nil:
		return "rejected"
	case subtle.ConstantTimeCompare(stored, h[:]) != 1:
		return "with a wrong secret"
	case revoked != nil:
		return "revoked"
	case expired(deref(expires), now):
		return "expired"
	case jt.MaxUses > 0 && jt.Uses >= jt.MaxUses:
		return "used up"
	}
	return "rejected"
}
