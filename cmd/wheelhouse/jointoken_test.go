package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestJoinTokenCreateExpiresByDefault: `wheelhouse join-token create` asks for a token that expires in 24 hours
// unless told otherwise; --expires-in 0 asks explicitly for one that never expires.
func TestJoinTokenCreateExpiresByDefault(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = nil
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("the CLI's body: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"token":"K10::abcdef.0123456789abcdefghijklmn"}`))
	}))
	t.Cleanup(srv.Close)
	run := func(args ...string) {
		t.Helper()
		var out bytes.Buffer
		cmd := newJoinTokenCommand(func(string) string { return "" }, &out)
		cmd.SetArgs(append([]string{"create", "--server", srv.URL, "--token", "whp_x", "--cluster", "default",
			"--data-dir", t.TempDir()}, args...))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		if err := cmd.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("join-token create %v: %v\n%s", args, err, out.String())
		}
	}

	before := time.Now().Truncate(time.Second) // the CLI sends whole seconds
	run()
	after := time.Now()
	at, err := time.Parse(time.RFC3339, fmtAny(got["expiresAt"]))
	if err != nil || at.Before(before.Add(24*time.Hour)) || at.After(after.Add(24*time.Hour)) || got["neverExpires"] != nil {
		t.Errorf("without --expires-in the CLI sent %v, want an expiresAt 24 h from now", got)
	}
	run("--expires-in", "0")
	if got["neverExpires"] != true || got["expiresAt"] != nil {
		t.Errorf("with --expires-in 0 the CLI sent %v, want neverExpires", got)
	}
	run("--expires-in", "2h")
	if at, err := time.Parse(time.RFC3339, fmtAny(got["expiresAt"])); err != nil || at.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("with --expires-in 2h the CLI sent %v", got)
	}
}

func fmtAny(v any) string {
	s, _ := v.(string)
	return s
}
