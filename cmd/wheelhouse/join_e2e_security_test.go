package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestJoinRevealsNoNodeNames is the regression test of issue 34 item 9 against the real binary: POST
// /platform/v1/join answered 409 "node ... already joined" for a taken name before it checked the join
// token's secret, so anyone holding a token id (ids are public: listed, logged) could probe a cluster's node
// names. Now every bad token — wrong secret, unknown, revoked, used up — gets the same 401 for a joined name
// and for one that never joined, byte for byte.
func TestJoinRevealsNoNodeNames(t *testing.T) {
	bin := buildBinary(t)
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", t.TempDir())
	p.waitReady(t)
	newToken := func(body string) (token, id string) {
		t.Helper()
		code, b := platformCall(t, p.url, e2eToken, "POST", "/clusters/default/join-tokens", body)
		if code != http.StatusCreated {
			t.Fatalf("create join token: %d %s", code, b)
		}
		var out struct {
			Token     string
			JoinToken struct{ ID string }
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out.Token, out.JoinToken.ID
	}
	join := func(token, node string) (int, string) {
		t.Helper()
		body, err := json.Marshal(map[string]string{"token": token, "nodeName": node})
		if err != nil {
			t.Fatal(err)
		}
		code, b := platformCall(t, p.url, "", "POST", "/join", string(body))
		return code, string(b)
	}

	good, _ := newToken(`{"description":"rack"}`)
	if code, b := join(good, "worker-1"); code != http.StatusCreated {
		t.Fatalf("join worker-1: %d %s", code, b)
	}
	head, _, _ := strings.Cut(good, ".")
	wrongSecret := head + "." + strings.Repeat("x", 32)
	unknownID := head[:strings.LastIndex(head, "::")+2] + "zzzzzz." + strings.Repeat("x", 32)
	revoked, revokedID := newToken(`{}`)
	if code, b := platformCall(t, p.url, e2eToken, "DELETE", "/clusters/default/join-tokens/"+revokedID, ""); code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", code, b)
	}
	usedUp, _ := newToken(`{"maxUses":1}`)
	if code, b := join(usedUp, "worker-2"); code != http.StatusCreated {
		t.Fatalf("join worker-2: %d %s", code, b)
	}
	for _, tc := range []struct{ name, token string }{
		{"wrong secret", wrongSecret},
		{"unknown id", unknownID},
		{"revoked", revoked},
		{"used up", usedUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			joinedCode, joinedBody := join(tc.token, "worker-1")
			freshCode, freshBody := join(tc.token, "never-joined")
			if joinedCode != http.StatusUnauthorized {
				t.Errorf("a joined name with a bad token: %d %s, want 401", joinedCode, joinedBody)
			}
			if joinedCode != freshCode || joinedBody != freshBody {
				t.Errorf("a joined and a fresh name are told apart:\n joined: %d %s\n fresh:  %d %s",
					joinedCode, joinedBody, freshCode, freshBody)
			}
			if strings.Contains(joinedBody, "worker-1") || strings.Contains(joinedBody, "already") {
				t.Errorf("the answer speaks of the node: %s", joinedBody)
			}
		})
	}
	// With the token itself, a taken name is still a conflict: the token is the authentication.
	if code, b := join(good, "worker-1"); code != http.StatusConflict {
		t.Errorf("a valid token for a taken name: %d %s, want 409", code, b)
	}
}
