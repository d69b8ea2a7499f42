package clientip

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
)

func TestExtractor(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		realIP  string
		want    string
	}{
		{"no proxies: the connection", nil, "198.51.100.7:4000", nil, "", "198.51.100.7"},
		{"no proxies: forged headers ignored", nil, "198.51.100.7:4000", []string{"203.0.113.1"}, "203.0.113.2", "198.51.100.7"},
		{"no proxies: loopback is not trusted", nil, "127.0.0.1:4000", []string{"203.0.113.1"}, "", "127.0.0.1"},
		{"no proxies: private networks are not trusted", nil, "192.168.1.1:4000", []string{"203.0.113.1"}, "", "192.168.1.1"},
		{"IPv6 connection", nil, "[2001:db8::1]:4000", []string{"203.0.113.1"}, "", "2001:db8::1"},
		{"from a trusted proxy: the forwarded address", proxies, "10.1.2.3:4000", []string{"203.0.113.1"}, "", "203.0.113.1"},
		{"from a trusted proxy without the header", proxies, "10.1.2.3:4000", nil, "", "10.1.2.3"},
		{"X-Real-IP is never read", proxies, "10.1.2.3:4000", nil, "203.0.113.2", "10.1.2.3"},
		{"from an untrusted address: the connection", proxies, "198.51.100.7:4000", []string{"203.0.113.1"}, "", "198.51.100.7"},
		{"loopback is trusted only when named", proxies, "127.0.0.1:4000", []string{"203.0.113.1"}, "", "127.0.0.1"},
		{"a chain of proxies: the nearest untrusted address", proxies, "10.0.0.1:4000",
			[]string{"192.0.2.99, 203.0.113.1", "10.0.0.2"}, "", "203.0.113.1"},
		{"IPv6 proxy", proxies, "[2001:db8::1]:4000", []string{"203.0.113.1"}, "", "203.0.113.1"},
		{"garbage in the header: the connection", proxies, "10.1.2.3:4000", []string{"not-an-address"}, "", "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add(echo.HeaderXForwardedFor, v)
			}
			if tc.realIP != "" {
				r.Header.Set(echo.HeaderXRealIP, tc.realIP)
			}
			if got := Extractor(tc.trusted)(r); got != tc.want {
				t.Errorf("client address %q, want %q", got, tc.want)
			}
		})
	}
}

// Middleware works the address out once; Of reads it (in requests made in process with the same context too),
// and without it falls back to the connection, never to a header.
func TestMiddlewareAndOf(t *testing.T) {
	e := echo.New()
	e.IPExtractor = Of
	e.Use(Middleware(Extractor([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})))
	var of, realIP, inProcess string
	e.POST("/", func(c echo.Context) error {
		of, realIP = Of(c.Request()), c.RealIP()
		sub := httptest.NewRequest(http.MethodPost, "/sub", nil).WithContext(c.Request().Context())
		sub.RemoteAddr = "" // as the dashboard's in-process calls
		inProcess = Of(sub)
		return nil
	})
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set(echo.HeaderXForwardedFor, "203.0.113.9")
	e.ServeHTTP(httptest.NewRecorder(), r)
	if of != "203.0.113.9" || realIP != of || inProcess != of {
		t.Errorf("Of %q, RealIP %q, in process %q; want 203.0.113.9 each", of, realIP, inProcess)
	}

	bare := httptest.NewRequest(http.MethodPost, "/", nil)
	bare.RemoteAddr = "198.51.100.7:4000"
	bare.Header.Set(echo.HeaderXForwardedFor, "203.0.113.9")
	if got := Of(bare); got != "198.51.100.7" {
		t.Errorf("Of without the middleware = %q, want the connection's 198.51.100.7", got)
	}
}

func TestParseNetworks(t *testing.T) {
	got, err := ParseNetworks(" 10.0.0.0/8,192.0.2.7, 2001:db8::/32 ,10.1.2.3/16,,::1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("::1/128")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("ParseNetworks (-want +got):\n%s", diff)
	}
	if got, err := ParseNetworks(""); err != nil || got != nil {
		t.Errorf("ParseNetworks(\"\") = %v, %v; want nil, nil", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.0/8;", "fe80::1%eth0"} {
		if _, err := ParseNetworks(bad); err == nil {
			t.Errorf("ParseNetworks(%q) accepted it", bad)
		}
	}
}
