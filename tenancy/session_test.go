package tenancy

import (
	"testing"
	"time"
)

func TestSignInAndSessions(t *testing.T) {
	db := newTestDB(t)
	clock := newFakeClock()
	s := db.open(t, clock)
	u, err := s.CreateUser(t.Context(), "sam@example.com", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, sess, err := s.SignIn(ctx, " Sam@Example.com ", "correct horse battery", "10.0.0.1", "test")
	if err != nil || sess.UserID != u.ID || sess.CSRF == "" || len(id) < 40 {
		t.Fatalf("SignIn: %q %+v %v", id, sess, err)
	}
	id2, _, err := s.SignIn(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", "test")
	if err != nil || id2 == id {
		t.Fatalf("a second sign-in must get a new session id: %v", err)
	}
	got, err := s.Session(ctx, id)
	if err != nil || got.UserID != u.ID || got.CSRF != sess.CSRF {
		t.Fatalf("Session: %+v %v", got, err)
	}
	// Same answer for a wrong password, an unknown account and a user without a password.
	if _, err := s.CreateUser(ctx, "nopass@example.com", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ email, pw string }{{"sam@example.com", "wrong"}, {"nobody@example.com", "x"}, {"nopass@example.com", ""}} {
		_, _, err := s.SignIn(ctx, c.email, c.pw, "10.0.0.2", "test")
		wantErr(t, err, ErrUnauthenticated)
	}
	// Idle and absolute expiry.
	clock.Advance(SessionIdle - time.Minute)
	if _, err := s.Session(ctx, id); err != nil {
		t.Fatalf("active session ended early: %v", err)
	}
	clock.Advance(SessionIdle - time.Minute) // touched a moment ago: still within the idle window
	if _, err := s.Session(ctx, id); err != nil {
		t.Fatalf("session ended though used within the idle window: %v", err)
	}
	_, err = s.Session(ctx, id2) // not used for almost 24 h
	wantErr(t, err, ErrUnauthenticated)
	for range 7 * 2 {
		clock.Advance(SessionIdle - time.Minute)
		_, _ = s.Session(ctx, id)
	}
	_, err = s.Session(ctx, id) // past the absolute expiry however active
	wantErr(t, err, ErrUnauthenticated)

	// Sign-out, password change and disabling end sessions.
	id3, _, err := s.SignIn(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, id3); err != nil {
		t.Fatal(err)
	}
	_, err = s.Session(ctx, id3)
	wantErr(t, err, ErrUnauthenticated)
	id4, _, _ := s.SignIn(ctx, "sam@example.com", "correct horse battery", "10.0.0.1", "test")
	wantErr(t, s.ChangePassword(ctx, u.ID, "wrong", "a new password"), ErrUnauthenticated)
	if err := s.ChangePassword(ctx, u.ID, "correct horse battery", "a new password"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Session(ctx, id4)
	wantErr(t, err, ErrUnauthenticated)
	id5, _, err := s.SignIn(ctx, "sam@example.com", "a new password", "10.0.0.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	_, err = s.Session(ctx, id5)
	wantErr(t, err, ErrUnauthenticated)
	_, _, err = s.SignIn(ctx, "sam@example.com", "a new password", "10.0.0.1", "test")
	wantErr(t, err, ErrUnauthenticated)
}
