package nft

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The test cluster is one node (a namespace) with two bridges of the pod network: wh0 holds the server pods a, b
// and c (c is never ready, so never a destination), wh1 the client pod d, so that replies to d are routed by the
// node (the same bridge needs br_netfilter: see TestSameBridge). An outside host reaches the node over its own
// link; cluster IPs are routed to it, and it answers them with ICMP unreachable, so that a cluster IP nothing
// programs fails at once.
var (
	podCIDR   = netip.MustParsePrefix("10.244.0.0/16")
	gatewayA  = netip.MustParseAddr("10.244.0.1") // wh0's address: what masqueraded connections come from
	gatewayD  = netip.MustParseAddr("10.244.1.1")
	nodeIP    = netip.MustParseAddr("192.0.2.1")
	outsideIP = netip.MustParseAddr("192.0.2.100")
	podIPs    = map[string]netip.Addr{"a": netip.MustParseAddr("10.244.0.2"), "b": netip.MustParseAddr("10.244.0.3"),
		"c": netip.MustParseAddr("10.244.0.4"), "d": netip.MustParseAddr("10.244.1.2")}
)

const serverPort = 8080

type cluster struct {
	node, outside string
	pods          map[string]string // pod name → namespace path
	b             *Backend
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{node: newNS(t, dir, "node"), outside: newNS(t, dir, "outside"), pods: map[string]string{}}
	link(t, c.node, "ext0", netip.PrefixFrom(nodeIP, 24), c.outside, "eth0", netip.PrefixFrom(outsideIP, 24))
	bridge(t, c.node, "wh0", netip.PrefixFrom(gatewayA, 24))
	bridge(t, c.node, "wh1", netip.PrefixFrom(gatewayD, 24))
	for _, name := range []string{"a", "b", "c", "d"} {
		br, gw := "wh0", gatewayA
		if name == "d" {
			br, gw = "wh1", gatewayD
		}
		c.pods[name] = pod(t, dir, c.node, br, "pod-"+name, netip.PrefixFrom(podIPs[name], 24), gw)
		if name != "d" {
			serve(t, c.pods[name], name, serverPort)
		}
	}
	waitUp(t, c.node, "ext0", "wh0", "wh1", "veth-pod-a", "veth-pod-b", "veth-pod-c", "veth-pod-d")
	waitUp(t, c.outside, "eth0")
	for _, path := range c.pods {
		waitUp(t, path, "eth0")
	}
	sysctl(t, c.node, "net/ipv4/ip_forward", "1")
	sysctl(t, c.outside, "net/ipv4/ip_forward", "1")
	serviceCIDR := netip.MustParsePrefix("10.96.0.0/12")
	route(t, c.node, serviceCIDR, outsideIP)
	route(t, c.outside, serviceCIDR, netip.Addr{})
	route(t, c.outside, podCIDR, nodeIP)
	c.b = newBackend(t, c.node, Config{PodCIDR: podCIDR})
	return c
}

// newBackend opens a backend in the namespace at path, closed when the test ends.
func newBackend(t testing.TB, path string, cfg Config) *Backend {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	cfg.NetNS, cfg.Logger = ns, slog.New(slog.NewTextHandler(testLog{t}, nil))
	b, err := New(cfg)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Skip("the kernel has no nf_tables netlink (CONFIG_NF_TABLES)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func ep(pod string) netip.AddrPort { return netip.AddrPortFrom(podIPs[pod], serverPort) }

func key(addr string, proto corev1.Protocol, port uint16) proxy.Key {
	return proxy.Key{Addr: netip.MustParseAddr(addr), Protocol: proto, Port: port}
}

func state(vss ...proxy.VirtualService) proxy.State {
	st := proxy.State{}
	for _, v := range vss {
		st[v.Key] = v
	}
	return st
}

// The cluster's Services: the key of each, and its virtual service.
var (
	web       = proxy.VirtualService{Key: key("10.96.0.10", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/web:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	dns       = proxy.VirtualService{Key: key("10.96.0.11", corev1.ProtocolUDP, 53), Kind: proxy.ClusterIP, Service: "default/dns:dns", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	sticky    = proxy.VirtualService{Key: key("10.96.0.12", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/sticky:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}, Affinity: time.Hour}
	self      = proxy.VirtualService{Key: key("10.96.0.13", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/self:http", Destinations: []netip.AddrPort{ep("a")}}
	emptyTCP  = proxy.VirtualService{Key: key("10.96.0.14", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/empty:http"}
	emptyUDP  = proxy.VirtualService{Key: key("10.96.0.14", corev1.ProtocolUDP, 53), Kind: proxy.ClusterIP, Service: "default/empty:dns"}
	webNode   = proxy.VirtualService{Key: key("192.0.2.1", corev1.ProtocolTCP, 30080), Kind: proxy.NodePort, Service: "default/web:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	localNode = proxy.VirtualService{Key: key("192.0.2.1", corev1.ProtocolTCP, 30081), Kind: proxy.NodePort, Service: "default/local:http", Destinations: []netip.AddrPort{ep("a")}, KeepSource: true}
	webV6     = proxy.VirtualService{Key: key("fd00::10", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/web:http"}
	// mixed has an IPv6 destination, which the model never gives an IPv4 address: it is left out.
	mixed = proxy.VirtualService{Key: key("10.96.0.15", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/mixed:http",
		Destinations: []netip.AddrPort{ep("a"), netip.MustParseAddrPort("[fd00::2]:8080")}}
)

// allServices is a state with every kind of virtual service, and the record it leaves.
func allServices() (desired, ipv4 proxy.State) {
	mixedV4 := mixed
	mixedV4.Destinations = mixed.Destinations[:1]
	return state(web, dns, sticky, self, emptyTCP, emptyUDP, webNode, localNode, webV6, mixed),
		state(web, dns, sticky, self, emptyTCP, emptyUDP, webNode, localNode, mixedV4)
}

// TestServices programs every kind of virtual service and proves that connections spread over the ready
// endpoints, or stick to one with affinity.
func TestServices(t *testing.T) {
	c := newCluster(t)
	desired, ipv4 := allServices()
	if err := c.b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(programmedOf(ipv4), c.b.Programmed(), cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); diff != "" {
		t.Fatalf("the record (-want +got):\n%s", diff)
	}
	assertTable(t, c.b)

	for _, tc := range []struct {
		name, from, network string
		to                  netip.AddrPort
		want                []string // nil: all from one of a and b
	}{
		{"a cluster IP spreads over the ready endpoints", c.pods["d"], "tcp", addrPort(web.Key), []string{"a", "b"}},
		{"UDP too", c.pods["d"], "udp", addrPort(dns.Key), []string{"a", "b"}},
		{"a node port from outside", c.outside, "tcp", addrPort(webNode.Key), []string{"a", "b"}},
		{"affinity sticks to one endpoint", c.pods["d"], "tcp", addrPort(sticky.Key), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := askN(tc.from, tc.network, tc.to, 40)
			names := slices.Sorted(maps.Keys(got))
			if tc.want == nil {
				if len(names) != 1 || names[0] != "a" && names[0] != "b" {
					t.Fatalf("answers %v, want all from one of a and b", got)
				}
				return
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("answers %v, want from each of %v only", got, tc.want)
			}
		})
	}

	// An operator's `nft list ruleset` prints the table (nft aborts on concatenations it cannot type, such as an
	// integer or a two-register immediate): the maps' elements as endpoints, the shared chains, the affinity set.
	t.Run("nft lists it", func(t *testing.T) {
		out, err := exec.Command("nsenter", "--net="+c.node, "nft", "list", "ruleset").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list ruleset: %v\n%s", err, out)
		}
		for _, want := range []string{
			"10.96.0.10 . tcp . 80 : goto endpoints-2-masquerade-outside",
			"10.96.0.14 . udp . 53 : goto no-endpoints-unreachable",
			"10.96.0.10 . tcp . 80 . 0x00000001 : 10.244.0.3 . 8080",
			"dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints",
			"type mark . ipv4_addr . ipv4_addr . inet_service", // the affinity set, with the clients' entries
			"10.244.1.2 . 10.244.0.",
			"dnat to 10.244.0.3:8080 comment \"default/sticky:http: 1 in 1 to 10.244.0.3:8080, affinity 1h0m0s\"",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("nft list ruleset has no %q:\n%s", want, out)
			}
		}
	})

	t.Run("idempotent", func(t *testing.T) {
		before, gen := c.b.lastBatch, c.b.gen
		if err := c.b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if c.b.gen != gen || c.b.lastBatch != before {
			t.Fatalf("a Sync without changes made a transaction (generation %d → %d)", gen, c.b.gen)
		}
	})
}

// TestSources: who answers, and which client address they see: masquerade as upstream does it.
func TestSources(t *testing.T) {
	c := newCluster(t)
	desired, _ := allServices()
	if err := c.b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from string
		to         netip.AddrPort
		wantName   string // "" for any
		seenFrom   netip.Addr
	}{
		{"a pod keeps its address", c.pods["d"], addrPort(web.Key), "", podIPs["d"]},
		{"a node port masquerades", c.outside, addrPort(webNode.Key), "", gatewayA},
		{"a KeepSource node port keeps the client's address", c.outside, addrPort(localNode.Key), "a", outsideIP},
		{"the node itself, outside the pod CIDR, is masqueraded", c.node, addrPort(web.Key), "", gatewayA},
		{"hairpin: a pod reaching itself through its Service", c.pods["a"], addrPort(self.Key), "a", gatewayA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ask(tc.from, "tcp", tc.to, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantName != "" && got.Name != tc.wantName || got.SeenFrom != tc.seenFrom.String() {
				t.Fatalf("answered by %s seeing %s, want %q seeing %v", got.Name, got.SeenFrom, tc.wantName, tc.seenFrom)
			}
		})
	}
}

// TestNoEndpoints: a virtual service without destinations refuses at once.
func TestNoEndpoints(t *testing.T) {
	c := newCluster(t)
	if err := c.b.Sync(t.Context(), state(emptyTCP, emptyUDP)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, network string
		to            netip.AddrPort
	}{
		{"TCP is reset", "tcp", addrPort(emptyTCP.Key)},
		{"UDP gets port unreachable", "udp", addrPort(emptyUDP.Key)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ask(c.pods["d"], tc.network, tc.to, nil); !errors.Is(err, unix.ECONNREFUSED) {
				t.Fatalf("got %v, want connection refused", err)
			}
		})
	}
}

// TestSameBridge: a pod reaching a Service whose endpoints share its bridge. The replies are bridged, not
// routed, so only br_netfilter (bridge-nf-call-iptables) lets conntrack undo the DNAT.
func TestSameBridge(t *testing.T) {
	c := newCluster(t)
	knob := "net/bridge/bridge-nf-call-iptables"
	if err := inNS(c.node, func() error { _, err := os.Stat("/proc/sys/" + knob); return err }); errors.Is(err, os.ErrNotExist) {
		t.Skip("the kernel has no br_netfilter (CONFIG_BRIDGE_NETFILTER, module br_netfilter not loaded)")
	}
	sysctl(t, c.node, knob, "1")
	if err := c.b.Sync(t.Context(), state(web)); err != nil {
		t.Fatal(err)
	}
	got := askN(c.pods["c"], "tcp", addrPort(web.Key), 40)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("answers %v, want from each of a and b", got)
	}
}

// TestDeleteService: an empty state leaves the fixed chains only, and the cluster IP goes; Cleanup removes the
// table.
func TestDeleteService(t *testing.T) {
	c := newCluster(t)
	if err := c.b.Sync(t.Context(), state(web, sticky, webNode)); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(c.pods["d"], "tcp", addrPort(web.Key), nil); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := c.b.Sync(t.Context(), proxy.State{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.b.sock.readImage(c.b.cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	want := expectedImage(c.b.cfg, nil)
	if diff := got.difference(want); diff != "" || len(got.services) != 0 || len(got.endpoints) != 0 || len(got.hairpin) != 0 {
		t.Fatalf("after deleting every Service: %s (%d chains, %d map elements, %d endpoints, %d hairpin elements)", diff,
			len(got.chains), len(got.services), len(got.endpoints), len(got.hairpin))
	}
	for _, k := range []proxy.Key{web.Key, sticky.Key} {
		if _, err := ask(c.pods["d"], "tcp", addrPort(k), nil); !refused(err) {
			t.Fatalf("%v after its deletion: %v, want refused or unreachable", k, err)
		}
	}

	for range 2 { // idempotent
		if err := c.b.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err := c.b.sock.readRules(c.b.cfg.Table); err != nil || len(rules) != 0 {
		t.Fatalf("rules after Cleanup: %v, %v", rules, err)
	}
	if _, err := c.b.sock.get(unix.NFT_MSG_GETTABLE, family, attrs(nil).str(unix.NFTA_TABLE_NAME, c.b.cfg.Table)); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("the table after Cleanup: %v, want ENOENT", err)
	}
	if len(c.b.Programmed()) != 0 {
		t.Fatal("the record survived Cleanup")
	}
}

// TestDrain: a destination that leaves gets no new connections while an established one goes on; it leaves the
// record at the next sync, and can come back.
func TestDrain(t *testing.T) {
	c := newCluster(t)
	if err := c.b.Sync(t.Context(), state(web)); err != nil {
		t.Fatal(err)
	}
	var kept net.Conn
	for range 100 { // a connection to b: each lands there with probability 1/2
		var conn net.Conn
		a, err := ask(c.pods["d"], "tcp", addrPort(web.Key), &conn)
		if err != nil {
			t.Fatal(err)
		}
		if a.Name == "b" {
			kept = conn
			break
		}
		conn.Close()
	}
	if kept == nil {
		t.Fatal("no connection landed on b")
	}
	defer kept.Close()

	onlyA := web
	onlyA.Destinations = []netip.AddrPort{ep("a")}
	if err := c.b.Sync(t.Context(), state(onlyA)); err != nil {
		t.Fatal(err)
	}
	if got := c.b.Programmed()[web.Key].Drained; !slices.Equal(got, []netip.AddrPort{ep("b")}) {
		t.Fatalf("drained: %v, want b", got)
	}
	if got := askN(c.pods["d"], "tcp", addrPort(web.Key), 20); got["a"] != 20 {
		t.Fatalf("new connections after draining b: %v, want all to a", got)
	}
	echo(t, kept, "still there")

	gen := c.b.gen
	if err := c.b.Sync(t.Context(), state(onlyA)); err != nil {
		t.Fatal(err)
	}
	if got := c.b.Programmed()[web.Key].Drained; len(got) != 0 || c.b.gen != gen {
		t.Fatalf("the next sync: drained %v, generation %d → %d; want b forgotten without a transaction", got, gen, c.b.gen)
	}
	echo(t, kept, "and still")

	if err := c.b.Sync(t.Context(), state(web)); err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(maps.Keys(askN(c.pods["d"], "tcp", addrPort(web.Key), 40))); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("after b came back: answers from %v", names)
	}
}

// echo sends a line on an established connection and expects it back.
func echo(t *testing.T, c net.Conn, line string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("established connection: %v", err)
	}
	buf := make([]byte, len(line)+1)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != line+"\n" {
		t.Fatalf("established connection echoed %q, %v", buf, err)
	}
}

// assertTable reads the table back and compares it with what the backend recorded.
func assertTable(t *testing.T, b *Backend) {
	t.Helper()
	got, err := b.sock.readImage(b.cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	if diff := got.difference(expectedImage(b.cfg, b.Programmed())); diff != "" {
		t.Fatalf("the table: %s", diff)
	}
}

func addrPort(k proxy.Key) netip.AddrPort { return netip.AddrPortFrom(k.Addr, k.Port) }
