package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sign-in throttling, across replicas (table login_throttle). Every attempt is counted before the password is
// checked, in one upsert per attempt that increments and returns the counts under the rows' locks, so
// concurrent attempts are each evaluated against the true count; an attempt refused by any count is not
// counted at all, and a successful one is taken back.
//
//   - Per account and source address: FreeFailures consecutive failures, then a growing delay before the next
//     attempt is evaluated (BackoffBase, doubling up to MaxBackoff); a success or an hour without attempts
//     starts over. One address can therefore try an account a few dozen times an hour, and cannot lock its user
//     out from another address.
//   - Per account, from every address: MaxAccountFailures per ThrottleWindow, a ceiling for guessing spread over
//     many addresses, far above what one address can reach.
//   - Per source address, on every account: MaxAddressFailures per ThrottleWindow.
//
// An IPv6 address counts by its /64, which one client usually holds whole.
const (
	ThrottleWindow     = time.Hour
	MaxAccountFailures = 1000 // per account, from all addresses, per window
	MaxAddressFailures = 1000 // per source address, on all accounts, per window
	FreeFailures       = 5    // per account and address before the back-off
	BackoffBase        = time.Second
	MaxBackoff         = 15 * time.Minute // below ThrottleWindow: an address's back-off ends before its row is pruned
)

// ErrThrottled: too many failed sign-ins for this account or address; try later. The error that wraps it is a
// *ThrottledError saying when.
var ErrThrottled = errors.New("tenancy: too many failed sign-ins")

// ThrottledError is a refused sign-in attempt: RetryAfter is how long until one is evaluated again.
type ThrottledError struct {
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrThrottled, e.RetryAfter)
}

func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// RetryAfter is how many seconds (at least 1) to wait after a throttled sign-in err, for a Retry-After header;
// ThrottleWindow's when err does not say.
func RetryAfter(err error) int {
	var te *ThrottledError
	if !errors.As(err, &te) {
		return int(ThrottleWindow.Seconds())
	}
	return max(1, int(math.Ceil(te.RetryAfter.Seconds())))
}

// throttleKeys are the counters of one attempt.
type throttleKeys struct{ pair, account, address string }

func throttleKeysFor(email, source string) throttleKeys {
	addr := throttleAddress(source)
	if len(email) > MaxEmailLen { // not an account; keep the key short enough for its index
		sum := sha256.Sum256([]byte(email))
		email = "sha256:" + hex.EncodeToString(sum[:])
	}
	return throttleKeys{pair: "pair:" + addr + " " + email, account: "account:" + email, address: "address:" + addr}
}

// throttleAddress is the address source counts as: an IPv6 address's /64, an IPv4 address (also IPv4-mapped)
// as itself; anything else as given (cut to 64 bytes).
func throttleAddress(source string) string {
	a, err := netip.ParseAddr(source)
	switch {
	case err != nil:
		return truncate(source, 64)
	case a.Is4() || a.Is4In6():
		return a.Unmap().String()
	}
	return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
}

// pairFailures is a pair's consecutive failures with this attempt: an hour of quiet starts over.
const pairFailures = `CASE WHEN t.last_at <= $5 THEN 1 ELSE t.failures + 1 END`

// claimSQL counts an attempt on its three keys ($1 pair, $2 account, $3 address; $4 now, $5 now - window) and
// returns, for each, whether it counted it: a key refuses while its back-off runs ($6 free failures, $7 base
// and $8 maximum back-off in seconds) or its window's failures reached its limit ($9 account, $10 address).
// Every attempt locks its keys in the same order (pair, account, address), so attempts cannot deadlock.
var claimSQL = `WITH pair AS (
	INSERT INTO login_throttle AS t (key, failures, window_start, last_at, retry_at)
		VALUES ($1, 1, $4, $4, ` + backoffAt("1") + `)
	ON CONFLICT (key) DO UPDATE SET failures = ` + pairFailures + `, last_at = $4,
		retry_at = ` + backoffAt(pairFailures) + `
	WHERE t.retry_at <= $4 OR t.last_at <= $5
	RETURNING 1
), account AS (` + windowUpsert("$2", "$9") + `
), address AS (` + windowUpsert("$3", "$10") + `
)
SELECT (SELECT count(*) FROM pair), (SELECT count(*) FROM account), (SELECT count(*) FROM address)`

// backoffAt is the SQL time before which no attempt is evaluated after failures (an SQL integer expression).
func backoffAt(failures string) string {
	return `$4::timestamptz + make_interval(secs => CASE WHEN ` + failures + ` < $6::int THEN 0
		ELSE least($8::float8, $7::float8 * power(2::float8, least(` + failures + ` - $6::int, 30))) END)`
}

// windowUpsert counts an attempt on key in its window unless the window's failures reached limit.
func windowUpsert(key, limit string) string {
	return `
	INSERT INTO login_throttle AS t (key, failures, window_start, last_at) VALUES (` + key + `, 1, $4, $4)
	ON CONFLICT (key) DO UPDATE SET
		failures = CASE WHEN t.window_start <= $5 THEN 1 ELSE t.failures + 1 END,
		window_start = CASE WHEN t.window_start <= $5 THEN $4 ELSE t.window_start END, last_at = $4
	WHERE t.window_start <= $5 OR t.failures < ` + limit + `::int
	RETURNING 1`
}

// claimAttempt counts a sign-in attempt on its keys before the password is checked; a *ThrottledError (counting
// nothing) when any key refuses.
func (s *Store) claimAttempt(ctx context.Context, k throttleKeys, now time.Time) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate("sign in", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	var counted [3]int
	err = tx.QueryRow(ctx, claimSQL, k.pair, k.account, k.address, now, now.Add(-ThrottleWindow), FreeFailures,
		BackoffBase.Seconds(), MaxBackoff.Seconds(), MaxAccountFailures, MaxAddressFailures).
		Scan(&counted[0], &counted[1], &counted[2])
	if err != nil {
		return translate("sign in", err)
	}
	if counted == [3]int{1, 1, 1} {
		return translate("sign in", tx.Commit(ctx))
	}
	if err := tx.Rollback(ctx); err != nil {
		return translate("sign in", err)
	}
	wait, err := s.throttledFor(ctx, k, now)
	if err != nil {
		return err
	}
	return fmt.Errorf("tenancy: sign-in from %s: %w", k.address, &ThrottledError{RetryAfter: wait})
}

// throttledFor is how long until none of k's keys refuses an attempt.
func (s *Store) throttledFor(ctx context.Context, k throttleKeys, now time.Time) (time.Duration, error) {
	rows, _ := s.pool.Query(ctx, `SELECT key, failures, window_start, retry_at FROM login_throttle
		WHERE key IN ($1, $2, $3)`, k.pair, k.account, k.address)
	var wait time.Duration
	var key string
	var failures int
	var windowStart time.Time
	var retryAt *time.Time
	_, err := pgx.ForEachRow(rows, []any{&key, &failures, &windowStart, &retryAt}, func() error {
		limit := MaxAccountFailures
		switch {
		case key == k.pair && retryAt != nil:
			wait = max(wait, retryAt.Sub(now))
			return nil
		case key == k.address:
			limit = MaxAddressFailures
		}
		if failures >= limit {
			wait = max(wait, windowStart.Add(ThrottleWindow).Sub(now))
		}
		return nil
	})
	if err != nil {
		return 0, translate("sign in", err)
	}
	return max(wait, time.Second), nil
}

// forgiveAttempt takes back a successful attempt's count: the pair's back-off ends, the account's and the
// address's counts drop by the one attempt.
func (s *Store) forgiveAttempt(ctx context.Context, k throttleKeys) {
	_, err := s.pool.Exec(ctx, `WITH pair AS (DELETE FROM login_throttle WHERE key = $1)
		UPDATE login_throttle SET failures = greatest(failures - 1, 0) WHERE key IN ($2, $3)`, k.pair, k.account, k.address)
	if err != nil {
		s.log.Warn("taking back a successful sign-in's count failed", "err", translate("sign in", err))
	}
}

// pruneThrottle deletes a batch of counters whose last attempt is older than the window (after a failure, so
// the table stays about as large as an hour of failures).
func (s *Store) pruneThrottle(ctx context.Context, now time.Time) {
	_, err := s.pool.Exec(ctx, `DELETE FROM login_throttle WHERE key IN (SELECT key FROM login_throttle
		WHERE last_at <= $1 ORDER BY last_at LIMIT 100 FOR UPDATE SKIP LOCKED)`, now.Add(-ThrottleWindow))
	if err != nil {
		s.log.Warn("pruning sign-in counters failed", "err", translate("sign in", err))
	}
}
