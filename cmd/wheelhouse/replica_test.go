package main

import (
	"log/slog"
	"net/netip"
	"testing"
)

// TestAPIEndpoint: the advertised API address written to default/kubernetes's Endpoints is the advertise URL's
// address and port (the scheme's port when it names none); a loopback host, which Endpoints may not hold, is
// replaced by a global unicast address of the machine or left out.
func TestAPIEndpoint(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://192.0.2.5:8443", "192.0.2.5:8443"},
		{"http://10.1.2.3", "10.1.2.3:80"},
		{"https://10.1.2.3", "10.1.2.3:443"},
		{"https://[2001:db8::1]:6443", "[2001:db8::1]:6443"},
	} {
		if got := (replica{url: tc.url}).apiEndpoint(t.Context(), slog.Default()); got != netip.MustParseAddrPort(tc.want) {
			t.Errorf("%s: %v, want %s", tc.url, got, tc.want)
		}
	}
	for _, u := range []string{"https://127.0.0.1:8080", "https://localhost:8080"} {
		got := (replica{url: u}).apiEndpoint(t.Context(), slog.Default())
		if got.IsValid() && (!got.Addr().IsGlobalUnicast() || got.Port() != 8080) {
			t.Errorf("%s: %v, want a global unicast address on port 8080 or none", u, got)
		}
	}
}
