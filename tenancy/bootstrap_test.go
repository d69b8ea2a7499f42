package tenancy

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBootstrapFreshDatabase(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	res := bootstrap(t, s, BootstrapConfig{})
	if !res.TeamCreated || !res.ClusterCreated || !res.AdminCreated || !res.TokenCreated || !res.PasswordSet {
		t.Errorf("first Bootstrap did not create everything: %+v", res)
	}
	if !wellFormedToken(res.Token) {
		t.Errorf("generated token %q is not a well-formed token", res.Token)
	}
	if len(res.Password) < 16 {
		t.Errorf("generated password has %d characters, want at least 16", len(res.Password))
	}
	p := mustAuth(t, s, res.Token)
	want := Principal{UserID: res.AdminID, Email: AdminEmail, TokenID: p.TokenID, Admin: true}
	if diff := cmp.Diff(want, *p); diff != "" || p.TokenID == "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}
	var hash string
	if err := db.conn.QueryRow(t.Context(), "SELECT password_hash FROM users WHERE email = $1", AdminEmail).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, rehash, err := VerifyPassword(hash, res.Password); !ok || rehash || err != nil {
		t.Errorf("VerifyPassword(stored, generated) = %v, %v, %v", ok, rehash, err)
	}
	var role string
	if err := db.conn.QueryRow(t.Context(), "SELECT role FROM memberships WHERE team_id = $1 AND user_id = $2",
		DefaultTeam, res.AdminID).Scan(&role); err != nil || role != "owner" {
		t.Errorf("admin's role in the default team = %q, %v; want owner", role, err)
	}
	c, err := s.Cluster(t.Context(), DefaultCluster)
	if err != nil || c.TeamID != DefaultTeam || c.ServiceCIDR.String() != "10.96.0.0/12" || c.PodCIDR.String() != "10.244.0.0/16" {
		t.Errorf("Cluster(default) = %+v, %v", c, err)
	}

	again := bootstrap(t, s, BootstrapConfig{})
	if diff := cmp.Diff(BootstrapResult{AdminID: res.AdminID}, again); diff != "" {
		t.Errorf("second Bootstrap did something (-want +got):\n%s", diff)
	}
	if n := db.count(t, "api_tokens"); n != 1 {
		t.Errorf("%d tokens after two Bootstraps, want 1", n)
	}
}

func TestBootstrapConcurrent(t *testing.T) {
	db := newTestDB(t)
	const replicas = 8
	stores := make([]*Store, replicas)
	for i := range stores {
		stores[i] = db.open(t, nil)
	}
	results := make([]BootstrapResult, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { results[i], errs[i] = stores[i].Bootstrap(t.Context(), BootstrapConfig{}) })
	}
	wg.Wait()
	var teams, tokens, passwords int
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("replica %d: Bootstrap: %v", i, errs[i])
		}
		teams += b2i(r.TeamCreated)
		tokens += b2i(r.Token != "")
		passwords += b2i(r.Password != "")
	}
	if teams != 1 || tokens != 1 || passwords != 1 {
		t.Errorf("replicas created the team %d times, a token %d times, a password %d times; want once each", teams, tokens, passwords)
	}
	for table, want := range map[string]int{"teams": 1, "clusters": 1, "users": 1, "memberships": 1, "api_tokens": 1} {
		if n := db.count(t, table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestBootstrapConfiguredSecrets(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	cfg := BootstrapConfig{Token: "operator-chosen-token-1", Password: "correct horse"}
	res := bootstrap(t, s, cfg)
	if res.Token != "" || res.Password != "" || !res.TokenCreated || !res.PasswordSet {
		t.Errorf("Bootstrap with configured secrets = %+v; want them stored, none generated", res)
	}
	if p := mustAuth(t, s, cfg.Token); p.Email != AdminEmail || !p.Admin {
		t.Errorf("configured token authenticates as %+v", p)
	}
	if again := bootstrap(t, s, cfg); again != (BootstrapResult{AdminID: res.AdminID}) {
		t.Errorf("repeated Bootstrap with the same secrets = %+v, want nothing done", again)
	}

	// A new password replaces the old one; a second configured token is added beside the first.
	cfg2 := BootstrapConfig{Token: "operator-chosen-token-2", Password: "battery staple"}
	res2 := bootstrap(t, s, cfg2)
	if !res2.PasswordSet || !res2.TokenCreated || res2.Token != "" || res2.Password != "" {
		t.Errorf("Bootstrap with new secrets = %+v", res2)
	}
	var hash string
	if err := db.conn.QueryRow(t.Context(), "SELECT password_hash FROM users WHERE id = $1", res.AdminID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := VerifyPassword(hash, cfg2.Password); !ok {
		t.Error("the new password does not verify")
	}
	if ok, _, _ := VerifyPassword(hash, cfg.Password); ok {
		t.Error("the old password still verifies")
	}
	for _, tok := range []string{cfg.Token, cfg2.Token} {
		mustAuth(t, s, tok)
	}
	// Without configured secrets nothing is generated: the admin has a token and a password.
	if r := bootstrap(t, s, BootstrapConfig{}); r.Token != "" || r.Password != "" {
		t.Errorf("Bootstrap generated secrets for an admin who has them: %+v", r)
	}
}

func TestBootstrapConfiguredTokenRevoked(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	cfg := BootstrapConfig{Token: "operator-chosen-token-1"}
	bootstrap(t, s, cfg)
	p := mustAuth(t, s, cfg.Token)
	if err := s.RevokeToken(t.Context(), p.TokenID); err != nil {
		t.Fatal(err)
	}
	res := bootstrap(t, s, cfg)
	if !res.TokenUnusable || res.TokenCreated {
		t.Errorf("Bootstrap with a revoked configured token = %+v, want TokenUnusable", res)
	}
	_, err := s.Authenticate(t.Context(), cfg.Token)
	wantErr(t, err, ErrUnauthenticated)
}

func TestBootstrapTokenOfAnotherUser(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	bootstrap(t, s, BootstrapConfig{})
	var other string
	if err := db.conn.QueryRow(t.Context(), "INSERT INTO users (email) VALUES ('bob@example.com') RETURNING id::text").Scan(&other); err != nil {
		t.Fatal(err)
	}
	tok := "token-of-bob-0123456789"
	h := hashToken(tok)
	db.exec(t, "INSERT INTO api_tokens (user_id, name, prefix, hash) VALUES ($1, 'x', '', $2)", other, h[:])
	_, err := s.Bootstrap(t.Context(), BootstrapConfig{Token: tok})
	wantErr(t, err, ErrConflict)
}

func TestBootstrapRehashesOldParameters(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	res := bootstrap(t, s, BootstrapConfig{Password: "correct horse"})
	old := encodeHash(argonParams{time: 1, memory: 8 * 1024, threads: 1}, []byte("0123456789abcdef"), "correct horse")
	db.exec(t, "UPDATE users SET password_hash = $2, password_changed_at = NULL WHERE id = $1", res.AdminID, old)
	again := bootstrap(t, s, BootstrapConfig{Password: "correct horse"})
	if again.PasswordSet {
		t.Errorf("rehashing the same password counted as a change: %+v", again)
	}
	var hash string
	var changed *string
	if err := db.conn.QueryRow(t.Context(), "SELECT password_hash, password_changed_at::text FROM users WHERE id = $1",
		res.AdminID).Scan(&hash, &changed); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") || changed != nil {
		t.Errorf("after Bootstrap: hash %q, password_changed_at %v; want a current-parameter hash, unchanged date", hash, changed)
	}
}

func TestBootstrapLeavesUsedDatabaseAlone(t *testing.T) {
	db := newTestDB(t)
	s := db.open(t, nil)
	bootstrap(t, s, BootstrapConfig{})
	db.exec(t, "DELETE FROM clusters WHERE id = $1", DefaultCluster)
	db.exec(t, "DELETE FROM users WHERE email = $1", AdminEmail)
	res := bootstrap(t, s, BootstrapConfig{})
	if res != (BootstrapResult{}) {
		t.Errorf("Bootstrap on a used database = %+v, want nothing done", res)
	}
	if n := db.count(t, "clusters"); n != 0 {
		t.Errorf("Bootstrap recreated a deleted cluster (%d clusters)", n)
	}
	_, err := s.Bootstrap(t.Context(), BootstrapConfig{Token: "operator-chosen-token-1"})
	wantErr(t, err, ErrNotFound)
}

func TestBootstrapConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  BootstrapConfig
		ok   bool
	}{
		{"empty", BootstrapConfig{}, true},
		{"custom token", BootstrapConfig{Token: strings.Repeat("x", MinTokenLen)}, true},
		{"minted token", BootstrapConfig{Token: newToken()}, true},
		{"short token", BootstrapConfig{Token: strings.Repeat("x", MinTokenLen-1)}, false},
		{"whp_ token with a bad checksum", BootstrapConfig{Token: TokenPrefix + strings.Repeat("a", TokenLen-4)}, false},
		{"password", BootstrapConfig{Password: "12345678"}, true},
		{"short password", BootstrapConfig{Password: "1234567"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok {
				wantErr(t, err, ErrInvalid)
				if tc.cfg.Token != "" && strings.Contains(err.Error(), tc.cfg.Token) {
					t.Errorf("error %q contains the token", err)
				}
			}
		})
	}
}
