package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What Bootstrap creates on a fresh database.
const (
	DefaultTeam        = "default"
	DefaultCluster     = "default"
	AdminEmail         = "admin@localhost"
	BootstrapTokenName = "bootstrap"
	// MinPasswordLen is the shortest password BootstrapConfig accepts (NIST SP 800-63B's minimum).
	MinPasswordLen = 8
	// generatedPasswordLen is the length of a generated password: 20 base62 characters, about 119 bits.
	generatedPasswordLen = 20
)

// bootstrapLockKey names the transaction-scoped advisory lock that serializes Bootstrap across replicas.
const bootstrapLockKey int64 = 0x77685f626f6f74 // "wh_boot"

// BootstrapConfig holds the operator's choices for the admin user; empty fields are generated when needed.
type BootstrapConfig struct {
	// Token (WHEELHOUSE_BOOTSTRAP_TOKEN) becomes an API token of the admin; at least MinTokenLen characters, any
	// format, but one starting with "whp_" must be a valid minted token.
	Token string
	// Password (WHEELHOUSE_BOOTSTRAP_PASSWORD) becomes the admin's password; at least MinPasswordLen bytes.
	Password string
}

// Validate reports a BootstrapConfig that cannot be applied. Its messages never contain the secrets.
func (c BootstrapConfig) Validate() error {
	switch {
	case c.Token != "" && (len(c.Token) < MinTokenLen || len(c.Token) > maxTokenLen):
		return fmt.Errorf("tenancy: bootstrap token must have %d to %d characters: %w", MinTokenLen, maxTokenLen, ErrInvalid)
	case strings.HasPrefix(c.Token, TokenPrefix) && !wellFormedToken(c.Token):
		return fmt.Errorf("tenancy: bootstrap token starts with %q but is not a valid token (bad length or checksum): %w",
			TokenPrefix, ErrInvalid)
	case c.Password != "" && (len(c.Password) < MinPasswordLen || len(c.Password) > maxPasswordLen):
		return fmt.Errorf("tenancy: bootstrap password must have %d to %d bytes: %w", MinPasswordLen, maxPasswordLen, ErrInvalid)
	}
	return nil
}

// BootstrapResult says what Bootstrap did. Token and Password are set only when Bootstrap generated them in this
// call: show them to the operator once, they are not stored in the clear anywhere.
type BootstrapResult struct {
	TeamCreated    bool
	ClusterCreated bool
	AdminCreated   bool
	// AdminID is the admin user's id; empty when the admin was deleted (and no secrets were asked for).
	AdminID string
	// TokenCreated: a token was added for the admin (the configured one, or Token).
	TokenCreated bool
	// Token is a generated token's plaintext.
	Token string
	// TokenUnusable: the configured token exists but is revoked or expired; Bootstrap does not revive it.
	TokenUnusable bool
	// PasswordSet: the admin's password was set or changed (to the configured one, or Password).
	PasswordSet bool
	// Password is a generated password.
	Password string
}

// admin is the bootstrap user as read inside the transaction.
type admin struct {
	id   string
	hash *string // nil: no password
}

// Bootstrap makes a fresh database usable and applies cfg to the admin user; see the package documentation. It is
// idempotent and safe to run from several replicas at once. When the admin user no longer exists it does nothing
// more, and fails with ErrNotFound if cfg asks for a token or password. A configured token that belongs to
// another user is ErrConflict.
func (s *Store) Bootstrap(ctx context.Context, cfg BootstrapConfig) (BootstrapResult, error) {
	if err := cfg.Validate(); err != nil {
		return BootstrapResult{}, err
	}
	var res BootstrapResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = BootstrapResult{}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", bootstrapLockKey); err != nil {
			return err
		}
		if err := createDefaults(ctx, tx, &res); err != nil {
			return err
		}
		a, err := readAdmin(ctx, tx)
		if errors.Is(err, pgx.ErrNoRows) {
			if cfg.Token != "" || cfg.Password != "" {
				return fmt.Errorf("user %s was deleted; unset the bootstrap token and password: %w", AdminEmail, ErrNotFound)
			}
			return nil
		}
		if err != nil {
			return err
		}
		res.AdminID = a.id
		if err := s.ensureToken(ctx, tx, a, cfg.Token, &res); err != nil {
			return err
		}
		return ensurePassword(ctx, tx, a, cfg.Password, &res)
	})
	if err != nil {
		return BootstrapResult{}, translate("bootstrap", err)
	}
	return res, nil
}

// createDefaults creates the default team, cluster and admin owner when the database has no team at all.
func createDefaults(ctx context.Context, tx pgx.Tx, res *BootstrapResult) error {
	var fresh bool
	if err := tx.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM teams)").Scan(&fresh); err != nil || !fresh {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO teams (id, name) VALUES ($1, 'Default')", DefaultTeam); err != nil {
		return err
	}
	// A default cluster deleted before (every team was deleted since) left a tombstone: its id is never reused.
	tag, err := tx.Exec(ctx, `INSERT INTO clusters (id, team_id, name) SELECT $1, $2, $1
		WHERE NOT EXISTS (SELECT 1 FROM cluster_tombstones WHERE id = $1)`, DefaultCluster, DefaultTeam)
	if err != nil {
		return err
	}
	res.TeamCreated, res.ClusterCreated = true, tag.RowsAffected() == 1
	tag, err = tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1) ON CONFLICT (email) DO NOTHING", AdminEmail)
	if err != nil {
		return err
	}
	res.AdminCreated = tag.RowsAffected() == 1
	_, err = tx.Exec(ctx, `INSERT INTO memberships (team_id, user_id, role)
		SELECT $1, id, 'owner' FROM users WHERE email = $2 ON CONFLICT DO NOTHING`, DefaultTeam, AdminEmail)
	return err
}

func readAdmin(ctx context.Context, tx pgx.Tx) (admin, error) {
	var a admin
	err := tx.QueryRow(ctx, "SELECT id::text, password_hash FROM users WHERE email = $1", AdminEmail).Scan(&a.id, &a.hash)
	return a, err
}

// ensureToken adds token for the admin, or mints one when token is empty and the admin has never had one.
func (s *Store) ensureToken(ctx context.Context, tx pgx.Tx, a admin, token string, res *BootstrapResult) error {
	if token == "" {
		var has bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE user_id = $1)", a.id).Scan(&has); err != nil || has {
			return err
		}
		token = newToken()
		res.Token = token
	}
	h := hashToken(token)
	tag, err := tx.Exec(ctx, `INSERT INTO api_tokens (user_id, name, prefix, hash) VALUES ($1, $2, $3, $4)
		ON CONFLICT (hash) DO NOTHING`, a.id, BootstrapTokenName, shownPrefix(token), h[:])
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		res.TokenCreated = true
		return nil
	}
	var owner string
	var expires, revoked *time.Time
	if err := tx.QueryRow(ctx, "SELECT user_id::text, expires_at, revoked_at FROM api_tokens WHERE hash = $1",
		h[:]).Scan(&owner, &expires, &revoked); err != nil {
		return err
	}
	if owner != a.id {
		return fmt.Errorf("the bootstrap token is already a token of another user: %w", ErrConflict)
	}
	res.TokenUnusable = revoked != nil || expired(deref(expires), s.now())
	return nil
}

// ensurePassword sets password for the admin when it differs, or generates one when password is empty and the
// admin has none. A matching hash with old parameters is rehashed without counting as a change.
func ensurePassword(ctx context.Context, tx pgx.Tx, a admin, password string, res *BootstrapResult) error {
	changed := true
	switch {
	case password == "" && a.hash != nil:
		return nil
	case password == "":
		password = randomBase62(generatedPasswordLen)
		res.Password = password
	case a.hash != nil:
		ok, rehash, err := VerifyPassword(*a.hash, password)
		if err == nil && ok && !rehash {
			return nil
		}
		changed = !(err == nil && ok)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE users SET password_hash = $2,
		password_changed_at = CASE WHEN $3 THEN now() ELSE password_changed_at END WHERE id = $1`, a.id, hash, changed)
	res.PasswordSet = changed
	return err
}
