package network

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The test network: two nodes and an outside host on a LAN (TEST-NET-3, in namespaces of the test's own), the
// cluster's pod CIDR split between the nodes.
var (
	lanNet      = netip.MustParsePrefix("203.0.113.0/24")
	nodeAIP     = netip.MustParseAddr("203.0.113.1")
	nodeBIP     = netip.MustParseAddr("203.0.113.2")
	outsideIP   = netip.MustParseAddr("203.0.113.100")
	clusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	podCIDRA    = netip.MustParsePrefix("10.244.0.0/24")
	podCIDRB    = netip.MustParsePrefix("10.244.1.0/24")
)

// dial connects from the namespace at path to addr and returns the source address the server saw.
func dial(t *testing.T, path string, addr string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a bound on failure, not a wait
	defer cancel()
	var c net.Conn
	if err := inNS(t, path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func newNetwork(t *testing.T, cfg Config) *Network {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func setUp(t *testing.T, n *Network, id, path string) string {
	t.Helper()
	ip, err := n.SetUp(t.Context(), id, path)
	if err != nil {
		t.Fatalf("SetUp %s: %v", id, err)
	}
	return ip
}

// TestPodNetwork builds two nodes on a LAN, runs the pod network on each and proves it with TCP: pod to pod on
// one node, pod to pod across nodes over host-gw routes (source address kept), pod to outside (masqueraded to
// the node's address).
func TestPodNetwork(t *testing.T) {
	dir := t.TempDir()
	l := newLAN(t, dir)
	nodeA := l.host("node-a", netip.PrefixFrom(nodeAIP, lanNet.Bits()))
	nodeB := l.host("node-b", netip.PrefixFrom(nodeBIP, lanNet.Bits()))
	outside := l.host("outside", netip.PrefixFrom(outsideIP, lanNet.Bits()))

	cfgA := Config{PodCIDR: podCIDRA, ClusterCIDR: clusterCIDR, StateDir: t.TempDir(), NetNS: nodeA}
	a := newNetwork(t, cfgA)
	b := newNetwork(t, Config{PodCIDR: podCIDRB, ClusterCIDR: clusterCIDR, StateDir: t.TempDir(), NetNS: nodeB})
	peers := map[netip.Prefix]netip.Addr{podCIDRA: nodeAIP, podCIDRB: nodeBIP}
	for _, n := range []*Network{a, b} {
		for range 2 { // idempotent
			if err := n.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := n.SyncRoutes(t.Context(), peers); err != nil {
				t.Fatal(err)
			}
		}
	}
	pods := map[string]string{}
	for _, name := range []string{"a1", "a2", "b1", "b2"} {
		pods[name] = newNS(t, dir, "pod-"+name)
	}
	ips := map[string]string{}
	for _, name := range []string{"a1", "a2"} {
		ips[name] = setUp(t, a, name, pods[name])
	}
	for _, name := range []string{"b1", "b2"} {
		ips[name] = setUp(t, b, name, pods[name])
	}
	want := map[string]string{"a1": "10.244.0.2", "a2": "10.244.0.3", "b1": "10.244.1.2", "b2": "10.244.1.3"}
	for name, ip := range want {
		if ips[name] != ip {
			t.Errorf("pod %s got %s, want %s", name, ips[name], ip)
		}
	}

	listen(t, pods["a1"], netip.MustParseAddrPort(ips["a1"]+":8080"))
	listen(t, outside, netip.AddrPortFrom(outsideIP, 8080))
	for _, tc := range []struct {
		name, from, to, seenAs string
	}{
		{"same node", pods["a2"], ips["a1"] + ":8080", ips["a2"]},
		{"across nodes", pods["b1"], ips["a1"] + ":8080", ips["b1"]},
		{"to outside, masqueraded", pods["a1"], outsideIP.String() + ":8080", nodeAIP.String()},
		{"to outside from node b", pods["b2"], outsideIP.String() + ":8080", nodeBIP.String()},
		{"node to its pod", nodeA, ips["a1"] + ":8080", "10.244.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dial(t, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.seenAs {
				t.Fatalf("the server saw %s, want %s", got, tc.seenAs)
			}
		})
	}

	t.Run("routes", func(t *testing.T) {
		got, err := a.Routes()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[podCIDRB] != nodeBIP {
			t.Fatalf("node a's routes: %v", got)
		}
		// A route of someone else's is left alone; a stale one of ours goes.
		h := nsHandle(t, nodeA)
		other := &netlink.Route{Dst: ipNet(netip.MustParsePrefix("198.51.100.0/24")), Gw: nodeBIP.AsSlice()}
		if err := h.RouteAdd(other); err != nil {
			t.Fatal(err)
		}
		if err := a.SyncRoutes(t.Context(), map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.7.0/24"): nodeBIP}); err != nil {
			t.Fatal(err)
		}
		if got, _ := a.Routes(); len(got) != 1 || got[netip.MustParsePrefix("10.244.7.0/24")] != nodeBIP {
			t.Fatalf("after a sync: %v", got)
		}
		if _, err := h.RouteGet(net.ParseIP("198.51.100.1")); err != nil {
			t.Fatalf("someone else's route went: %v", err)
		}
		if err := a.SyncRoutes(t.Context(), peers); err != nil {
			t.Fatal(err)
		}
		if got, err := dial(t, pods["b2"], ips["a1"]+":8080"); err != nil || got != ips["b2"] {
			t.Fatalf("after restoring the routes: %q, %v", got, err)
		}
	})

	t.Run("teardown", func(t *testing.T) {
		for range 2 { // idempotent
			if err := a.TearDown(t.Context(), "a2", pods["a2"]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := nsHandle(t, pods["a2"]).LinkByName("eth0"); !notFound(err) {
			t.Fatalf("the pod's eth0 after TearDown: %v", err)
		}
		if _, err := nsHandle(t, nodeA).LinkByName(hostInterface("a2")); !notFound(err) {
			t.Fatalf("the host's veth after TearDown: %v", err)
		}
		// A sandbox that was never set up, or whose namespace is gone.
		if err := a.TearDown(t.Context(), "never", "/nonexistent"); err != nil {
			t.Fatal(err)
		}
		held, err := a.Allocations()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := held["a2"]; ok || held["a1"].String() != ips["a1"] || len(held) != 1 {
			t.Fatalf("allocations after TearDown: %v", held)
		}
	})

	t.Run("state survives a restart", func(t *testing.T) {
		a2 := newNetwork(t, cfgA)
		if err := a2.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if ip := setUp(t, a2, "a1", pods["a1"]); ip != ips["a1"] { // set up again: the address it holds
			t.Fatalf("a1 got %s, held %s", ip, ips["a1"])
		}
		// The next is past the last handed out (a2's, released), not a1's.
		ip := setUp(t, a2, "a3", newNS(t, dir, "pod-a3"))
		if ip != "10.244.0.4" {
			t.Fatalf("a3 got %s, want 10.244.0.4", ip)
		}
		// The pod's listener is bound to its address, which it has again on the new eth0.
		if got, err := dial(t, pods["b1"], ips["a1"]+":8080"); err != nil || got != ips["b1"] {
			t.Fatalf("a1 after its veth pair was made anew: %q, %v", got, err)
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		for range 2 {
			if err := a.Cleanup(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		h := nsHandle(t, nodeA)
		if _, err := h.LinkByName(DefaultBridge); !notFound(err) {
			t.Fatalf("bridge after Cleanup: %v", err)
		}
		if _, err := h.LinkByName(hostInterface("a1")); !notFound(err) {
			t.Fatalf("a veth after Cleanup: %v", err)
		}
		if got, err := a.Routes(); err != nil || len(got) != 0 {
			t.Fatalf("routes after Cleanup: %v, %v", got, err)
		}
		ns, err := netns.GetFromPath(nodeA)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
		if err != nil {
			t.Fatal(err)
		}
		tables, err := c.ListTables()
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb.Name == tableName {
				t.Fatal("the nftables table is still there")
			}
		}
	})
}

// TestSetUpFailureLeavesNothing: a namespace that does not exist fails SetUp, which releases the address.
func TestSetUpFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	node := newNS(t, dir, "node")
	n := newNetwork(t, Config{PodCIDR: podCIDRA, ClusterCIDR: clusterCIDR, StateDir: t.TempDir(), NetNS: node})
	if err := n.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SetUp(t.Context(), "x", dir+"/missing"); err == nil {
		t.Fatal("SetUp into a missing namespace succeeded")
	}
	held, err := n.Allocations()
	if err != nil || len(held) != 0 {
		t.Fatalf("allocations: %v, %v", held, err)
	}
	if _, err := nsHandle(t, node).LinkByName(hostInterface("x")); !notFound(err) {
		t.Fatalf("veth left behind: %v", err)
	}
}

// TestReclaim: addresses of sandboxes the runtime no longer knows are released and their veth pairs deleted;
// live ones keep theirs.
func TestReclaim(t *testing.T) {
	dir := t.TempDir()
	node := newNS(t, dir, "node")
	n := newNetwork(t, Config{PodCIDR: podCIDRA, ClusterCIDR: clusterCIDR, StateDir: t.TempDir(), NetNS: node})
	if err := n.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	kept := setUp(t, n, "kept", newNS(t, dir, "pod-kept"))
	setUp(t, n, "lost", newNS(t, dir, "pod-lost"))
	gone, err := n.Reclaim(t.Context(), map[string]bool{"kept": true})
	if err != nil || !slices.Equal(gone, []string{"lost"}) {
		t.Fatalf("Reclaim: %v, %v; want [lost]", gone, err)
	}
	held, err := n.Allocations()
	if err != nil || len(held) != 1 || held["kept"].String() != kept {
		t.Fatalf("allocations after Reclaim: %v, %v", held, err)
	}
	h := nsHandle(t, node)
	if _, err := h.LinkByName(hostInterface("lost")); !notFound(err) {
		t.Fatalf("the lost sandbox's veth after Reclaim: %v", err)
	}
	if _, err := h.LinkByName(hostInterface("kept")); err != nil {
		t.Fatalf("the live sandbox's veth: %v", err)
	}
	if gone, err := n.Reclaim(t.Context(), map[string]bool{"kept": true}); err != nil || len(gone) != 0 {
		t.Fatalf("Reclaim again: %v, %v", gone, err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{PodCIDR: podCIDRA, ClusterCIDR: clusterCIDR, StateDir: "/var/lib/x"}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		valid bool
	}{
		{"valid", func(*Config) {}, true},
		{"no pod CIDR", func(c *Config) { c.PodCIDR = netip.Prefix{} }, false},
		{"IPv6", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("fd00::/64") }, false},
		{"/31", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.244.0.0/31") }, false},
		{"outside the cluster", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.9.0.0/24") }, false},
		{"cluster narrower", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/25") }, false},
		{"long bridge name", func(c *Config) { c.Bridge = "a-very-long-bridge" }, false},
		{"no state dir", func(c *Config) { c.StateDir = "" }, false},
		{"tiny MTU", func(c *Config) { c.MTU = 60 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if err := c.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

// TestEnableBridgeNetfilter: the knob is set in the node's namespace only (it is per namespace), loading
// br_netfilter first when the kernel has it as a module.
func TestEnableBridgeNetfilter(t *testing.T) {
	dir := t.TempDir()
	node := newNS(t, dir, "node")
	n := newNetwork(t, Config{PodCIDR: podCIDRA, ClusterCIDR: clusterCIDR, StateDir: t.TempDir(), NetNS: node})
	if err := n.EnableBridgeNetfilter(); err != nil {
		if _, statErr := os.Stat("/proc/sys/net/bridge"); errors.Is(statErr, fs.ErrNotExist) {
			t.Skipf("the kernel has no br_netfilter (CONFIG_BRIDGE_NETFILTER): %v", err)
		}
		t.Fatal(err)
	}
	var got []byte
	if err := inNS(t, node, func() (err error) { got, err = os.ReadFile(bridgeNetfilterKnob); return err }); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != "1" {
		t.Errorf("%s in the node's namespace = %q, want 1", bridgeNetfilterKnob, got)
	}
}
