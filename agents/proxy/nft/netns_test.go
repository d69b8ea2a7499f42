package nft

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
)

// newNS, inNS and nsHandle: namespaces of the test (agents/network/netnstest).
func newNS(t testing.TB, dir, name string) string        { return netnstest.New(t, dir, name) }
func inNS(path string, fn func() error) error            { return netnstest.Run(path, fn) }
func nsHandle(t testing.TB, path string) *netlink.Handle { return netnstest.Handle(t, path) }

// The traffic helpers the IPVS backend's tests share (agents/network/netnstest).
type answer = netnstest.Answer

const dialTimeout = netnstest.DialTimeout

func serve(t testing.TB, path, name string, port uint16) { netnstest.Serve(t, path, name, port) }
func ask(path, network string, addr netip.AddrPort, keep *net.Conn) (answer, error) {
	return netnstest.Ask(path, network, addr, keep)
}
func askN(path, network string, addr netip.AddrPort, n int) map[string]int {
	return netnstest.AskN(path, network, addr, n)
}
func refused(err error) bool                            { return netnstest.Refused(err) }
func waitUp(t testing.TB, path string, names ...string) { netnstest.WaitUp(t, path, names...) }
func route(t testing.TB, path string, dst netip.Prefix, gw netip.Addr) {
	netnstest.Route(t, path, dst, gw)
}

// Test hosts are network namespaces bind-mounted on files of a temporary directory: nothing a test does touches
// the namespace the test runs in, and everything goes when the test ends (unmounting a namespace destroys it with
// its links, once the backend's socket is closed).

// sysctl writes a sysctl of the namespace at path (under /proc/sys).
func sysctl(t testing.TB, path, key, value string) {
	t.Helper()
	if err := inNS(path, func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) }); err != nil {
		t.Fatalf("sysctl %s in %s: %v", key, filepath.Base(path), err)
	}
}

// link makes a veth pair between two namespaces: name in a with addrA, peer in b (named peer) with addrB.
func link(t testing.TB, a, name string, addrA netip.Prefix, b, peer string, addrB netip.Prefix) {
	t.Helper()
	nsB, err := netns.GetFromPath(b)
	if err != nil {
		t.Fatal(err)
	}
	defer nsB.Close()
	ha := nsHandle(t, a)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer, PeerNamespace: netlink.NsFd(nsB)}); err != nil {
		t.Fatalf("veth %s: %v", name, err)
	}
	up(t, ha, name, addrA)
	up(t, nsHandle(t, b), peer, addrB)
}

// up gives a link its address (if any) and sets it up.
func up(t testing.TB, h *netlink.Handle, name string, addr netip.Prefix) {
	t.Helper()
	l, err := h.LinkByName(name)
	if err == nil && addr.IsValid() {
		err = h.AddrAdd(l, &netlink.Addr{IPNet: netnstest.IPNet(addr)})
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
}

// bridge makes a bridge with addr in the namespace at path.
func bridge(t testing.TB, path, name string, addr netip.Prefix) {
	t.Helper()
	h := nsHandle(t, path)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		t.Fatalf("bridge %s: %v", name, err)
	}
	up(t, h, name, addr)
}

// pod makes a namespace with eth0 (addr) on a bridge of node, and a default route via gw.
func pod(t testing.TB, dir, node, br, name string, addr netip.Prefix, gw netip.Addr) string {
	t.Helper()
	path := newNS(t, dir, name)
	link(t, path, "eth0", addr, node, "veth-"+name, netip.Prefix{})
	h := nsHandle(t, node)
	port, err := h.LinkByName("veth-" + name)
	if err != nil {
		t.Fatal(err)
	}
	master, err := h.LinkByName(br)
	if err == nil {
		err = h.LinkSetMaster(port, master)
	}
	if err == nil { // as agents/network: a pod reaching itself through a Service, bridged back by br_netfilter
		err = h.LinkSetHairpin(port, true)
	}
	if err != nil {
		t.Fatal(err)
	}
	route(t, path, netip.MustParsePrefix("0.0.0.0/0"), gw)
	return path
}
