package dns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseReverse(t *testing.T) {
	tests := []struct {
		name string
		want string // "" for not a full reverse name
	}{
		{"10.0.96.10.in-addr.arpa.", "10.96.0.10"},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "fd00::1"},
		{"0.96.10.in-addr.arpa.", ""},
		{"256.0.96.10.in-addr.arpa.", ""},
		{"+1.0.96.10.in-addr.arpa.", ""},
		{"x.0.96.10.in-addr.arpa.", ""},
		{"in-addr.arpa.", ""},
		{"10.in-addr.arpa.", ""},
		{"0.d.f.ip6.arpa.", ""},
		{"10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.ip6.arpa.", ""},
		{"g.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", ""},
		{"example.org.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseReverse(tt.name)
			if tt.want == "" {
				if ok {
					t.Errorf("parsed as %s", got)
				}
				return
			}
			equal(t, "address", got.String(), tt.want)
		})
	}
}

// FuzzParseReverse: parseReverse takes back exactly the names dns.ReverseAddr makes.
func FuzzParseReverse(f *testing.F) {
	for _, s := range []string{"10.0.96.10.in-addr.arpa.", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "example.org."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ip, ok := parseReverse(name)
		if !ok {
			return
		}
		back, err := dns.ReverseAddr(ip.String())
		if err != nil {
			t.Fatalf("%q parsed as %s: %v", name, ip, err)
		}
		if !equivalentReverse(back, name) {
			t.Errorf("%q parsed as %s, whose reverse name is %q", name, ip, back)
		}
		if again, _ := parseReverse(back); again != ip {
			t.Errorf("%q parsed as %s, its reverse name %q as %s", name, ip, back, again)
		}
	})
}

// equivalentReverse compares reverse names up to case and leading zeros of IPv4 labels (010 is 10).
func equivalentReverse(a, b string) bool {
	if strings.HasSuffix(a, ".ip6.arpa.") {
		return strings.EqualFold(a, b)
	}
	la, lb := strings.Split(a, "."), strings.Split(b, ".")
	if len(la) != len(lb) {
		return false
	}
	for i := range la {
		if strings.TrimLeft(la[i], "0") != strings.TrimLeft(lb[i], "0") {
			return false
		}
	}
	return true
}
