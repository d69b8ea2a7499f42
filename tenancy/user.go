package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// User is a person (or robot) who signs in.
type User struct {
	ID          string
	Email       string
	Disabled    bool
	HasPassword bool
	CreatedAt   time.Time
}

// NormalizeEmail is the form emails are stored and compared in: trimmed and lower-cased.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// UserByEmail returns the user with that email (compared case-insensitively); ErrNotFound when there is none.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	var u User
	err := s.pool.QueryRow(ctx, `SELECT id::text, email, disabled, password_hash IS NOT NULL, created_at
		FROM users WHERE email = $1`, NormalizeEmail(email)).Scan(&u.ID, &u.Email, &u.Disabled, &u.HasPassword, &u.CreatedAt)
	if err != nil {
		return User{}, translate(fmt.Sprintf("user %q", email), err)
	}
	return u, nil
}

const userColumns = `id::text, email, disabled, password_hash IS NOT NULL, created_at`

func scanUser(r pgx.Row) (User, error) {
	var u User
	err := r.Scan(&u.ID, &u.Email, &u.Disabled, &u.HasPassword, &u.CreatedAt)
	return u, err
}

// CreateUser creates a user. The email is normalized (NormalizeEmail) and must look like local@domain, at most
// MaxEmailLen bytes; password "" leaves the user without a password, any other must have MinPasswordLen to
// 1024 bytes and is stored as its argon2id hash. A bad email or password is ErrInvalid, a taken email
// ErrConflict.
func (s *Store) CreateUser(ctx context.Context, email, password string) (User, error) {
	email, err := checkEmail(email)
	if err != nil {
		return User{}, err
	}
	var hash *string
	if password != "" {
		if err := checkPassword(password); err != nil {
			return User{}, err
		}
		h, err := HashPassword(password)
		if err != nil {
			return User{}, err
		}
		hash = &h
	}
	u, err := s.insertUser(ctx, s.pool, email, hash)
	if err != nil {
		return User{}, translate("create user", err)
	}
	return u, nil
}

// insertUser adds a user with a normalized, valid email; ErrConflict when the email is taken.
func (s *Store) insertUser(ctx context.Context, q querier, email string, hash *string) (User, error) {
	u, err := scanUser(q.QueryRow(ctx, `INSERT INTO users (email, password_hash, created_at, password_changed_at)
		VALUES ($1, $2, $3, CASE WHEN $2::text IS NULL THEN NULL ELSE $3::timestamptz END)
		ON CONFLICT (email) DO NOTHING RETURNING `+userColumns, email, hash, s.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("a user with email %q exists: %w", email, ErrConflict)
	}
	return u, err
}

// User returns user id; ErrNotFound when there is none.
func (s *Store) User(ctx context.Context, id string) (User, error) {
	if !validUUID(id) {
		return User{}, fmt.Errorf("tenancy: user %q: %w", id, ErrNotFound)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if err != nil {
		return User{}, translate(fmt.Sprintf("user %q", id), err)
	}
	return u, nil
}

// SetPassword sets the password of user userID (MinPasswordLen to 1024 bytes, else ErrInvalid) and its
// password_changed_at, and ends all the user's browser sessions. An unknown user is ErrNotFound.
func (s *Store) SetPassword(ctx context.Context, userID, password string) error {
	if err := checkPassword(password); err != nil {
		return err
	}
	if !validUUID(userID) {
		return fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return s.inTx(ctx, "set password", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1",
			userID, hash, s.now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("user %q: %w", userID, ErrNotFound)
		}
		_, err = tx.Exec(ctx, "DELETE FROM sessions WHERE user_id = $1", userID)
		return err
	})
}

// SetDisabled disables or re-enables user userID. A disabled user's tokens stop authenticating (at once in
// this Store, within Config.CacheTTL elsewhere for Authenticate; at once everywhere for AuthenticateCluster)
// and their browser sessions are ended. An unknown user is ErrNotFound.
func (s *Store) SetDisabled(ctx context.Context, userID string, disabled bool) error {
	if !validUUID(userID) {
		return fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	err := s.inTx(ctx, "set disabled", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE users SET disabled = $2 WHERE id = $1", userID, disabled)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("user %q: %w", userID, ErrNotFound)
		}
		if disabled {
			_, err = tx.Exec(ctx, "DELETE FROM sessions WHERE user_id = $1", userID)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.forgetUser(userID)
	return nil
}
