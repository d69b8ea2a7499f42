package tenancy

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

const (
	rightPassword = "the right password"
	victim        = "tia@example.com"
)

// throttleStore is a Store with user victim, on a fake clock.
func throttleStore(t *testing.T) (*testDB, *fakeClock, *Store) {
	t.Helper()
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock, func(c *Config) { c.MaxConns = 8 })
	if _, err := s.CreateUser(t.Context(), victim, rightPassword); err != nil {
		t.Fatal(err)
	}
	return db, clock, s
}

func retryAfterOf(t *testing.T, err error) time.Duration {
	t.Helper()
	var te *ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, ErrThrottled) {
		t.Fatalf("error = %v, want a *ThrottledError", err)
	}
	return te.RetryAfter
}

// TestSignInBackoffGrows: FreeFailures wrong passwords from one address, then each attempt from it waits twice as
// long as the one before (1 s, 2 s, 4 s, ... up to MaxBackoff), the right password included; other addresses are
// not slowed, and a success or an hour of quiet starts the address over.
func TestSignInBackoffGrows(t *testing.T) {
	_, clock, s := throttleStore(t)
	ctx := t.Context()
	const attacker = "192.0.2.66"
	signIn := func(password, source string) error {
		_, _, err := s.SignIn(ctx, victim, password, source, "test")
		return err
	}
	for range FreeFailures {
		wantErr(t, signIn("guess", attacker), ErrUnauthenticated)
	}
	var waits []time.Duration
	for range 14 {
		wait := retryAfterOf(t, signIn("guess", attacker))
		if wait2 := retryAfterOf(t, signIn(rightPassword, attacker)); wait2 != wait {
			t.Fatalf("the right password during the back-off: wait %s, then %s", wait, wait2)
		}
		waits = append(waits, wait)
		clock.Advance(wait - time.Microsecond)
		retryAfterOf(t, signIn("guess", attacker)) // not a moment early
		clock.Advance(time.Microsecond)
		wantErr(t, signIn("guess", attacker), ErrUnauthenticated) // evaluated once the wait is over
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900, 900}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if err := signIn(rightPassword, "198.51.100.7"); err != nil {
		t.Fatalf("the user from their own address during the attacker's back-off: %v", err)
	}

	// A success from the address ends its back-off.
	clock.Advance(MaxBackoff)
	if err := signIn(rightPassword, attacker); err != nil {
		t.Fatalf("the right password after the back-off: %v", err)
	}
	for range FreeFailures {
		wantErr(t, signIn("guess", attacker), ErrUnauthenticated)
	}
	retryAfterOf(t, signIn("guess", attacker))
	// So does an hour without attempts.
	clock.Advance(ThrottleWindow)
	for range FreeFailures {
		wantErr(t, signIn("guess", attacker), ErrUnauthenticated)
	}
}

// TestSignInAttackerCannotLockOutTheUser: an attacker guessing from one address (any of its IPv6 /64) as fast as
// the back-off lets it, for three hours, never stops the user signing in from theirs, and gets a few dozen
// guesses an hour, far from the account's limit.
func TestSignInAttackerCannotLockOutTheUser(t *testing.T) {
	db, clock, s := throttleStore(t)
	ctx := t.Context()
	start := clock.Now()
	guesses := 0
	for i := 0; clock.Now().Sub(start) < 3*ThrottleWindow; i++ {
		attacker := fmt.Sprintf("2001:db8:66:1::%x", i) // a new address of the same /64 every time
		_, _, err := s.SignIn(ctx, victim, "guess", attacker, "test")
		if errors.Is(err, ErrUnauthenticated) {
			guesses++
		} else {
			clock.Advance(retryAfterOf(t, err))
		}
		if i%10 == 0 {
			if _, _, err := s.SignIn(ctx, victim, rightPassword, "198.51.100.7", "test"); err != nil {
				t.Fatalf("after %d guesses in %s the user cannot sign in from their address: %v", guesses, clock.Now().Sub(start), err)
			}
		}
	}
	if guesses > 3*30 {
		t.Errorf("one address made %d guesses in three hours", guesses)
	}
	var failures int
	if err := db.conn.QueryRow(ctx, "SELECT failures FROM login_throttle WHERE key = 'account:'||$1", victim).Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if failures >= MaxAccountFailures/10 {
		t.Errorf("the account counts %d failures: one address came near its limit", failures)
	}
}

// concurrently runs n sign-ins at once (attempt i from source(i) as email(i), wrong password) and counts the
// evaluated (ErrUnauthenticated) and the throttled.
func concurrently(t *testing.T, s *Store, n int, email, source func(i int) string) (evaluated, throttled int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, _, err := s.SignIn(t.Context(), email(i), "guess", source(i), "test")
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		switch {
		case errors.Is(err, ErrUnauthenticated):
			evaluated++
		case errors.Is(err, ErrThrottled):
			throttled++
		default:
			t.Errorf("sign-in: %v", err)
		}
	}
	return evaluated, throttled
}

// TestSignInConcurrentAttemptsNeverExceedTheLimits: 300 attempts at once are each evaluated against the true
// count, for each kind of limit: exactly as many are evaluated as the limit has room for (the back-off's free
// failures; 20 below the account's and the address's limits), the rest are refused without a password check.
func TestSignInConcurrentAttemptsNeverExceedTheLimits(t *testing.T) {
	const n = 300
	const room = 20 // failures left under the limit (each evaluated attempt costs an argon2id hash)
	fixed := func(v string) func(int) string { return func(int) string { return v } }
	many := func(format string) func(int) string {
		return func(i int) string { return fmt.Sprintf(format, i/250, i%250) }
	}

	t.Run("account and address", func(t *testing.T) {
		_, _, s := throttleStore(t)
		ev, th := concurrently(t, s, n, fixed(victim), fixed("192.0.2.66"))
		if ev != FreeFailures || th != n-FreeFailures {
			t.Errorf("%d evaluated, %d throttled; want %d and %d", ev, th, FreeFailures, n-FreeFailures)
		}
	})
	t.Run("account", func(t *testing.T) {
		db, clock, s := throttleStore(t)
		db.exec(t, `INSERT INTO login_throttle (key, failures, window_start, last_at) VALUES ('account:'||$1, $2, $3, $3)`,
			victim, MaxAccountFailures-room, clock.Now().Add(-time.Minute))
		ev, th := concurrently(t, s, n, fixed(victim), many("10.1.%d.%d"))
		if ev != room || th != n-room {
			t.Errorf("%d evaluated, %d throttled; want %d and %d", ev, th, room, n-room)
		}
		var failures int
		if err := db.conn.QueryRow(t.Context(), "SELECT failures FROM login_throttle WHERE key = 'account:'||$1", victim).Scan(&failures); err != nil || failures != MaxAccountFailures {
			t.Errorf("the account counts %d failures (%v), want %d", failures, err, MaxAccountFailures)
		}
		_, _, err := s.SignIn(t.Context(), victim, rightPassword, "198.51.100.7", "test")
		if wait := retryAfterOf(t, err); wait != ThrottleWindow-time.Minute {
			t.Errorf("the account's limit reached: retry after %s, want the rest of its window", wait)
		}
	})
	t.Run("address", func(t *testing.T) {
		db, clock, s := throttleStore(t)
		db.exec(t, `INSERT INTO login_throttle (key, failures, window_start, last_at) VALUES ('address:192.0.2.66', $1, $2, $2)`,
			MaxAddressFailures-room, clock.Now())
		ev, th := concurrently(t, s, n, many("user-%d-%d@example.com"), fixed("192.0.2.66"))
		if ev != room || th != n-room {
			t.Errorf("%d evaluated, %d throttled; want %d and %d", ev, th, room, n-room)
		}
	})
}

// TestSignInCountsOnlyFailures: successful sign-ins leave no count behind, and counters older than the window
// are deleted as failures come in.
func TestSignInCountsOnlyFailures(t *testing.T) {
	db, clock, s := throttleStore(t)
	ctx := t.Context()
	for range 2 * FreeFailures {
		if _, _, err := s.SignIn(ctx, victim, rightPassword, "192.0.2.1", "test"); err != nil {
			t.Fatal(err)
		}
	}
	var sum int
	if err := db.conn.QueryRow(ctx, "SELECT coalesce(sum(failures), 0) FROM login_throttle").Scan(&sum); err != nil || sum != 0 {
		t.Fatalf("after successful sign-ins the counters hold %d failures (%v)", sum, err)
	}
	_, _, _ = s.SignIn(ctx, victim, "guess", "192.0.2.1", "test")
	clock.Advance(ThrottleWindow + time.Second)
	_, _, _ = s.SignIn(ctx, "someone@example.com", "guess", "192.0.2.2", "test")
	if n := db.count(t, "login_throttle"); n != 3 {
		t.Errorf("%d counters after a window without attempts, want the last failure's 3", n)
	}
}

func TestThrottleAddress(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":            "192.0.2.1",
		"::ffff:192.0.2.1":     "192.0.2.1",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::/64",
		"@":                    "@",
	} {
		if got := throttleAddress(in); got != want {
			t.Errorf("throttleAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
