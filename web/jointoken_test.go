package web

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// TestJoinFormDefaultsToADayExpiry: the join form, submitted as it is shown, makes a token that expires in 24 hours
// (as does one without hours); a token that never expires takes the explicit checkbox.
func TestJoinFormDefaultsToADayExpiry(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")
	doc := b.page("/ui/c/c1/join", http.StatusOK)
	if got, _ := testid(doc, "join-hours").Attr("value"); got != "24" {
		t.Errorf("the form's expiry is %q hours, want 24", got)
	}
	if _, checked := testid(doc, "join-never").Attr("checked"); checked {
		t.Error("the form asks for a token that never expires")
	}
	hours, _ := testid(doc, "join-hours").Attr("value")

	// newToken submits the form and returns the token it made.
	newToken := func(form url.Values) tenancy.JoinToken {
		t.Helper()
		before, err := e.ten.JoinTokens(t.Context(), "c1")
		if err != nil {
			t.Fatal(err)
		}
		parsePage(t, b.post("/ui/c/c1/join", form, true), http.StatusCreated)
		after, err := e.ten.JoinTokens(t.Context(), "c1")
		if err != nil || len(after) != len(before)+1 {
			t.Fatalf("join tokens after the form: %d (%v), want %d", len(after), err, len(before)+1)
		}
		return after[len(after)-1]
	}
	for name, form := range map[string]url.Values{
		"as shown":      {"description": {"rack 1"}, "hours": {hours}, "maxUses": {""}},
		"without hours": {"description": {"rack 2"}, "hours": {""}},
	} {
		start := time.Now().Truncate(time.Second) // the form sends whole seconds
		jt := newToken(form)
		end := time.Now()
		if jt.ExpiresAt.IsZero() {
			t.Errorf("%s: the token never expires", name)
		} else if jt.ExpiresAt.Before(start.Add(platform.DefaultJoinTokenTTL)) || jt.ExpiresAt.After(end.Add(platform.DefaultJoinTokenTTL)) {
			t.Errorf("%s: made at %s..%s, the token expires at %s, want 24 h later", name, start, end, jt.ExpiresAt)
		}
	}
	if jt := newToken(url.Values{"description": {"forever"}, "hours": {hours}, "neverExpires": {"1"}}); !jt.ExpiresAt.IsZero() {
		t.Errorf("never expires: the token expires at %s", jt.ExpiresAt)
	}
}
