package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Browser sessions and sign-in. A session id is 32 random bytes (base64url in the cookie); only its SHA-256 is
// stored. The session's CSRF token is derived from the id (SHA-256 of a label and the id), so the server can
// check it without keeping it while a cross-site page, which cannot read the cookie, cannot compute it.

// Session timeouts.
const (
	SessionIdle     = 12 * time.Hour     // ends after this long without a request
	SessionAbsolute = 7 * 24 * time.Hour // ends this long after sign-in, whatever the activity
	sessionTouch    = time.Minute        // last_seen_at is written at most this often
)

// Session is a signed-in browser.
type Session struct {
	UserID    string
	Email     string
	CreatedAt time.Time
	LastSeen  time.Time
	ExpiresAt time.Time // absolute expiry
	// CSRF is the token cookie-authenticated state changes must carry.
	CSRF string
}

// dummyHash makes a sign-in for an unknown email cost the same argon2id work as a wrong password. It is made
// on first use, not at package init: every process of the binary (agents, the runtime's helpers started per
// container and exec probe) would otherwise pay the argon2id work just to start.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("not a password anyone has")
	if err != nil {
		panic(err)
	}
	return h
})

// SignIn checks email and password and starts a session. An unknown email, a wrong password, a user without a
// password and a disabled user all fail the same way (ErrUnauthenticated, after the same password work). Every
// attempt is counted first (throttle.go): one refused by the back-off of this account and source address, or
// by the account's or the address's limit, fails with a *ThrottledError (ErrThrottled) before any check. It
// returns the session id for the cookie, shown only here.
func (s *Store) SignIn(ctx context.Context, email, password, source, userAgent string) (string, Session, error) {
	email = NormalizeEmail(email)
	now := s.now()
	keys := throttleKeysFor(email, source)
	if err := s.claimAttempt(ctx, keys, now); err != nil {
		return "", Session{}, err
	}
	var userID, hash string
	var disabled bool
	var hashPtr *string
	err := s.pool.QueryRow(ctx, `SELECT id::text, password_hash, disabled FROM users WHERE email = $1`, email).
		Scan(&userID, &hashPtr, &disabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", Session{}, translate("sign in", err)
	}
	hash = dummyHash()
	if hashPtr != nil {
		hash = *hashPtr
	}
	ok, _, verr := VerifyPassword(hash, password)
	if verr != nil || !ok || hashPtr == nil || disabled || userID == "" {
		s.pruneThrottle(ctx, now) // the attempt stays counted
		return "", Session{}, fmt.Errorf("tenancy: sign-in of %q: %w", email, ErrUnauthenticated)
	}
	s.forgiveAttempt(ctx, keys)
	return s.startSession(ctx, userID, email, source, userAgent, now)
}

func (s *Store) startSession(ctx context.Context, userID, email, source, userAgent string, now time.Time) (string, Session, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Session{}, fmt.Errorf("tenancy: session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	sess := Session{UserID: userID, Email: email, CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(SessionAbsolute),
		CSRF: csrfFor(id)}
	idHash, csrfHash := sha256.Sum256([]byte(id)), sha256.Sum256([]byte(sess.CSRF))
	_, err := s.pool.Exec(ctx, `INSERT INTO sessions (id_hash, user_id, created_at, last_seen_at, expires_at,
		csrf_hash, user_agent, source) VALUES ($1, $2, $3, $3, $4, $5, $6, $7)`,
		idHash[:], userID, now, sess.ExpiresAt, csrfHash[:], truncate(userAgent, 512), truncate(source, 128))
	if err != nil {
		return "", Session{}, translate("start session", err)
	}
	return id, sess, nil
}

// csrfFor derives a session's CSRF token from its id.
func csrfFor(id string) string {
	sum := sha256.Sum256([]byte("wheelhouse csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Session returns the live session with id (from the cookie): ErrUnauthenticated when it does not exist, has
// been idle for SessionIdle, is past its absolute expiry, or its user is disabled. It records the activity (at
// most once a minute).
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	if id == "" || len(id) > 64 {
		return Session{}, fmt.Errorf("tenancy: malformed session id: %w", ErrUnauthenticated)
	}
	h := sha256.Sum256([]byte(id))
	now := s.now()
	var sess Session
	var disabled bool
	err := s.pool.QueryRow(ctx, `SELECT s.user_id::text, u.email, u.disabled, s.created_at, s.last_seen_at, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = $1`, h[:]).Scan(
		&sess.UserID, &sess.Email, &disabled, &sess.CreatedAt, &sess.LastSeen, &sess.ExpiresAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Session{}, fmt.Errorf("tenancy: unknown session: %w", ErrUnauthenticated)
	case err != nil:
		return Session{}, translate("session", err)
	case disabled || !now.Before(sess.ExpiresAt) || !now.Before(sess.LastSeen.Add(SessionIdle)):
		_, _ = s.pool.Exec(ctx, "DELETE FROM sessions WHERE id_hash = $1", h[:])
		return Session{}, fmt.Errorf("tenancy: session ended: %w", ErrUnauthenticated)
	}
	if now.Sub(sess.LastSeen) >= sessionTouch {
		if _, err := s.pool.Exec(ctx, "UPDATE sessions SET last_seen_at = $2 WHERE id_hash = $1", h[:], now); err != nil {
			s.log.Warn("recording session activity failed", "err", translate("session", err))
		}
		sess.LastSeen = now
	}
	sess.CSRF = csrfFor(id)
	return sess, nil
}

// EndSession signs a session out (server-side: the id stops working everywhere). Ending an unknown session
// does nothing.
func (s *Store) EndSession(ctx context.Context, id string) error {
	h := sha256.Sum256([]byte(id))
	_, err := s.pool.Exec(ctx, "DELETE FROM sessions WHERE id_hash = $1", h[:])
	return translate("end session", err)
}

// ChangePassword checks the user's current password and sets a new one; every session of the user ends (as
// SetPassword does). A wrong current password is ErrUnauthenticated.
func (s *Store) ChangePassword(ctx context.Context, userID, current, next string) error {
	if !validUUID(userID) {
		return fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	var hash *string
	err := s.pool.QueryRow(ctx, "SELECT password_hash FROM users WHERE id = $1", userID).Scan(&hash)
	if err != nil {
		return translate("change password", err)
	}
	if hash == nil {
		return fmt.Errorf("tenancy: the user has no password: %w", ErrUnauthenticated)
	}
	if ok, _, err := VerifyPassword(*hash, current); err != nil || !ok {
		return fmt.Errorf("tenancy: wrong current password: %w", ErrUnauthenticated)
	}
	return s.SetPassword(ctx, userID, next)
}
