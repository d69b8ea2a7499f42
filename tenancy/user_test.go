package tenancy

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"
)

// storedHash is the password_hash of user id ("" for NULL) and its password_changed_at.
func storedHash(t *testing.T, db *testDB, id string) (string, time.Time) {
	t.Helper()
	var hash *string
	var changed *time.Time
	if err := db.conn.QueryRow(t.Context(), "SELECT password_hash, password_changed_at FROM users WHERE id = $1",
		id).Scan(&hash, &changed); err != nil {
		t.Fatal(err)
	}
	if hash == nil {
		return "", deref(changed)
	}
	return *hash, deref(changed)
}

// addSession inserts a browser session of user with a random id.
func addSession(t *testing.T, db *testDB, user string) {
	t.Helper()
	id, csrf := sha256.Sum256([]byte(randomBase62(20))), sha256.Sum256([]byte(randomBase62(20)))
	db.exec(t, "INSERT INTO sessions (id_hash, user_id, expires_at, csrf_hash) VALUES ($1, $2, now() + interval '1 day', $3)",
		id[:], user, csrf[:])
}

func sessionsOf(t *testing.T, db *testDB, user string) int {
	t.Helper()
	var n int
	if err := db.conn.QueryRow(t.Context(), "SELECT count(*) FROM sessions WHERE user_id = $1", user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateUser(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	u, err := s.CreateUser(ctx, "  Alice@Example.COM ", "correct horse")
	if err != nil || u.Email != "alice@example.com" || !u.HasPassword || u.Disabled || !u.CreatedAt.Equal(clock.Now()) || !validUUID(u.ID) {
		t.Fatalf("CreateUser = %+v, %v", u, err)
	}
	hash, changed := storedHash(t, db, u.ID)
	if ok, _, err := VerifyPassword(hash, "correct horse"); !ok || err != nil || !changed.Equal(clock.Now()) {
		t.Errorf("stored hash %q (changed %s) does not verify: %v", hash, changed, err)
	}
	if got, err := s.User(ctx, u.ID); err != nil || got.Email != u.Email || !got.HasPassword || !got.CreatedAt.Equal(u.CreatedAt) {
		t.Errorf("User = %+v, %v", got, err)
	}

	nopw, err := s.CreateUser(ctx, "robot@example.com", "")
	if err != nil || nopw.HasPassword {
		t.Fatalf("CreateUser without a password = %+v, %v", nopw, err)
	}
	if hash, changed := storedHash(t, db, nopw.ID); hash != "" || !changed.IsZero() {
		t.Errorf("user without a password has hash %q, changed %s", hash, changed)
	}

	for _, tc := range []struct {
		name, email, password string
		want                  error
	}{
		{"email taken, other case", "ALICE@example.com", "", ErrConflict},
		{"no at", "alice.example.com", "", ErrInvalid},
		{"empty", "", "", ErrInvalid},
		{"no local part", "@example.com", "", ErrInvalid},
		{"no domain", "alice@", "", ErrInvalid},
		{"two ats", "a@b@example.com", "", ErrInvalid},
		{"space inside", "al ice@example.com", "", ErrInvalid},
		{"display name", "Alice <alice@example.com>", "", ErrInvalid},
		{"empty domain label", "alice@example..com", "", ErrInvalid},
		{"trailing dot", "alice@example.com.", "", ErrInvalid},
		{"too long", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com", "", ErrInvalid},
		{"local part too long", strings.Repeat("a", 65) + "@example.com", "", ErrInvalid},
		{"short password", "new@example.com", "1234567", ErrInvalid},
		{"long password", "new@example.com", strings.Repeat("p", 1025), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateUser(ctx, tc.email, tc.password)
			wantErr(t, err, tc.want)
		})
	}
	if n := db.count(t, "users"); n != 2 {
		t.Errorf("%d users, want 2", n)
	}
	longest := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com" // 254 bytes
	if _, err := s.CreateUser(ctx, longest, ""); err != nil {
		t.Errorf("a %d-byte email: %v", len(longest), err)
	}
	if _, err := s.CreateUser(ctx, "admin@localhost", strings.Repeat("p", MinPasswordLen)); err != nil {
		t.Errorf("a domain without dots and a password of %d bytes: %v", MinPasswordLen, err)
	}
}

func TestUser(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	for _, id := range []string{"00000000-0000-0000-0000-000000000000", "admin", ""} {
		_, err := s.User(t.Context(), id)
		wantErr(t, err, ErrNotFound)
	}
}

func TestSetPassword(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	bob := newUser(t, s, "bob@example.com")
	addSession(t, db, alice)
	addSession(t, db, alice)
	addSession(t, db, bob)
	clock.Advance(time.Hour)
	if err := s.SetPassword(ctx, alice, "a new password"); err != nil {
		t.Fatal(err)
	}
	hash, changed := storedHash(t, db, alice)
	if ok, _, err := VerifyPassword(hash, "a new password"); !ok || err != nil || !changed.Equal(clock.Now()) {
		t.Errorf("after SetPassword: hash verifies %v (%v), changed at %s", ok, err, changed)
	}
	if u, _ := s.User(ctx, alice); !u.HasPassword {
		t.Error("HasPassword is false")
	}
	if a, b := sessionsOf(t, db, alice), sessionsOf(t, db, bob); a != 0 || b != 1 {
		t.Errorf("sessions after a password change: alice %d (want 0), bob %d (want 1)", a, b)
	}
	wantErr(t, s.SetPassword(ctx, alice, "short"), ErrInvalid)
	wantErr(t, s.SetPassword(ctx, alice, ""), ErrInvalid)
	wantErr(t, s.SetPassword(ctx, alice, strings.Repeat("p", 1025)), ErrInvalid)
	wantErr(t, s.SetPassword(ctx, "00000000-0000-0000-0000-000000000000", "long enough"), ErrNotFound)
	wantErr(t, s.SetPassword(ctx, "alice", "long enough"), ErrNotFound)
	if h, _ := storedHash(t, db, alice); h != hash {
		t.Error("a failed SetPassword changed the hash")
	}
}

func TestSetDisabled(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	ctx := t.Context()
	bob := newUser(t, s, "bob@example.com")
	tok, _, err := s.CreateToken(ctx, bob, "t", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, tok) // cached
	addSession(t, db, bob)
	addSession(t, db, res.AdminID)
	if err := s.SetDisabled(ctx, bob, true); err != nil {
		t.Fatal(err)
	}
	_, err = s.Authenticate(ctx, tok)
	wantErr(t, err, ErrUnauthenticated)
	if u, _ := s.User(ctx, bob); !u.Disabled {
		t.Error("User.Disabled is false")
	}
	if b, a := sessionsOf(t, db, bob), sessionsOf(t, db, res.AdminID); b != 0 || a != 1 {
		t.Errorf("sessions after disabling: bob %d (want 0), admin %d (want 1)", b, a)
	}
	if err := s.SetDisabled(ctx, bob, true); err != nil { // again: no change
		t.Errorf("disabling twice: %v", err)
	}
	if err := s.SetDisabled(ctx, bob, false); err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, tok)
	addSession(t, db, bob)
	if err := s.SetDisabled(ctx, bob, false); err != nil || sessionsOf(t, db, bob) != 1 {
		t.Errorf("enabling an enabled user: %v; it must keep its sessions", err)
	}
	wantErr(t, s.SetDisabled(ctx, "00000000-0000-0000-0000-000000000000", true), ErrNotFound)
	wantErr(t, s.SetDisabled(ctx, "bob", true), ErrNotFound)
}

func TestValidEmail(t *testing.T) {
	for email, want := range map[string]bool{
		"a@b":                            true,
		"first.last+tag@sub.example.org": true,
		"üser@exämple.de":                true,
		"a@b.":                           false,
		"a@.b":                           false,
		"a@b c":                          false,
		"a\x00@b":                        false,
		"a\xff@b":                        false,
		`"a"@b`:                          false,
		"a@[127.0.0.1]":                  false,
	} {
		if got := validEmail(email); got != want {
			t.Errorf("validEmail(%q) = %v, want %v", email, got, want)
		}
	}
}
