package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// TestSignInBackoff: failed sign-ins from one browser meet the growing back-off of their account and address
// (tenancy's throttling; tenancy's tests show other addresses unaffected) as a 429 page saying how long to wait,
// with Retry-After.
func TestSignInBackoff(t *testing.T) {
	e := newEnv(t)
	attacker := e.browser()
	wrong := url.Values{"email": {"owner@t1.example"}, "password": {"guess"}}
	for range tenancy.FreeFailures {
		if resp := attacker.post("/ui/signin", wrong, false); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a wrong password: %d", resp.StatusCode)
		}
	}
	// The back-off doubles with each evaluated failure, so within a few attempts one is refused however slow
	// the machine.
	var resp *http.Response
	for range 8 {
		if resp = attacker.post("/ui/signin", wrong, false); resp.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("no back-off after %d failures: %d", tenancy.FreeFailures+8, resp.StatusCode)
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 || secs > int(tenancy.MaxBackoff.Seconds()) {
		t.Errorf("Retry-After %q: want the back-off's seconds", resp.Header.Get("Retry-After"))
	}
	doc := parsePage(t, resp, http.StatusTooManyRequests)
	if got := testid(doc, "form-error").Text(); !strings.Contains(got, "Try again in") {
		t.Errorf("the 429 page says %q", got)
	}
}
