package ipvs

import (
	"bufio"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
)

// cluster is a node (a namespace) with three pods, each on a veth pair of its own (a and b serve, d is a client),
// and an outside host on the node's link 192.0.2.0/24 that routes cluster and external IPs to the node.
type cluster struct {
	node, outside string
	pods          map[string]string // pod name → namespace path
	b             *Backend
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{node: netnstest.New(t, dir, "node"), outside: netnstest.New(t, dir, "outside"), pods: map[string]string{}}
	veth(t, c.node, "ext0", c.outside, "eth0")
	addAddrs(t, c.node, "ext0", netip.PrefixFrom(nodeIP, 24))
	addAddrs(t, c.outside, "eth0", netip.PrefixFrom(outsideIP, 24))
	devs := []string{"ext0"}
	for i, name := range []string{"a", "b", "d"} {
		path := netnstest.New(t, dir, "pod-"+name)
		c.pods[name] = path
		dev := "veth-" + name
		veth(t, c.node, dev, path, "eth0")
		gw4 := netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 1})
		gw6 := netip.MustParseAddr("fd00:244::1")
		gw6 = netip.AddrFrom16(func() [16]byte { b := gw6.As16(); b[5] = byte(i + 1); return b }())
		addAddrs(t, c.node, dev, netip.PrefixFrom(gw4, 24), netip.PrefixFrom(gw6, 64))
		addAddrs(t, path, "eth0", netip.PrefixFrom(podIPs[name], 24), netip.PrefixFrom(podIPv6s[name], 64))
		route(t, path, netip.MustParsePrefix("0.0.0.0/0"), gw4)
		route(t, path, netip.MustParsePrefix("::/0"), gw6)
		if name != "d" {
			serve(t, path, name, serverPort)
		}
		devs = append(devs, dev)
		waitUp(t, path, "eth0")
	}
	waitUp(t, c.node, devs...)
	waitUp(t, c.outside, "eth0")
	for _, s := range []string{"net/ipv6/conf/all/forwarding"} { // the agent's network setup does it for pods
		if err := netnstest.Run(c.node, func() error { return writeSysctl(s, "1") }); err != nil {
			t.Fatal(err)
		}
	}
	route(t, c.outside, netip.MustParsePrefix("10.96.0.0/12"), nodeIP)
	route(t, c.outside, netip.MustParsePrefix("203.0.113.0/24"), nodeIP)
	c.b = newBackend(t, c.node, Config{PodCIDR: podCIDR})
	return c
}

// TestKernelTraffic sends real connections through the virtual services: spread over the endpoints (round robin),
// sticky with affinity, UDP, IPv6, from a pod, the node itself and an outside host, with the client's address kept
// or masqueraded as upstream does, a pod reaching itself (hairpin), a service without endpoints refusing; then
// an endpoint removed: only the other one answers new connections while an established one to it goes on.
func TestKernelTraffic(t *testing.T) {
	requireIPVS(t)
	c := newCluster(t)
	desired := allServices()
	if err := c.b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	gw := func(pod string) string { return map[string]string{"a": "10.244.1.1", "b": "10.244.2.1"}[pod] }
	for _, tc := range []struct {
		name, from, network string
		to                  netip.AddrPort
		want                []string // who answers; nil: all from one of a and b
		seenFrom            func(answer answer) string
	}{
		{"a cluster IP from a pod: both endpoints, the pod's address", c.pods["d"], "tcp", addrPort(web.Key), []string{"a", "b"},
			func(answer) string { return podIPs["d"].String() }},
		{"UDP", c.pods["d"], "udp", addrPort(dns.Key), []string{"a", "b"}, func(answer) string { return podIPs["d"].String() }},
		{"IPv6", c.pods["d"], "tcp", addrPort(webV6.Key), []string{"a", "b"}, func(answer) string { return podIPv6s["d"].String() }},
		{"affinity sticks to one endpoint", c.pods["d"], "tcp", addrPort(sticky.Key), nil, func(answer) string { return podIPs["d"].String() }},
		{"a cluster IP from outside the pod network: masqueraded", c.outside, "tcp", addrPort(web.Key), []string{"a", "b"},
			func(a answer) string { return gw(a.Name) }},
		{"a cluster IP from the node", c.node, "tcp", addrPort(web.Key), []string{"a", "b"}, func(a answer) string { return gw(a.Name) }},
		{"a node port: masqueraded", c.outside, "tcp", addrPort(webNode.Key), []string{"a", "b"}, func(a answer) string { return gw(a.Name) }},
		{"a node port keeping the source", c.outside, "tcp", addrPort(localNode.Key), []string{"a"},
			func(answer) string { return outsideIP.String() }},
		{"an external IP: masqueraded", c.outside, "tcp", addrPort(webExt.Key), []string{"a", "b"}, func(a answer) string { return gw(a.Name) }},
		{"hairpin: a pod reaching itself, masqueraded", c.pods["a"], "tcp", addrPort(self.Key), []string{"a"},
			func(answer) string { return gw("a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			for range 10 {
				a, err := ask(tc.from, tc.network, tc.to, nil)
				if err != nil {
					t.Fatal(err)
				}
				got[a.Name]++
				if want := tc.seenFrom(a); a.SeenFrom != want {
					t.Fatalf("%s saw the client as %s, want %s", a.Name, a.SeenFrom, want)
				}
			}
			names := slices.Sorted(maps.Keys(got))
			if tc.want == nil {
				if len(names) != 1 {
					t.Fatalf("answers %v, want all from one endpoint", got)
				}
				return
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("answers %v, want from each of %v", got, tc.want)
			}
		})
	}

	t.Run("no endpoints: refused", func(t *testing.T) {
		if _, err := ask(c.pods["d"], "tcp", addrPort(empty.Key), nil); !refused(err) {
			t.Fatalf("connecting to a virtual service without endpoints: %v, want refused", err)
		}
	})

	t.Run("an endpoint removed", func(t *testing.T) {
		var kept net.Conn
		first, err := ask(c.pods["d"], "tcp", addrPort(web.Key), &kept)
		if err != nil {
			t.Fatal(err)
		}
		defer kept.Close()
		remaining := map[string]string{"a": "b", "b": "a"}[first.Name]
		vs := web
		vs.Destinations = []netip.AddrPort{ep(remaining)}
		desired[web.Key] = vs
		if err := c.b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if got := askN(c.pods["d"], "tcp", addrPort(web.Key), 10); got[remaining] != 10 {
			t.Fatalf("answers after draining %s: %v, want all from %s", first.Name, got, remaining)
		}
		if _, err := kept.Write([]byte("still there\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(kept).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "still there" {
			t.Fatalf("the connection established to the drained endpoint: %q, %v", line, err)
		}
		if err := c.b.Sync(t.Context(), desired); err != nil { // deletes the drained destination
			t.Fatal(err)
		}
		if got := askN(c.pods["d"], "tcp", addrPort(web.Key), 10); got[remaining] != 10 {
			t.Fatalf("answers after deleting %s: %v, want all from %s", first.Name, got, remaining)
		}
	})

	t.Run("a service removed", func(t *testing.T) {
		delete(desired, web.Key)
		if err := c.b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if _, err := ask(c.pods["d"], "tcp", addrPort(web.Key), nil); err == nil {
			t.Fatal("a removed virtual service still answers")
		}
		if got := askN(c.pods["d"], "tcp", addrPort(sticky.Key), 3); len(got) != 1 {
			t.Fatalf("the others: %v", got)
		}
	})
}
