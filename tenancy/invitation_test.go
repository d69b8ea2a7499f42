package tenancy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// invitationFixture: team "acme" owned by alice, and a Store on a fake clock.
type invitationFixture struct {
	db    *testDB
	s     *Store
	clock *fakeClock
	alice string
}

func newInvitationFixture(t *testing.T) *invitationFixture {
	t.Helper()
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	f := &invitationFixture{db: db, s: s, clock: clock, alice: newUser(t, s, "alice@example.com")}
	newTeam(t, s, f.alice, "acme")
	return f
}

func (f *invitationFixture) invite(t *testing.T, email, role string) (string, Invitation) {
	t.Helper()
	token, inv, err := f.s.CreateInvitation(t.Context(), "acme", email, role, f.alice, 0)
	if err != nil {
		t.Fatalf("CreateInvitation(%s): %v", email, err)
	}
	return token, inv
}

func TestCreateInvitation(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	token, inv, err := f.s.CreateInvitation(ctx, "acme", " Bob@Example.com", RoleMember, f.alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, InvitationTokenPrefix) || len(token) != TokenLen ||
		!wellFormedPrefixed(InvitationTokenPrefix, token) || wellFormedToken(token) {
		t.Errorf("token %q is not a well-formed invitation token", token)
	}
	now := f.clock.Now()
	want := Invitation{ID: inv.ID, TeamID: "acme", Email: "bob@example.com", Role: RoleMember, InvitedBy: f.alice}
	if got := inv; got.ID == "" || !got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(DefaultInvitationTTL)) ||
		!got.AcceptedAt.IsZero() || !got.RevokedAt.IsZero() {
		t.Errorf("invitation %+v", got)
	}
	inv.CreatedAt, inv.ExpiresAt = time.Time{}, time.Time{}
	if inv != want {
		t.Errorf("invitation %+v, want %+v", inv, want)
	}
	var stored []byte
	if err := f.db.conn.QueryRow(ctx, "SELECT token_hash FROM invitations WHERE id = $1", inv.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if h := hashToken(token); !bytes.Equal(stored, h[:]) {
		t.Error("the stored hash is not the token's SHA-256")
	}

	_, inv2, err := f.s.CreateInvitation(ctx, "acme", "carol@example.com", RoleViewer, "", time.Hour)
	if err != nil || inv2.InvitedBy != "" || !inv2.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("invitation without inviter, one hour: %+v, %v", inv2, err)
	}
	if _, _, err := f.s.CreateInvitation(ctx, "acme", "dave@example.com", RoleAdmin, f.alice, MaxInvitationTTL); err != nil {
		t.Errorf("the longest lifetime: %v", err)
	}

	for _, tc := range []struct {
		name, team, email, role, by string
		ttl                         time.Duration
		want                        error
	}{
		{"member already", "acme", "ALICE@example.com", RoleViewer, "", 0, ErrConflict},
		{"pending invitation", "acme", "bob@example.com", RoleAdmin, "", 0, ErrConflict},
		{"bad email", "acme", "bob", RoleViewer, "", 0, ErrInvalid},
		{"owner role", "acme", "x@example.com", RoleOwner, "", 0, ErrInvalid},
		{"unknown role", "acme", "x@example.com", "root", "", 0, ErrInvalid},
		{"negative lifetime", "acme", "x@example.com", RoleViewer, "", -time.Hour, ErrInvalid},
		{"too long", "acme", "x@example.com", RoleViewer, "", MaxInvitationTTL + time.Second, ErrInvalid},
		{"malformed inviter", "acme", "x@example.com", RoleViewer, "alice", 0, ErrInvalid},
		{"unknown inviter", "acme", "x@example.com", RoleViewer, "00000000-0000-0000-0000-000000000000", 0, ErrInvalid},
		{"unknown team", "nope", "x@example.com", RoleViewer, "", 0, ErrNotFound},
		{"malformed team", "Nope", "x@example.com", RoleViewer, "", 0, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.s.CreateInvitation(ctx, tc.team, tc.email, tc.role, tc.by, tc.ttl)
			wantErr(t, err, tc.want)
		})
	}

	// Once the pending invitation is revoked, or has expired, the email can be invited again.
	if err := f.s.RevokeInvitation(ctx, "acme", inv.ID); err != nil {
		t.Fatal(err)
	}
	f.invite(t, "bob@example.com", RoleViewer)
	f.clock.Advance(DefaultInvitationTTL)
	f.invite(t, "bob@example.com", RoleViewer)
	if n := f.db.count(t, "invitations"); n != 5 {
		t.Errorf("%d invitations, want 5", n)
	}
}

// TestCreateInvitationConcurrent: concurrent invitations of one email to one team leave one pending.
func TestCreateInvitationConcurrent(t *testing.T) {
	f := newInvitationFixture(t)
	stores := []*Store{f.s, f.db.open(t, f.clock), f.db.open(t, f.clock)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 12 {
		wg.Go(func() {
			_, _, err := stores[i%len(stores)].CreateInvitation(t.Context(), "acme", "bob@example.com", RoleViewer, "", 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case !errors.Is(err, ErrConflict):
				t.Errorf("CreateInvitation: %v", err)
			}
		})
	}
	wg.Wait()
	if created != 1 {
		t.Errorf("%d invitations created, want 1", created)
	}
}

func TestInvitations(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	var ids []string
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		_, inv := f.invite(t, email, RoleViewer)
		ids = append([]string{inv.ID}, ids...)
		f.clock.Advance(time.Minute)
	}
	if err := f.s.RevokeInvitation(ctx, "acme", ids[1]); err != nil {
		t.Fatal(err)
	}
	invs, err := f.s.Invitations(ctx, "acme")
	if err != nil || len(invs) != 3 {
		t.Fatalf("Invitations = %+v, %v", invs, err)
	}
	for i, inv := range invs {
		if inv.ID != ids[i] {
			t.Errorf("invitation %d is %s (%s), want %s: not newest first", i, inv.ID, inv.Email, ids[i])
		}
	}
	if invs[1].RevokedAt.IsZero() || !invs[0].RevokedAt.IsZero() {
		t.Errorf("revocation not listed: %+v", invs)
	}
	newTeam(t, f.s, f.alice, "quiet")
	if invs, err := f.s.Invitations(ctx, "quiet"); err != nil || invs == nil || len(invs) != 0 {
		t.Errorf("Invitations(quiet) = %v, %v", invs, err)
	}
	for _, team := range []string{"nope", "NOPE"} {
		_, err := f.s.Invitations(ctx, team)
		wantErr(t, err, ErrNotFound)
	}
}

func TestRevokeInvitation(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	token, inv := f.invite(t, "bob@example.com", RoleViewer)
	if err := f.s.RevokeInvitation(ctx, "acme", inv.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.InvitationByToken(ctx, token)
	wantErr(t, err, ErrNotFound)
	bob := newUser(t, f.s, "bob@example.com")
	_, err = f.s.AcceptInvitation(ctx, token, bob)
	wantErr(t, err, ErrNotFound)
	first := f.clock.Now()
	f.clock.Advance(time.Hour)
	if err := f.s.RevokeInvitation(ctx, "acme", inv.ID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if invs, _ := f.s.Invitations(ctx, "acme"); len(invs) != 1 || !invs[0].RevokedAt.Equal(first) {
		t.Errorf("revoking again moved RevokedAt: %+v", invs)
	}

	accepted, acc := f.invite(t, "bob@example.com", RoleViewer)
	if _, err := f.s.AcceptInvitation(ctx, accepted, bob); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.s.RevokeInvitation(ctx, "acme", acc.ID), ErrConflict)

	_, expiring := f.invite(t, "carol@example.com", RoleViewer)
	f.clock.Advance(DefaultInvitationTTL)
	if err := f.s.RevokeInvitation(ctx, "acme", expiring.ID); err != nil {
		t.Errorf("revoking an expired invitation: %v", err)
	}

	newTeam(t, f.s, f.alice, "other")
	wantErr(t, f.s.RevokeInvitation(ctx, "other", expiring.ID), ErrNotFound)
	wantErr(t, f.s.RevokeInvitation(ctx, "acme", "00000000-0000-0000-0000-000000000000"), ErrNotFound)
	wantErr(t, f.s.RevokeInvitation(ctx, "acme", "nope"), ErrNotFound)
	wantErr(t, f.s.RevokeInvitation(ctx, "Acme", expiring.ID), ErrNotFound)
}

func TestInvitationByToken(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	token, inv := f.invite(t, "bob@example.com", RoleAdmin)
	got, err := f.s.InvitationByToken(ctx, token)
	if err != nil || got.ID != inv.ID || got.Email != "bob@example.com" || got.Role != RoleAdmin || got.TeamID != "acme" {
		t.Fatalf("InvitationByToken = %+v, %v", got, err)
	}

	revoked, rinv := f.invite(t, "r@example.com", RoleViewer)
	if err := f.s.RevokeInvitation(ctx, "acme", rinv.ID); err != nil {
		t.Fatal(err)
	}
	accepted, _ := f.invite(t, "a@example.com", RoleViewer)
	if _, err := f.s.AcceptInvitation(ctx, accepted, newUser(t, f.s, "a@example.com")); err != nil {
		t.Fatal(err)
	}
	typoed := []byte(token)
	typoed[len(InvitationTokenPrefix)+2] ^= 'a' ^ 'b'
	unknown := encodePrefixed(InvitationTokenPrefix, randomBase62(tokenRandLen))
	apiToken, _, err := f.s.CreateToken(ctx, f.alice, "api", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"typo": string(typoed), "unknown": unknown, "revoked": revoked, "accepted": accepted, "empty": "",
		"API token": apiToken, "truncated": token[:len(token)-1], "API prefix": TokenPrefix + token[len(InvitationTokenPrefix):],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.s.InvitationByToken(ctx, tok)
			wantErr(t, err, ErrNotFound)
		})
	}
	f.clock.Advance(DefaultInvitationTTL - time.Microsecond)
	if _, err := f.s.InvitationByToken(ctx, token); err != nil {
		t.Errorf("just before expiry: %v", err)
	}
	f.clock.Advance(time.Microsecond)
	_, err = f.s.InvitationByToken(ctx, token)
	wantErr(t, err, ErrNotFound)
}

func TestAcceptInvitation(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	token, inv := f.invite(t, "BOB@example.com", RoleAdmin)
	bob := newUser(t, f.s, "bob@Example.com")
	f.clock.Advance(time.Minute)
	m, err := f.s.AcceptInvitation(ctx, token, bob)
	if err != nil || m.ID != "acme" || m.Name != "Team acme" || m.Role != RoleAdmin || m.CreatedAt.IsZero() {
		t.Fatalf("AcceptInvitation = %+v, %v", m, err)
	}
	if role, err := f.s.MemberRole(ctx, "acme", bob); err != nil || role != RoleAdmin {
		t.Errorf("role after accepting = %q, %v", role, err)
	}
	var acceptedBy string
	var acceptedAt time.Time
	if err := f.db.conn.QueryRow(ctx, "SELECT accepted_by::text, accepted_at FROM invitations WHERE id = $1",
		inv.ID).Scan(&acceptedBy, &acceptedAt); err != nil || acceptedBy != bob || !acceptedAt.Equal(f.clock.Now()) {
		t.Errorf("accepted_by %s at %s (%v)", acceptedBy, acceptedAt, err)
	}
	_, err = f.s.AcceptInvitation(ctx, token, bob) // single use
	wantErr(t, err, ErrNotFound)

	carolToken, _ := f.invite(t, "carol@example.com", RoleViewer)
	carol := newUser(t, f.s, "carol@example.com")
	dave := newUser(t, f.s, "dave@example.com")
	disabledToken, _ := f.invite(t, "dis@example.com", RoleViewer)
	disabled := newUser(t, f.s, "dis@example.com")
	if err := f.s.SetDisabled(ctx, disabled, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, user string
		want              error
	}{
		{"another user's email", carolToken, dave, ErrInvalid},
		{"disabled user", disabledToken, disabled, ErrInvalid},
		{"unknown user", carolToken, "00000000-0000-0000-0000-000000000000", ErrNotFound},
		{"malformed user", carolToken, "carol", ErrNotFound},
		{"malformed token", "whi_nope", carol, ErrNotFound},
		{"unknown token", encodePrefixed(InvitationTokenPrefix, randomBase62(tokenRandLen)), carol, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.s.AcceptInvitation(ctx, tc.token, tc.user)
			wantErr(t, err, tc.want)
		})
	}
	// Failed attempts left the invitation usable.
	if _, err := f.s.AcceptInvitation(ctx, carolToken, carol); err != nil {
		t.Fatalf("carol accepting after failed attempts: %v", err)
	}

	// Already a member (joined some other way after being invited): ErrConflict, and the invitation stays
	// pending for the team's admins to revoke.
	again, _ := f.invite(t, "eve@example.com", RoleViewer)
	eve := newUser(t, f.s, "eve@example.com")
	f.db.exec(t, "INSERT INTO memberships (team_id, user_id, role) VALUES ('acme', $1, 'member')", eve)
	_, err = f.s.AcceptInvitation(ctx, again, eve)
	wantErr(t, err, ErrConflict)
	if _, err := f.s.InvitationByToken(ctx, again); err != nil {
		t.Errorf("the invitation is no longer pending after ErrConflict: %v", err)
	}

	expiring, _ := f.invite(t, "frank@example.com", RoleViewer)
	frank := newUser(t, f.s, "frank@example.com")
	f.clock.Advance(DefaultInvitationTTL)
	_, err = f.s.AcceptInvitation(ctx, expiring, frank)
	wantErr(t, err, ErrNotFound)
}

func TestAcceptInvitationNewUser(t *testing.T) {
	f := newInvitationFixture(t)
	ctx := t.Context()
	token, _ := f.invite(t, "bob@example.com", RoleMember)
	_, _, err := f.s.AcceptInvitationNewUser(ctx, token, "short")
	wantErr(t, err, ErrInvalid)
	_, _, err = f.s.AcceptInvitationNewUser(ctx, token, "")
	wantErr(t, err, ErrInvalid)
	if _, err := f.s.UserByEmail(ctx, "bob@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused password created the user: %v", err)
	}

	u, m, err := f.s.AcceptInvitationNewUser(ctx, token, "bob's password")
	if err != nil || u.Email != "bob@example.com" || !u.HasPassword || u.Disabled || m.ID != "acme" || m.Role != RoleMember {
		t.Fatalf("AcceptInvitationNewUser = %+v, %+v, %v", u, m, err)
	}
	if hash, _ := storedHash(t, f.db, u.ID); hash == "" {
		t.Error("no password stored")
	} else if ok, _, err := VerifyPassword(hash, "bob's password"); !ok || err != nil {
		t.Errorf("the stored password does not verify: %v", err)
	}
	if role, _ := f.s.MemberRole(ctx, "acme", u.ID); role != RoleMember {
		t.Errorf("role = %q", role)
	}
	_, _, err = f.s.AcceptInvitationNewUser(ctx, token, "bob's password")
	wantErr(t, err, ErrNotFound)

	// A user with the email exists: ErrConflict, nothing changes, and they can accept as themselves.
	carolToken, _ := f.invite(t, "carol@example.com", RoleViewer)
	carol := newUser(t, f.s, "carol@example.com")
	_, _, err = f.s.AcceptInvitationNewUser(ctx, carolToken, "a password")
	wantErr(t, err, ErrConflict)
	if _, err := f.s.AcceptInvitation(ctx, carolToken, carol); err != nil {
		t.Errorf("accepting as the existing user after the conflict: %v", err)
	}

	for name, tok := range map[string]string{"malformed": "nope", "unknown": encodePrefixed(InvitationTokenPrefix, randomBase62(tokenRandLen))} {
		_, _, err := f.s.AcceptInvitationNewUser(ctx, tok, "a password")
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s token: %v, want ErrNotFound", name, err)
		}
	}
	if n := f.db.count(t, "users"); n != 3 {
		t.Errorf("%d users, want 3", n)
	}
}

// TestAcceptInvitationConcurrent: an invitation is used once however many requests race for it, from several
// Stores, as the existing user or as a new one.
func TestAcceptInvitationConcurrent(t *testing.T) {
	f := newInvitationFixture(t)
	stores := []*Store{f.s, f.db.open(t, f.clock), f.db.open(t, f.clock), f.db.open(t, f.clock)}
	const racers = 12
	for round := range 3 {
		email := fmt.Sprintf("user%d@example.com", round)
		token, _ := f.invite(t, email, RoleMember)
		var existing string
		if round != 1 { // round 1: nobody has the email yet
			existing = newUser(t, f.s, email)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range racers {
			wg.Go(func() {
				s := stores[i%len(stores)]
				var err error
				asNew := existing == "" || i%3 == 0
				if asNew {
					_, _, err = s.AcceptInvitationNewUser(t.Context(), token, "a fine password")
				} else {
					_, err = s.AcceptInvitation(t.Context(), token, existing)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				// Losers see the invitation used (the lock orders them after the winner), except a new-user
				// attempt for an email that already has a user.
				case errors.Is(err, ErrNotFound), asNew && existing != "" && errors.Is(err, ErrConflict):
				default:
					t.Errorf("round %d, racer %d: %v", round, i, err)
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Errorf("round %d: the invitation was accepted %d times, want once", round, wins)
		}
		var users, members int
		if err := f.db.conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM users WHERE email = $1),
			(SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = $1)`, email).Scan(&users, &members); err != nil {
			t.Fatal(err)
		}
		if users != 1 || members != 1 {
			t.Errorf("round %d: %d users and %d memberships for %s, want 1 and 1", round, users, members, email)
		}
	}
}

// TestAcceptWhileDeletingTeam: accepting an invitation while its team is deleted neither deadlocks nor leaves a
// membership of a deleted team.
func TestAcceptWhileDeletingTeam(t *testing.T) {
	f := newInvitationFixture(t)
	other := f.db.open(t, f.clock)
	for i := range 10 {
		team := fmt.Sprintf("t%d", i)
		newTeam(t, f.s, f.alice, team)
		email := fmt.Sprintf("u%d@example.com", i)
		token, _, err := f.s.CreateInvitation(t.Context(), team, email, RoleViewer, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		user := newUser(t, f.s, email)
		var acceptErr, deleteErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, acceptErr = f.s.AcceptInvitation(t.Context(), token, user) })
		wg.Go(func() { _, deleteErr = other.DeleteTeam(t.Context(), team) })
		wg.Wait()
		if deleteErr != nil || acceptErr != nil && !errors.Is(acceptErr, ErrNotFound) {
			t.Fatalf("round %d: accept: %v; delete: %v", i, acceptErr, deleteErr)
		}
		if _, err := f.s.MemberRole(t.Context(), team, user); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: a member of the deleted team: %v", i, err)
		}
	}
}
