package main

import "testing"

// --trusted-proxies and WHEELHOUSE_TRUSTED_PROXIES bind the server's trusted proxies (none by default).
func TestTrustedProxiesFlag(t *testing.T) {
	env := map[string]string{"WHEELHOUSE_TRUSTED_PROXIES": "10.0.0.0/8"}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{env, nil, "10.0.0.0/8"},
		{env, []string{"--trusted-proxies", "192.0.2.0/24,127.0.0.1"}, "192.0.2.0/24,127.0.0.1"},
	} {
		if got := parseServer(t, tc.env, tc.args...).TrustedProxies; got != tc.want {
			t.Errorf("env %v, args %v: trusted proxies %q, want %q", tc.env, tc.args, got, tc.want)
		}
	}
}
