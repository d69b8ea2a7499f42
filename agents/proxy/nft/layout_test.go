package nft

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// TestServiceChain: the chain a virtual service goes to and what it holds, by the rules' comments (which name
// everything a rule depends on besides the chain's name: the read-back compares them), and its endpoints.
func TestServiceChain(t *testing.T) {
	cfg := Config{PodCIDR: podCIDR}.withDefaults()
	two := []netip.AddrPort{ep("a"), ep("b")}
	const pick2 = "1 of 2 endpoints at random, from the endpoints map"
	for _, tc := range []struct {
		name      string
		cfg       Config
		vs        proxy.VirtualService
		chain     string
		want      []string
		endpoints int
	}{
		{"cluster IP: masquerade from outside the pod CIDR, then 1 of 2", cfg, web, "endpoints-2-masquerade-outside",
			[]string{"masquerade clients outside 10.244.0.0/16", pick2}, 2},
		{"cluster IP without a pod CIDR: no masquerade", Config{}.withDefaults(), web, "endpoints-2", []string{pick2}, 2},
		{"node port: masquerade all", cfg, webNode, "endpoints-2-masquerade", []string{"masquerade", pick2}, 2},
		{"node port keeping the source", cfg, localNode, "endpoints-1",
			[]string{"1 of 1 endpoints at random, from the endpoints map"}, 1},
		{"external IP", cfg, proxy.VirtualService{Key: key("203.0.113.7", corev1.ProtocolTCP, 80), Kind: proxy.ExternalIP,
			Service: "default/web:http", Destinations: two}, "endpoints-2-masquerade", []string{"masquerade", pick2}, 2},
		{"no endpoints, TCP: reset", cfg, emptyTCP, "no-endpoints-reset", []string{"no endpoints: reset"}, 0},
		{"no endpoints, UDP: port unreachable", cfg, emptyUDP, "no-endpoints-unreachable",
			[]string{"no endpoints: port unreachable"}, 0},
		{"affinity: its own chain, a client's endpoint first, then a choice that is remembered", cfg, sticky,
			"svc-" + sticky.Key.String(), []string{
				"default/sticky:http: masquerade clients outside 10.244.0.0/16",
				"default/sticky:http: affinity 1h0m0s to 10.244.0.2:8080",
				"default/sticky:http: affinity 1h0m0s to 10.244.0.3:8080",
				"default/sticky:http: 1 in 2 to 10.244.0.2:8080, affinity 1h0m0s",
				"default/sticky:http: 1 in 1 to 10.244.0.3:8080, affinity 1h0m0s"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serviceChain(tc.cfg, tc.vs)
			if c.name != tc.chain {
				t.Errorf("chain %q, want %q", c.name, tc.chain)
			}
			if diff := cmp.Diff(tc.want, comments(c.rules)); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			es := endpointElems(tc.vs)
			if len(es) != tc.endpoints {
				t.Fatalf("%d endpoint elements, want %d", len(es), tc.endpoints)
			}
			for i, e := range es {
				if !bytes.Equal(e.key, endpointsKey(tc.vs.Key, i)) || !bytes.Equal(e.data, target(tc.vs.Destinations[i])) {
					t.Errorf("element %d: %x → %x, want slot %d → %v", i, e.key, e.data, i, tc.vs.Destinations[i])
				}
			}
		})
	}
}

// TestServiceChainsDiffer: every change to a virtual service changes what the kernel holds for it — its chain's
// name or rules, or its endpoint elements — so an incremental sync has something to send and the read-back sees
// every difference.
func TestServiceChainsDiffer(t *testing.T) {
	cfg := Config{PodCIDR: podCIDR}.withDefaults()
	edits := map[string]func(*proxy.VirtualService){
		"an endpoint": func(v *proxy.VirtualService) { v.Destinations = v.Destinations[:1] },
		"a port": func(v *proxy.VirtualService) {
			v.Destinations = []netip.AddrPort{ep("a"), netip.MustParseAddrPort("10.244.0.3:9090")}
		},
		"the kind":     func(v *proxy.VirtualService) { v.Kind = proxy.ExternalIP },
		"the affinity": func(v *proxy.VirtualService) { v.Affinity = time.Minute },
		"keep source":  func(v *proxy.VirtualService) { v.Kind, v.KeepSource = proxy.NodePort, true },
		"no endpoints": func(v *proxy.VirtualService) { v.Destinations = nil },
		"the order":    func(v *proxy.VirtualService) { v.Destinations = []netip.AddrPort{ep("b"), ep("a")} },
	}
	objects := func(vs proxy.VirtualService) []string {
		c := serviceChain(cfg, vs)
		out := append([]string{c.name}, comments(c.rules)...)
		for _, e := range endpointElems(vs) {
			out = append(out, fmt.Sprintf("%x → %x", e.key, e.data))
		}
		return out
	}
	for _, base := range []proxy.VirtualService{web, sticky} {
		for name, edit := range edits {
			t.Run(base.Service+", "+name, func(t *testing.T) {
				vs := base
				vs.Destinations = []netip.AddrPort{ep("a"), ep("b")}
				before := objects(vs)
				edit(&vs)
				if cmp.Equal(before, objects(vs)) {
					t.Fatalf("changing %s leaves %q", name, before)
				}
			})
		}
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
