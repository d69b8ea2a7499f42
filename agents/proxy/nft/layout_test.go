package nft

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// TestServiceRules: what a virtual service's chain holds, by the rules' comments (which name everything a rule
// depends on: the read-back compares them).
func TestServiceRules(t *testing.T) {
	cfg := Config{PodCIDR: podCIDR}.withDefaults()
	two := []netip.AddrPort{ep("a"), ep("b")}
	for _, tc := range []struct {
		name string
		cfg  Config
		vs   proxy.VirtualService
		want []string
	}{
		{"cluster IP: masquerade from outside the pod CIDR, then 1 in 2, 1 in 1", cfg, web, []string{
			"default/web:http: masquerade clients outside 10.244.0.0/16",
			"default/web:http: 1 in 2 to 10.244.0.2:8080",
			"default/web:http: 1 in 1 to 10.244.0.3:8080"}},
		{"cluster IP without a pod CIDR: no masquerade", Config{}.withDefaults(), web, []string{
			"default/web:http: 1 in 2 to 10.244.0.2:8080",
			"default/web:http: 1 in 1 to 10.244.0.3:8080"}},
		{"node port: masquerade all", cfg, webNode, []string{
			"default/web:http: masquerade (NodePort)",
			"default/web:http: 1 in 2 to 10.244.0.2:8080",
			"default/web:http: 1 in 1 to 10.244.0.3:8080"}},
		{"node port keeping the source", cfg, localNode, []string{"default/local:http: 1 in 1 to 10.244.0.2:8080"}},
		{"external IP", cfg, proxy.VirtualService{Key: key("203.0.113.7", corev1.ProtocolTCP, 80), Kind: proxy.ExternalIP,
			Service: "default/web:http", Destinations: two[:1]}, []string{
			"default/web:http: masquerade (ExternalIP)",
			"default/web:http: 1 in 1 to 10.244.0.2:8080"}},
		{"no endpoints, TCP: reset", cfg, emptyTCP, []string{
			"default/empty:http: masquerade clients outside 10.244.0.0/16",
			"default/empty:http: no endpoints, reset"}},
		{"no endpoints, UDP: port unreachable", cfg, emptyUDP, []string{
			"default/empty:dns: masquerade clients outside 10.244.0.0/16",
			"default/empty:dns: no endpoints, port unreachable"}},
		{"affinity: a client's endpoint first, then a choice that is remembered", cfg, sticky, []string{
			"default/sticky:http: masquerade clients outside 10.244.0.0/16",
			"default/sticky:http: affinity 1h0m0s to 10.244.0.2:8080",
			"default/sticky:http: affinity 1h0m0s to 10.244.0.3:8080",
			"default/sticky:http: 1 in 2 to 10.244.0.2:8080, affinity 1h0m0s",
			"default/sticky:http: 1 in 1 to 10.244.0.3:8080, affinity 1h0m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, comments(serviceRules(tc.cfg, tc.vs))); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestServiceRulesDiffer: rules that differ have different comments, so the read-back sees every change.
func TestServiceRulesDiffer(t *testing.T) {
	cfg := Config{PodCIDR: podCIDR}.withDefaults()
	edits := map[string]func(*proxy.VirtualService){
		"an endpoint": func(v *proxy.VirtualService) { v.Destinations = v.Destinations[:1] },
		"a port": func(v *proxy.VirtualService) {
			v.Destinations = []netip.AddrPort{ep("a"), netip.MustParseAddrPort("10.244.0.3:9090")}
		},
		"the kind":     func(v *proxy.VirtualService) { v.Kind = proxy.ExternalIP },
		"the affinity": func(v *proxy.VirtualService) { v.Affinity = time.Minute },
		"keep source":  func(v *proxy.VirtualService) { v.Kind, v.KeepSource = proxy.NodePort, true },
		"the Service":  func(v *proxy.VirtualService) { v.Service = "default/other:http" },
		"no endpoints": func(v *proxy.VirtualService) { v.Destinations = nil },
		"the order":    func(v *proxy.VirtualService) { v.Destinations = []netip.AddrPort{ep("b"), ep("a")} },
	}
	base := comments(serviceRules(cfg, web))
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			vs := web
			vs.Destinations = []netip.AddrPort{ep("a"), ep("b")}
			edit(&vs)
			if cmp.Equal(base, comments(serviceRules(cfg, vs))) {
				t.Fatalf("changing %s leaves the comments %q", name, base)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		valid bool
	}{
		{"defaults", Config{}, true},
		{"a pod CIDR", Config{PodCIDR: podCIDR}, true},
		{"an IPv6 pod CIDR", Config{PodCIDR: netip.MustParsePrefix("fd00::/64")}, false},
		{"a mark of two bits", Config{MasqueradeMark: 0x3000}, false},
		{"another bit", Config{MasqueradeMark: 0x8000}, true},
		{"a long table name", Config{Table: string(make([]byte, 256))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate() = %v, want valid %v", err, tc.valid)
			}
		})
	}
}
