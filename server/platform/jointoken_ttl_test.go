package platform

import (
	"slices"
	"testing"
	"time"
)

// TestJoinTokensExpireByDefault: a join token created without an expiry lives DefaultJoinTokenTTL (24 h, as
// kubeadm's), never indefinitely; a token without expiry takes an explicit neverExpires.
func TestJoinTokensExpireByDefault(t *testing.T) {
	e := newEnv(t)
	e.ok(e.admin, "POST", "/teams/default/clusters", `{"id":"staging","name":"Staging"}`, 201)
	create := func(body string) joinTokenView {
		t.Helper()
		var jt joinTokenCreated
		e.ok(e.admin, "POST", "/clusters/staging/join-tokens", body, 201).json(t, &jt)
		return jt.JoinToken
	}

	for _, body := range []string{"", `{}`, `{"description":"rack 1","maxUses":3}`} {
		before := time.Now().Truncate(time.Microsecond) // the database keeps microseconds
		jt := create(body)
		after := time.Now()
		if jt.ExpiresAt == nil {
			t.Fatalf("a join token created with %q never expires", body)
		}
		if exp := *jt.ExpiresAt; exp.Before(before.Add(DefaultJoinTokenTTL)) || exp.After(after.Add(DefaultJoinTokenTTL)) {
			t.Errorf("a join token created with %q at %s..%s expires at %s, want %s later", body, before, after, exp, DefaultJoinTokenTTL)
		}
	}

	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	if jt := create(`{"expiresAt":"` + at.Format(time.RFC3339) + `"}`); jt.ExpiresAt == nil || !jt.ExpiresAt.Equal(at) {
		t.Errorf("an explicit expiresAt %s: got %v", at, jt.ExpiresAt)
	}
	if jt := create(`{"neverExpires":true}`); jt.ExpiresAt != nil {
		t.Errorf("neverExpires: the token expires at %s", jt.ExpiresAt)
	}
	p := e.do(e.admin, "POST", "/clusters/staging/join-tokens", `{"neverExpires":true,"expiresAt":"`+at.Format(time.RFC3339)+`"}`).problem(t, 422)
	if fields := fieldsOf(p); !slices.Equal(fields, []string{"neverExpires"}) {
		t.Errorf("neverExpires with expiresAt: invalid fields %v", fields)
	}
}
