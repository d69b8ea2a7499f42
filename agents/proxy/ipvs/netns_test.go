package ipvs

import (
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/ipvs/vmtest"
)

// Test hosts are network namespaces (agents/network/netnstest): nothing a test does touches the namespace it runs
// in, and everything goes when the test ends.

// requireIPVS skips a test when the kernel has no IPVS — except in the VM, where that is a failure.
func requireIPVS(t testing.TB) {
	t.Helper()
	if err := Available(0); err != nil {
		if vmtest.InGuest() {
			t.Fatalf("no IPVS in the VM's kernel: %v", err)
		}
		t.Skipf("the kernel has no IPVS (ip_vs): %v — TestVM runs this test in Debian's kernel under qemu", err)
	}
}

// newBackend opens a backend in the namespace at path, closed when the test ends.
func newBackend(t testing.TB, path string, cfg Config) *Backend {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	cfg.NetNS = ns
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	}
	b, err := New(cfg)
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

// ipvsHandle is an IPVS handle of the test's own in the namespace at path (to look at and meddle with the
// kernel's state behind the backend's back), closed when the test ends.
func ipvsHandle(t testing.TB, path string) *ipvs.Handle {
	t.Helper()
	h, err := ipvs.New(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// veth makes a veth pair between two namespaces, name in a and peer in b, both up.
func veth(t testing.TB, a, name, b, peer string) {
	t.Helper()
	nsB, err := netns.GetFromPath(b)
	if err != nil {
		t.Fatal(err)
	}
	defer nsB.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := netnstest.Handle(t, a).LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer, PeerNamespace: netlink.NsFd(nsB)}); err != nil {
		t.Fatalf("veth %s: %v", name, err)
	}
	for path, dev := range map[string]string{a: name, b: peer} {
		h := netnstest.Handle(t, path)
		l, err := h.LinkByName(dev)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("link %s: %v", dev, err)
		}
	}
}

// addAddrs gives link dev of the namespace at path addresses (without duplicate address detection).
func addAddrs(t testing.TB, path, dev string, prefixes ...netip.Prefix) {
	t.Helper()
	h := netnstest.Handle(t, path)
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: netnstest.IPNet(p), Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatalf("address %v on %s: %v", p, dev, err)
		}
	}
}

// The traffic helpers the nftables backend's tests share (agents/network/netnstest).
type answer = netnstest.Answer

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

// writeSysctl writes a sysctl of the calling thread's namespace.
func writeSysctl(key, value string) error {
	return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
}
