package tenancy

import (
	"context"
	"fmt"
	"strings"
	"time"
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
