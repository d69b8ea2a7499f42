package tenancy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// newUser creates a user without a password and returns its id.
func newUser(t *testing.T, s *Store, email string) string {
	t.Helper()
	u, err := s.CreateUser(t.Context(), email, "")
	if err != nil {
		t.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u.ID
}

// newTeam creates team id owned by owner.
func newTeam(t *testing.T, s *Store, owner, id string) Team {
	t.Helper()
	tm, err := s.CreateTeam(t.Context(), owner, id, "Team "+id)
	if err != nil {
		t.Fatalf("CreateTeam(%s): %v", id, err)
	}
	return tm
}

// addMember makes user a member of team with role, as an accepted invitation would.
func addMember(t *testing.T, s *Store, team, user, role string) {
	t.Helper()
	u, err := s.User(t.Context(), user)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := s.CreateInvitation(t.Context(), team, u.Email, role, "", 0)
	if err != nil {
		t.Fatalf("CreateInvitation: %v", err)
	}
	if _, err := s.AcceptInvitation(t.Context(), token, user); err != nil {
		t.Fatalf("AcceptInvitation: %v", err)
	}
}

// owners counts the owners of team.
func owners(t *testing.T, db *testDB, team string) int {
	t.Helper()
	var n int
	if err := db.conn.QueryRow(t.Context(), "SELECT count(*) FROM memberships WHERE team_id = $1 AND role = 'owner'",
		team).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateTeam(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	tm, err := s.CreateTeam(ctx, alice, "acme", "ACME Corp")
	if err != nil || tm.ID != "acme" || tm.Name != "ACME Corp" || !tm.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("CreateTeam = %+v, %v", tm, err)
	}
	if got, err := s.Team(ctx, "acme"); err != nil || got.ID != tm.ID || got.Name != tm.Name || !got.CreatedAt.Equal(tm.CreatedAt) {
		t.Errorf("Team = %+v, %v; want %+v", got, err, tm)
	}
	if role, err := s.MemberRole(ctx, "acme", alice); err != nil || role != RoleOwner {
		t.Errorf("owner's role = %q, %v", role, err)
	}

	disabled := newUser(t, s, "disabled@example.com")
	if err := s.SetDisabled(ctx, disabled, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, owner, id, teamName string
		want                      error
	}{
		{"id taken", alice, "acme", "Other", ErrConflict},
		{"id not a DNS label", alice, "Acme", "x", ErrInvalid},
		{"empty id", alice, "", "x", ErrInvalid},
		{"empty name", alice, "t1", "", ErrInvalid},
		{"blank name", alice, "t1", "   ", ErrInvalid},
		{"long name", alice, "t1", strings.Repeat("n", MaxNameLen+1), ErrInvalid},
		{"control character", alice, "t1", "a\nb", ErrInvalid},
		{"not UTF-8", alice, "t1", "a\xffb", ErrInvalid},
		{"unknown owner", "00000000-0000-0000-0000-000000000000", "t1", "x", ErrNotFound},
		{"malformed owner", "alice", "t1", "x", ErrNotFound},
		{"disabled owner", disabled, "t1", "x", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateTeam(ctx, tc.owner, tc.id, tc.teamName)
			wantErr(t, err, tc.want)
		})
	}
	if _, err := s.CreateTeam(ctx, alice, "t1", strings.Repeat("é", MaxNameLen/2)); err != nil {
		t.Errorf("a name of exactly %d bytes: %v", MaxNameLen, err)
	}
	if n := db.count(t, "teams"); n != 2 {
		t.Errorf("%d teams, want 2 (failed creations left nothing)", n)
	}
	for _, id := range []string{"nope", "Not_An_ID", ""} {
		_, err := s.Team(ctx, id)
		wantErr(t, err, ErrNotFound)
	}
}

func TestTeamsOf(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	bob := newUser(t, s, "bob@example.com")
	for _, id := range []string{"ab", "a-b", "b", "a"} { // byte order: a, a-b, ab, b
		newTeam(t, s, alice, id)
	}
	newTeam(t, s, bob, "bobs")
	addMember(t, s, "bobs", alice, RoleViewer)
	ms, err := s.TeamsOf(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.ID+":"+m.Role)
		if m.Name != "Team "+m.ID || m.CreatedAt.IsZero() {
			t.Errorf("membership %+v", m)
		}
	}
	if want := "a:owner a-b:owner ab:owner b:owner bobs:viewer"; strings.Join(got, " ") != want {
		t.Errorf("TeamsOf = %v, want %s", got, want)
	}
	for _, user := range []string{"00000000-0000-0000-0000-000000000000", "nobody"} {
		if ms, err := s.TeamsOf(ctx, user); err != nil || ms == nil || len(ms) != 0 {
			t.Errorf("TeamsOf(%s) = %v, %v; want an empty list", user, ms, err)
		}
	}
}

func TestRenameTeam(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	newTeam(t, s, alice, "acme")
	if err := s.RenameTeam(ctx, "acme", "Acme Inc."); err != nil {
		t.Fatal(err)
	}
	if tm, err := s.Team(ctx, "acme"); err != nil || tm.Name != "Acme Inc." {
		t.Errorf("after rename: %+v, %v", tm, err)
	}
	wantErr(t, s.RenameTeam(ctx, "nope", "x"), ErrNotFound)
	wantErr(t, s.RenameTeam(ctx, "No!", "x"), ErrNotFound)
	wantErr(t, s.RenameTeam(ctx, "acme", ""), ErrInvalid)
	wantErr(t, s.RenameTeam(ctx, "acme", strings.Repeat("x", MaxNameLen+1)), ErrInvalid)
}

func TestDeleteTeam(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	bob := newUser(t, s, "bob@example.com")
	newTeam(t, s, alice, "acme")
	newTeam(t, s, alice, "keep")
	addMember(t, s, "acme", bob, RoleMember)
	for _, id := range []string{"prod", "dev"} {
		if _, err := s.CreateCluster(ctx, "acme", id, "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateCluster(ctx, "keep", "kept", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateJoinToken(ctx, "prod", alice, "", time.Time{}, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateInvitation(ctx, "acme", "carol@example.com", RoleViewer, alice, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cluster(ctx, "prod"); err != nil { // now cached
		t.Fatal(err)
	}

	ids, err := s.DeleteTeam(ctx, "acme")
	if err != nil || strings.Join(ids, ",") != "dev,prod" {
		t.Fatalf("DeleteTeam = %v, %v; want [dev prod]", ids, err)
	}
	_, err = s.Team(ctx, "acme")
	wantErr(t, err, ErrNotFound)
	_, err = s.Cluster(ctx, "prod") // dropped from the cache at once
	wantErr(t, err, ErrNotFound)
	for table, want := range map[string]int{"clusters": 1, "join_tokens": 0, "invitations": 0, "memberships": 1, "users": 2} {
		if n := db.count(t, table); n != want {
			t.Errorf("%d rows in %s, want %d", n, table, want)
		}
	}
	if ids, err := s.DeleteTeam(ctx, "keep"); err != nil || len(ids) != 1 {
		t.Errorf("DeleteTeam(keep) = %v, %v", ids, err)
	}
	newTeam(t, s, alice, "empty")
	if ids, err := s.DeleteTeam(ctx, "empty"); err != nil || len(ids) != 0 {
		t.Errorf("DeleteTeam(empty) = %v, %v; want no clusters", ids, err)
	}
	_, err = s.DeleteTeam(ctx, "acme")
	wantErr(t, err, ErrNotFound)
	_, err = s.DeleteTeam(ctx, "Bad_ID")
	wantErr(t, err, ErrNotFound)
}

func TestTransferOwnership(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	ctx := t.Context()
	bob := newUser(t, s, "bob@example.com")
	carol := newUser(t, s, "carol@example.com")
	outsider := newUser(t, s, "outsider@example.com")
	addMember(t, s, DefaultTeam, bob, RoleViewer)
	addMember(t, s, DefaultTeam, carol, RoleMember)
	bobToken, _, err := s.CreateToken(ctx, bob, "t", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if p := mustAuth(t, s, bobToken); p.Admin { // cached as not admin
		t.Fatal("a viewer is Admin")
	}

	if err := s.TransferOwnership(ctx, DefaultTeam, bob); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]string{res.AdminID: RoleAdmin, bob: RoleOwner, carol: RoleMember} {
		if role, err := s.MemberRole(ctx, DefaultTeam, user); err != nil || role != want {
			t.Errorf("role of %s = %q, %v; want %s", user, role, err, want)
		}
	}
	if p := mustAuth(t, s, bobToken); !p.Admin {
		t.Error("the new owner is not Admin at once on this Store")
	}
	if err := s.TransferOwnership(ctx, DefaultTeam, bob); err != nil { // to the owner: nothing to do
		t.Errorf("transfer to the owner: %v", err)
	}
	if n := owners(t, db, DefaultTeam); n != 1 {
		t.Errorf("%d owners", n)
	}

	if err := s.SetDisabled(ctx, carol, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, team, user string
		want             error
	}{
		{"not a member", DefaultTeam, outsider, ErrInvalid},
		{"unknown user", DefaultTeam, "00000000-0000-0000-0000-000000000000", ErrInvalid},
		{"malformed user", DefaultTeam, "bob", ErrInvalid},
		{"disabled member", DefaultTeam, carol, ErrInvalid},
		{"unknown team", "nope", bob, ErrNotFound},
		{"malformed team", "No", bob, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, s.TransferOwnership(ctx, tc.team, tc.user), tc.want)
		})
	}
	if role, _ := s.MemberRole(ctx, DefaultTeam, bob); role != RoleOwner {
		t.Errorf("after failed transfers the owner is %q", role)
	}

	// A team whose owner was deleted (directly in the database) gets one by a transfer.
	db.exec(t, "DELETE FROM users WHERE id = $1", bob)
	if err := s.TransferOwnership(ctx, DefaultTeam, res.AdminID); err != nil {
		t.Fatal(err)
	}
	if role, _ := s.MemberRole(ctx, DefaultTeam, res.AdminID); role != RoleOwner {
		t.Errorf("owner after repairing transfer: %q", role)
	}
}

// TestTransferOwnershipConcurrent: transfers to different members and role changes race from several Stores
// (replicas); every transfer succeeds in some order, role changes only ever fail because their target was the
// owner at that moment, and the team ends with exactly one owner.
func TestTransferOwnershipConcurrent(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	owner := newUser(t, s, "owner@example.com")
	newTeam(t, s, owner, "acme")
	const n = 8
	members := make([]string, n)
	for i := range members {
		members[i] = newUser(t, s, fmt.Sprintf("m%d@example.com", i))
		addMember(t, s, "acme", members[i], RoleMember)
	}
	stores := []*Store{s, db.open(t, nil), db.open(t, nil), db.open(t, nil)}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make(chan error, 3*n)
		for i, m := range members {
			wg.Go(func() { errs <- stores[i%len(stores)].TransferOwnership(ctx, "acme", m) })
			wg.Go(func() {
				if err := stores[(i+1)%len(stores)].SetRole(ctx, "acme", m, RoleViewer); err != nil && !errors.Is(err, ErrConflict) {
					errs <- err
				}
			})
			wg.Go(func() {
				if err := stores[(i+2)%len(stores)].SetRole(ctx, "acme", owner, RoleMember); err != nil && !errors.Is(err, ErrConflict) {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if got := owners(t, db, "acme"); got != 1 {
			t.Fatalf("round %d: %d owners, want 1", round, got)
		}
	}
}

func TestMembers(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	ctx := t.Context()
	zed := newUser(t, s, "zed@example.com")
	amy := newUser(t, s, "amy@example.com")
	newTeam(t, s, zed, "acme")
	clock.Advance(time.Hour)
	addMember(t, s, "acme", amy, RoleAdmin)
	ms, err := s.Members(ctx, "acme")
	if err != nil || len(ms) != 2 {
		t.Fatalf("Members = %+v, %v", ms, err)
	}
	if ms[0].Email != "amy@example.com" || ms[0].UserID != amy || ms[0].Role != RoleAdmin || !ms[0].CreatedAt.Equal(clock.Now()) ||
		ms[1].Email != "zed@example.com" || ms[1].Role != RoleOwner {
		t.Errorf("Members = %+v", ms)
	}
	for _, team := range []string{"nope", "BAD"} {
		_, err := s.Members(ctx, team)
		wantErr(t, err, ErrNotFound)
	}
	db.exec(t, "INSERT INTO teams (id, name) VALUES ('nobody', 'Nobody')")
	if ms, err := s.Members(ctx, "nobody"); err != nil || len(ms) != 0 {
		t.Errorf("Members of a team without members = %v, %v", ms, err)
	}
}

func TestMemberRole(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	ctx := t.Context()
	alice := newUser(t, s, "alice@example.com")
	bob := newUser(t, s, "bob@example.com")
	newTeam(t, s, alice, "acme")
	addMember(t, s, "acme", bob, RoleViewer)
	if role, err := s.MemberRole(ctx, "acme", bob); err != nil || role != RoleViewer {
		t.Errorf("MemberRole = %q, %v", role, err)
	}
	carol := newUser(t, s, "carol@example.com")
	for _, tc := range [][2]string{{"acme", carol}, {"nope", bob}, {"BAD", bob}, {"acme", "bob"}} {
		_, err := s.MemberRole(ctx, tc[0], tc[1])
		wantErr(t, err, ErrNotFound)
	}
}

func TestSetRole(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	ctx := t.Context()
	bob := newUser(t, s, "bob@example.com")
	outsider := newUser(t, s, "outsider@example.com")
	addMember(t, s, DefaultTeam, bob, RoleViewer)
	bobToken, _, err := s.CreateToken(ctx, bob, "t", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, bobToken) // cached, not Admin
	for _, role := range []string{RoleAdmin, RoleMember, RoleViewer, RoleAdmin} {
		if err := s.SetRole(ctx, DefaultTeam, bob, role); err != nil {
			t.Fatalf("SetRole(%s): %v", role, err)
		}
		if got, _ := s.MemberRole(ctx, DefaultTeam, bob); got != role {
			t.Errorf("role = %q, want %q", got, role)
		}
	}
	if p := mustAuth(t, s, bobToken); !p.Admin {
		t.Error("promotion to admin of the default team not seen at once on this Store")
	}
	for _, tc := range []struct {
		name, team, user, role string
		want                   error
	}{
		{"owner role", DefaultTeam, bob, RoleOwner, ErrInvalid},
		{"unknown role", DefaultTeam, bob, "root", ErrInvalid},
		{"empty role", DefaultTeam, bob, "", ErrInvalid},
		{"the owner", DefaultTeam, res.AdminID, RoleAdmin, ErrConflict},
		{"not a member", DefaultTeam, outsider, RoleViewer, ErrNotFound},
		{"malformed user", DefaultTeam, "bob", RoleViewer, ErrNotFound},
		{"unknown team", "nope", bob, RoleViewer, ErrNotFound},
		{"malformed team", "-", bob, RoleViewer, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, s.SetRole(ctx, tc.team, tc.user, tc.role), tc.want)
		})
	}
	if got, _ := s.MemberRole(ctx, DefaultTeam, res.AdminID); got != RoleOwner {
		t.Errorf("owner's role is now %q", got)
	}
}

func TestRemoveMember(t *testing.T) {
	db := newTestDB(t)
	s, res := withAdminToken(t, db, newFakeClock())
	ctx := t.Context()
	bob := newUser(t, s, "bob@example.com")
	addMember(t, s, DefaultTeam, bob, RoleAdmin)
	bobToken, _, err := s.CreateToken(ctx, bob, "t", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if p := mustAuth(t, s, bobToken); !p.Admin {
		t.Fatal("admin is not Admin")
	}
	if err := s.RemoveMember(ctx, DefaultTeam, bob); err != nil {
		t.Fatal(err)
	}
	_, err = s.MemberRole(ctx, DefaultTeam, bob)
	wantErr(t, err, ErrNotFound)
	if p := mustAuth(t, s, bobToken); p.Admin {
		t.Error("removed admin still Admin on this Store")
	}
	wantErr(t, s.RemoveMember(ctx, DefaultTeam, bob), ErrNotFound)
	wantErr(t, s.RemoveMember(ctx, DefaultTeam, res.AdminID), ErrConflict)
	wantErr(t, s.RemoveMember(ctx, "nope", bob), ErrNotFound)
	wantErr(t, s.RemoveMember(ctx, DefaultTeam, "bob"), ErrNotFound)
	if n := owners(t, db, DefaultTeam); n != 1 {
		t.Errorf("%d owners", n)
	}
}
