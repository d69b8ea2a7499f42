package tenancy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testCAHash = func() string { h := sha256.Sum256([]byte("a CA certificate")); return hex.EncodeToString(h[:]) }()

// joinFixture: the bootstrapped default cluster, a Store on a fake clock.
func joinFixture(t *testing.T) (*testDB, *Store, *fakeClock, BootstrapResult) {
	t.Helper()
	db := newTestDB(t)
	clock := newFakeClock()
	s, res := withAdminToken(t, db, clock)
	return db, s, clock, res
}

func mustJoinToken(t *testing.T, s *Store, cluster string, expires time.Time, maxUses int) (string, JoinToken) {
	t.Helper()
	token, jt, err := s.CreateJoinToken(t.Context(), cluster, "", "", expires, maxUses, testCAHash)
	if err != nil {
		t.Fatalf("CreateJoinToken: %v", err)
	}
	return token, jt
}

func TestParseJoinToken(t *testing.T) {
	secret := strings.Repeat("aZ9", 8)[:22]
	for _, tc := range []struct{ token, ca, id, secret string }{
		{"K10" + testCAHash + "::abc123." + secret, testCAHash, "abc123", secret},
		{"K10::abc123." + secret, "", "abc123", secret},
		{"K10::000000." + strings.Repeat("x", maxJoinSecretLen), "", "000000", strings.Repeat("x", maxJoinSecretLen)},
	} {
		ca, id, sec, err := ParseJoinToken(tc.token)
		if err != nil || ca != tc.ca || id != tc.id || sec != tc.secret {
			t.Errorf("ParseJoinToken(%q) = %q, %q, %q, %v", tc.token, ca, id, sec, err)
		}
	}
	for name, token := range map[string]string{
		"empty":            "",
		"no prefix":        testCAHash + "::abc123." + secret,
		"k10 lower":        "k10" + testCAHash + "::abc123." + secret,
		"no separator":     "K10" + testCAHash + "abc123." + secret,
		"short hash":       "K10" + testCAHash[1:] + "::abc123." + secret,
		"upper-case hash":  "K10" + strings.ToUpper(testCAHash) + "::abc123." + secret,
		"non-hex hash":     "K10" + strings.Repeat("g", 64) + "::abc123." + secret,
		"no dot":           "K10::abc123" + secret,
		"short id":         "K10::abc12." + secret,
		"long id":          "K10::abc1234." + secret,
		"upper-case id":    "K10::ABC123." + secret,
		"short secret":     "K10::abc123." + secret[1:],
		"long secret":      "K10::abc123." + strings.Repeat("x", maxJoinSecretLen+1),
		"bad secret char":  "K10::abc123." + secret[1:] + "-",
		"two dots":         "K10::abc123." + secret + ".x",
		"username:pw form": "K10" + testCAHash + "::server:" + secret,
		"API token":        newToken(),
	} {
		_, _, _, err := ParseJoinToken(token)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: ParseJoinToken(%q) = %v, want ErrInvalid", name, token, err)
		}
	}
}

func TestNewJoinID(t *testing.T) {
	seen := map[string]bool{}
	chars := map[rune]bool{}
	for range 2000 {
		id := newJoinID()
		if !validJoinID(id) || seen[id] {
			t.Fatalf("newJoinID() = %q: malformed or repeated", id)
		}
		seen[id] = true
		for _, c := range id {
			chars[c] = true
		}
	}
	if len(chars) != len(joinIDAlphabet) {
		t.Errorf("%d of %d characters drawn in 12,000", len(chars), len(joinIDAlphabet))
	}
}

func TestCreateJoinToken(t *testing.T) {
	db, s, clock, res := joinFixture(t)
	ctx := t.Context()
	expires := clock.Now().Add(time.Hour)
	token, jt, err := s.CreateJoinToken(ctx, DefaultCluster, res.AdminID, "rack 4", expires, 3, strings.ToUpper(testCAHash))
	if err != nil {
		t.Fatal(err)
	}
	ca, id, secret, err := ParseJoinToken(token)
	if err != nil || ca != testCAHash || id != jt.ID || len(secret) != joinSecretLen ||
		token != JoinTokenPrefix+testCAHash+"::"+jt.ID+"."+secret {
		t.Errorf("token %q parses as %q, %q, %q, %v", token, ca, id, secret, err)
	}
	want := JoinToken{ID: jt.ID, ClusterID: DefaultCluster, Description: "rack 4", CreatedBy: res.AdminID, MaxUses: 3}
	if !jt.CreatedAt.Equal(clock.Now()) || !jt.ExpiresAt.Equal(expires) {
		t.Errorf("times: %+v", jt)
	}
	jt.CreatedAt, jt.ExpiresAt = time.Time{}, time.Time{}
	if jt != want {
		t.Errorf("JoinToken = %+v, want %+v", jt, want)
	}
	var stored []byte
	if err := db.conn.QueryRow(ctx, "SELECT secret_hash FROM join_tokens WHERE id = $1", id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256([]byte(secret)); !bytes.Equal(stored, h[:]) {
		t.Error("the stored hash is not the secret's SHA-256")
	}

	// No CA, no creator, no expiry, unlimited.
	token, jt, err = s.CreateJoinToken(ctx, DefaultCluster, "", "", time.Time{}, 0, "")
	if err != nil || !strings.HasPrefix(token, "K10::") || jt.CreatedBy != "" || !jt.ExpiresAt.IsZero() || jt.MaxUses != 0 {
		t.Errorf("plain join token %q: %+v, %v", token, jt, err)
	}
	if _, _, _, err := ParseJoinToken(token); err != nil {
		t.Errorf("plain join token does not parse: %v", err)
	}

	for _, tc := range []struct {
		name, cluster, by, desc string
		expires                 time.Time
		maxUses                 int
		ca                      string
		want                    error
	}{
		{"short CA hash", DefaultCluster, "", "", time.Time{}, 0, testCAHash[2:], ErrInvalid},
		{"non-hex CA hash", DefaultCluster, "", "", time.Time{}, 0, strings.Repeat("z", 64), ErrInvalid},
		{"long description", DefaultCluster, "", strings.Repeat("d", MaxDescriptionLen+1), time.Time{}, 0, "", ErrInvalid},
		{"control character", DefaultCluster, "", "a\x1bb", time.Time{}, 0, "", ErrInvalid},
		{"expired", DefaultCluster, "", "", clock.Now(), 0, "", ErrInvalid},
		{"negative max uses", DefaultCluster, "", "", time.Time{}, -1, "", ErrInvalid},
		{"malformed creator", DefaultCluster, "admin", "", time.Time{}, 0, "", ErrInvalid},
		{"unknown creator", DefaultCluster, "00000000-0000-0000-0000-000000000000", "", time.Time{}, 0, "", ErrInvalid},
		{"unknown cluster", "nope", "", "", time.Time{}, 0, "", ErrNotFound},
		{"malformed cluster", "Nope", "", "", time.Time{}, 0, "", ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateJoinToken(ctx, tc.cluster, tc.by, tc.desc, tc.expires, tc.maxUses, tc.ca)
			wantErr(t, err, tc.want)
		})
	}
	if n := db.count(t, "join_tokens"); n != 2 {
		t.Errorf("%d join tokens, want 2", n)
	}
}

func TestJoinTokens(t *testing.T) {
	_, s, clock, _ := joinFixture(t)
	ctx := t.Context()
	var ids []string
	for range 3 {
		_, jt := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
		ids = append(ids, jt.ID)
		clock.Advance(time.Second)
	}
	jts, err := s.JoinTokens(ctx, DefaultCluster)
	if err != nil || len(jts) != 3 {
		t.Fatalf("JoinTokens = %+v, %v", jts, err)
	}
	for i, jt := range jts {
		if jt.ID != ids[i] {
			t.Errorf("token %d is %s, want %s (oldest first)", i, jt.ID, ids[i])
		}
	}
	if _, err := s.CreateCluster(ctx, DefaultTeam, "empty", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if jts, err := s.JoinTokens(ctx, "empty"); err != nil || jts == nil || len(jts) != 0 {
		t.Errorf("JoinTokens(empty) = %v, %v", jts, err)
	}
	for _, c := range []string{"nope", "NOPE"} {
		_, err := s.JoinTokens(ctx, c)
		wantErr(t, err, ErrNotFound)
	}
}

func TestRevokeJoinToken(t *testing.T) {
	_, s, clock, _ := joinFixture(t)
	ctx := t.Context()
	token, jt := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
	if err := s.RevokeJoinToken(ctx, DefaultCluster, jt.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.UseJoinToken(ctx, token)
	wantErr(t, err, ErrUnauthenticated)
	first := clock.Now()
	clock.Advance(time.Hour)
	if err := s.RevokeJoinToken(ctx, DefaultCluster, jt.ID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if jts, _ := s.JoinTokens(ctx, DefaultCluster); len(jts) != 1 || !jts[0].RevokedAt.Equal(first) {
		t.Errorf("after revoking twice: %+v", jts)
	}
	if _, err := s.CreateCluster(ctx, DefaultTeam, "other", "", "", ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.RevokeJoinToken(ctx, "other", jt.ID), ErrNotFound)
	wantErr(t, s.RevokeJoinToken(ctx, DefaultCluster, "zzzzzz"), ErrNotFound)
	wantErr(t, s.RevokeJoinToken(ctx, DefaultCluster, "ABCDEF"), ErrNotFound)
	wantErr(t, s.RevokeJoinToken(ctx, "Bad", jt.ID), ErrNotFound)
}

func TestUseJoinToken(t *testing.T) {
	db, s, clock, _ := joinFixture(t)
	ctx := t.Context()
	token, created := mustJoinToken(t, s, DefaultCluster, clock.Now().Add(time.Hour), 2)
	clock.Advance(time.Minute)
	jt, err := s.UseJoinToken(ctx, token)
	if err != nil || jt.ID != created.ID || jt.ClusterID != DefaultCluster || jt.Uses != 1 || !jt.LastUsedAt.Equal(clock.Now()) {
		t.Fatalf("UseJoinToken = %+v, %v", jt, err)
	}
	clock.Advance(time.Minute)
	if jt, err := s.UseJoinToken(ctx, token); err != nil || jt.Uses != 2 || !jt.LastUsedAt.Equal(clock.Now()) {
		t.Fatalf("second use = %+v, %v", jt, err)
	}
	_, err = s.UseJoinToken(ctx, token) // used up
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "used up") {
		t.Errorf("third use of a two-use token: %v", err)
	}

	_, id, secret, _ := ParseJoinToken(token)
	wrongSecret := "K10" + testCAHash + "::" + id + "." + strings.Repeat("x", len(secret))
	otherCA := "K10::" + id + "." + secret
	unlimited, _ := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
	expiring, _ := mustJoinToken(t, s, DefaultCluster, clock.Now().Add(time.Minute), 0)
	revoked, rjt := mustJoinToken(t, s, DefaultCluster, time.Time{}, 0)
	if err := s.RevokeJoinToken(ctx, DefaultCluster, rjt.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCluster(ctx, DefaultTeam, "doomed", "", "", ""); err != nil {
		t.Fatal(err)
	}
	doomed, _ := mustJoinToken(t, s, "doomed", time.Time{}, 0)
	if err := s.DeleteCluster(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // expiring has expired
	for _, tc := range []struct{ name, token, why string }{
		{"malformed", "K10::nope", "malformed"},
		{"empty", "", "malformed"},
		{"unknown", "K10::zzzzzz." + secret, "unknown"},
		{"wrong secret", wrongSecret, "wrong secret"},
		{"expired", expiring, "expired"},
		{"revoked", revoked, "revoked"},
		{"deleted cluster", doomed, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.UseJoinToken(ctx, tc.token)
			wantErr(t, err, ErrUnauthenticated)
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q does not say %q", err, tc.why)
			}
		})
	}
	for range 5 {
		if _, err := s.UseJoinToken(ctx, unlimited); err != nil {
			t.Fatalf("an unlimited token: %v", err)
		}
	}
	// The CA hash is the node's business: the same id and secret with another pin still count (and fail here
	// only because the token is used up).
	_, err = s.UseJoinToken(ctx, otherCA)
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "used up") {
		t.Errorf("the token without its CA pin: %v", err)
	}
	var uses int
	if err := db.conn.QueryRow(ctx, "SELECT uses FROM join_tokens WHERE id = $1", id).Scan(&uses); err != nil || uses != 2 {
		t.Errorf("uses = %d, %v; want 2 (failures are not counted)", uses, err)
	}

	s.Close()
	_, err = s.UseJoinToken(ctx, unlimited)
	wantErr(t, err, ErrClosed) // a database failure is not ErrUnauthenticated
}

// TestUseJoinTokenConcurrent: racing uses from several Stores never exceed MaxUses.
func TestUseJoinTokenConcurrent(t *testing.T) {
	db, s, _, _ := joinFixture(t)
	stores := []*Store{s, db.open(t, nil), db.open(t, nil), db.open(t, nil)}
	const maxUses, racers = 5, 48
	for round := range 3 {
		token, jt := mustJoinToken(t, s, DefaultCluster, time.Time{}, maxUses)
		var ok atomic.Int32
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				got, err := stores[i%len(stores)].UseJoinToken(t.Context(), token)
				switch {
				case err == nil:
					ok.Add(1)
					if got.Uses < 1 || got.Uses > maxUses {
						t.Errorf("a use returned Uses = %d", got.Uses)
					}
				case !errors.Is(err, ErrUnauthenticated):
					t.Errorf("UseJoinToken: %v", err)
				}
			})
		}
		wg.Wait()
		var uses int
		if err := db.conn.QueryRow(t.Context(), "SELECT uses FROM join_tokens WHERE id = $1", jt.ID).Scan(&uses); err != nil {
			t.Fatal(err)
		}
		if ok.Load() != maxUses || uses != maxUses {
			t.Errorf("round %d: %d successful uses, %d counted; want %d", round, ok.Load(), uses, maxUses)
		}
	}
}
