package tenancy

import (
	"strings"
	"testing"
	"time"
)

// withAdminToken bootstraps db and returns a Store on clock and the admin's generated token.
func withAdminToken(t *testing.T, db *testDB, clock *fakeClock) (*Store, BootstrapResult) {
	t.Helper()
	s := db.open(t, clock)
	return s, bootstrap(t, s, BootstrapConfig{})
}

// typo changes one character of tok's random part.
func typo(tok string) string {
	b := []byte(tok)
	i := len(TokenPrefix) + 3
	if b[i] == 'a' {
		b[i] = 'b'
	} else {
		b[i] = 'a'
	}
	return string(b)
}

func TestAuthenticateRejects(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s, res := withAdminToken(t, db, clock)
	revoked, tok, err := s.CreateToken(t.Context(), res.AdminID, "revoked", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	expiring, _, err := s.CreateToken(t.Context(), res.AdminID, "expiring", clock.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var bob string
	if err := db.conn.QueryRow(t.Context(), "INSERT INTO users (email, disabled) VALUES ('bob@example.com', true) RETURNING id::text").Scan(&bob); err != nil {
		t.Fatal(err)
	}
	disabled, _, err := s.CreateToken(t.Context(), bob, "bob", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the expiring token has expired; nothing was cached
	for _, tc := range []struct{ name, token string }{
		{"empty", ""},
		{"short", "abc"},
		{"too long", strings.Repeat("x", maxTokenLen+1)},
		{"typo", typo(res.Token)},
		{"truncated", res.Token[:len(res.Token)-1]},
		{"unknown minted token", newToken()},
		{"unknown custom token", "not-a-token-of-anyone"},
		{"revoked", revoked},
		{"expired", expiring},
		{"disabled user", disabled},
		{"with bearer prefix", "Bearer " + res.Token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Authenticate(t.Context(), tc.token)
			if p != nil {
				t.Errorf("Authenticate returned a principal %+v", p)
			}
			wantErr(t, err, ErrUnauthenticated)
		})
	}
	mustAuth(t, s, res.Token)
}

// TestMalformedTokenNeedsNoDatabase: a typo is rejected by its checksum, so even a closed Store rejects it as
// unauthenticated, while a well-formed token needs the database.
func TestMalformedTokenNeedsNoDatabase(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, nil)
	s.Close()
	_, err := s.Authenticate(t.Context(), typo(res.Token))
	wantErr(t, err, ErrUnauthenticated)
	_, err = s.Authenticate(t.Context(), res.Token)
	wantErr(t, err, ErrClosed)
}

// TestAuthenticateReadsTheDatabase: by default nothing is cached, so a revocation by another process applies
// to the very next call.
func TestAuthenticateReadsTheDatabase(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	p := mustAuth(t, s, res.Token)
	db.exec(t, "UPDATE api_tokens SET revoked_at = now() WHERE id = $1", p.TokenID)
	_, err := s.Authenticate(t.Context(), res.Token)
	wantErr(t, err, ErrUnauthenticated)
}

func TestAuthenticateCache(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock, func(c *Config) { c.TokenCacheTTL = 10 * time.Second })
	res := bootstrap(t, s, BootstrapConfig{})
	p := mustAuth(t, s, res.Token)

	// Revoked by another replica: the cached principal stays valid until the TTL passes.
	db.exec(t, "UPDATE api_tokens SET revoked_at = now() WHERE id = $1", p.TokenID)
	clock.Advance(9 * time.Second)
	mustAuth(t, s, res.Token)
	clock.Advance(time.Second)
	_, err := s.Authenticate(t.Context(), res.Token)
	wantErr(t, err, ErrUnauthenticated)

	// A cache hit needs no database at all.
	tok, _, err := s.CreateToken(t.Context(), res.AdminID, "cached", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, tok)
	s.Close()
	mustAuth(t, s, tok)
}

func TestRevokeTokenTakesEffectAtOnce(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	p := mustAuth(t, s, res.Token)
	if err := s.RevokeToken(t.Context(), p.TokenID); err != nil {
		t.Fatal(err)
	}
	_, err := s.Authenticate(t.Context(), res.Token)
	wantErr(t, err, ErrUnauthenticated)
	if err := s.RevokeToken(t.Context(), p.TokenID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	wantErr(t, s.RevokeToken(t.Context(), "00000000-0000-0000-0000-000000000000"), ErrNotFound)
	wantErr(t, s.RevokeToken(t.Context(), "nope"), ErrNotFound)
	toks, err := s.Tokens(t.Context(), res.AdminID)
	if err != nil || len(toks) != 1 || toks[0].RevokedAt.IsZero() || toks[0].Name != BootstrapTokenName {
		t.Errorf("Tokens = %+v, %v; want the revoked bootstrap token", toks, err)
	}
}

func TestTokenExpiry(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s, res := withAdminToken(t, db, clock)
	tok, info, err := s.CreateToken(t.Context(), res.AdminID, "ci", clock.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !info.ExpiresAt.Equal(clock.Now().Add(time.Hour)) || info.Prefix != tok[:8] || info.ID == "" {
		t.Errorf("CreateToken returned %+v", info)
	}
	mustAuth(t, s, tok)
	clock.Advance(time.Hour) // cached, but expired
	_, err = s.Authenticate(t.Context(), tok)
	wantErr(t, err, ErrUnauthenticated)
	_, _, err = s.CreateToken(t.Context(), res.AdminID, "late", clock.Now())
	wantErr(t, err, ErrInvalid)
}

func TestCreateTokenErrors(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, nil)
	for _, tc := range []struct {
		name, user, token string
		want              error
	}{
		{"unknown user", "00000000-0000-0000-0000-000000000000", "x", ErrNotFound},
		{"not a user id", "admin", "x", ErrNotFound},
		{"empty name", res.AdminID, "", ErrInvalid},
		{"long name", res.AdminID, strings.Repeat("n", maxTokenNameLen+1), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateToken(t.Context(), tc.user, tc.token, time.Time{})
			wantErr(t, err, tc.want)
		})
	}
}

func TestLastUsedAt(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s, res := withAdminToken(t, db, clock)
	lastUsed := func() time.Time {
		t.Helper()
		var at *time.Time
		if err := db.conn.QueryRow(t.Context(), "SELECT last_used_at FROM api_tokens").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return deref(at)
	}
	if !lastUsed().IsZero() {
		t.Fatal("a new token has a last_used_at")
	}
	t0 := clock.Now()
	mustAuth(t, s, res.Token)
	for _, step := range []struct {
		advance time.Duration
		want    time.Time
	}{
		{0, t0},                // cache hit
		{11 * time.Second, t0}, // from the database, but used less than a minute ago
		{50 * time.Second, t0.Add(61 * time.Second)}, // a minute later: written again
	} {
		clock.Advance(step.advance)
		mustAuth(t, s, res.Token)
		if got := lastUsed(); !got.Equal(step.want) {
			t.Errorf("after %s: last_used_at = %s, want %s", clock.Now().Sub(t0), got, step.want)
		}
	}
}

func TestPrincipalAdmin(t *testing.T) {
	db := newTestDB(t)
	s, _ := withAdminToken(t, db, nil)
	for _, role := range []string{"owner", "admin", "member", "viewer"} {
		t.Run(role, func(t *testing.T) {
			var id string
			if err := db.conn.QueryRow(t.Context(), "INSERT INTO users (email) VALUES ($1) RETURNING id::text",
				role+"@example.com").Scan(&id); err != nil {
				t.Fatal(err)
			}
			if role == RoleOwner { // a team has one owner (memberships_one_owner)
				db.exec(t, "UPDATE memberships SET role = 'admin' WHERE team_id = $1 AND role = 'owner'", DefaultTeam)
			}
			db.exec(t, "INSERT INTO memberships (team_id, user_id, role) VALUES ($1, $2, $3)", DefaultTeam, id, role)
			tok, _, err := s.CreateToken(t.Context(), id, "t", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			p := mustAuth(t, s, tok)
			if want := role == "owner" || role == "admin"; p.Admin != want || p.UserID != id || p.Email != role+"@example.com" {
				t.Errorf("principal %+v, want Admin %v", p, want)
			}
		})
	}
}
