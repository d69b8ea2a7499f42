package server

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
)

// The server works out each request's client address once, with Config.TrustedProxies, for every mounted
// handler: a forged X-Forwarded-For is ignored unless the connection comes from a named proxy.
func TestClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    string
	}{
		{"no trusted proxies", nil, "127.0.0.1"},
		{"another network trusted", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "127.0.0.1"},
		{"this connection's proxy trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount := func(e *echo.Echo) {
				e.GET("/whoami", func(c echo.Context) error {
					return c.String(http.StatusOK, clientip.Of(c.Request())+" "+c.RealIP())
				})
			}
			_, ts := newTestServer(t, Config{Store: &fakeStore{}, TrustedProxies: tc.trusted, Mount: []func(*echo.Echo){mount}})
			res := do(t, http.MethodGet, ts.URL+"/whoami", http.Header{"X-Forwarded-For": {"203.0.113.5"},
				"X-Real-Ip": {"203.0.113.6"}})
			wantStatus(t, res, http.StatusOK)
			if res.body != tc.want+" "+tc.want {
				t.Errorf("clientip.Of and RealIP: %q, want %q for both", res.body, tc.want)
			}
		})
	}
}
