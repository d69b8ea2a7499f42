package platform

import (
	"strings"
	"testing"
)

// TestUnstorableText is the platform half of issue 34 item 11: a NUL byte or invalid UTF-8 in a path parameter,
// a query filter or a body field reached PostgreSQL, which refuses such text, and came back a 500 and an error
// log. Each is now a 4xx problem: a name in the path that cannot exist is 404, text in a body or filter 422, and
// nothing of the driver's message is shown.
func TestUnstorableText(t *testing.T) {
	e := newEnv(t)
	const nul, bad = "a%00b", "a%FFb"
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
	}{
		{"team NUL", "GET", "/teams/" + nul, "", 404},
		{"team bad UTF-8", "GET", "/teams/" + bad, "", 404},
		{"member NUL", "DELETE", "/teams/default/members/" + nul, "", 404},
		{"invitation NUL", "DELETE", "/teams/default/invitations/" + nul, "", 404},
		{"cluster NUL", "GET", "/clusters/" + nul, "", 404},
		{"cluster bad UTF-8", "DELETE", "/clusters/" + bad, "", 404},
		{"join token NUL", "DELETE", "/clusters/default/join-tokens/" + nul, "", 404},
		{"api token NUL", "DELETE", "/tokens/" + nul, "", 404},
		{"node credential NUL", "DELETE", "/clusters/default/node-credentials/" + nul, "", 404},
		{"node credential bad UTF-8", "DELETE", "/clusters/default/node-credentials/" + bad, "", 404},
		{"audit actor NUL", "GET", "/teams/default/audit?actor=" + nul, "", 422},
		{"audit cluster NUL", "GET", "/teams/default/audit?cluster=" + nul, "", 422},
		{"audit action NUL", "GET", "/teams/default/audit?action=" + nul, "", 422},
		{"audit actor bad UTF-8", "GET", "/teams/default/audit?actor=" + bad, "", 422},
		{"team name NUL", "POST", "/teams", `{"id":"ab","name":"x\u0000"}`, 422},
		{"cluster id NUL", "POST", "/teams/default/clusters", `{"id":"a\u0000","name":"x"}`, 422},
		{"api token name NUL", "POST", "/tokens", `{"name":"a\u0000"}`, 422},
		{"join token description NUL", "POST", "/clusters/default/join-tokens", `{"description":"a\u0000"}`, 422},
		{"invitation email NUL", "POST", "/teams/default/invitations", `{"email":"a\u0000@b.c","role":"viewer"}`, 422},
		{"sign-in email NUL", "POST", "/login", `{"email":"a\u0000@b.c","password":"x\u0000yyyyyyyy"}`, 422},
		{"join node name NUL", "POST", "/join", `{"token":"K10::abcdef.aaaaaaaaaaaaaaaaaaaaaaaaaaa","nodeName":"a\u0000"}`, 422},
		{"join token NUL", "POST", "/join", `{"token":"K10::abcdef.aaaaaaaaaaaaaaaaaaaaaa\u0000aaaa","nodeName":"a"}`, 401},
		{"transfer to NUL", "POST", "/teams/default/transfer", `{"userId":"a\u0000"}`, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := e.do(e.admin, tc.method, tc.path, tc.body).problem(t, tc.code)
			for _, fe := range p.Errors {
				if strings.Contains(fe.Message, "SQLSTATE") || strings.Contains(fe.Message, "0x00") {
					t.Errorf("the driver's message shows: %q", fe.Message)
				}
			}
		})
	}
}
