package ipvs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(p), Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatalf("address %v on %s: %v", p, dev, err)
		}
	}
}

// waitUp polls until the named links of the namespace at path are operationally up (a device that just got its
// carrier drops what it is given until the kernel's link watcher activates it).
func waitUp(t testing.TB, path string, names ...string) {
	t.Helper()
	h := netnstest.Handle(t, path)
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("link %s in %s is %v", name, filepath.Base(path), l.Attrs().OperState)
			}
			poll()
		}
	}
}

// poll yields between two looks at something the test waits for.
func poll() { <-time.After(5 * time.Millisecond) }

// route adds a route to dst via gw in the namespace at path.
func route(t testing.TB, path string, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	if err := netnstest.Handle(t, path).RouteAdd(&netlink.Route{Dst: ipNet(dst), Gw: gw.AsSlice()}); err != nil {
		t.Fatalf("route %v via %v: %v", dst, gw, err)
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// serve runs a TCP and a UDP server on port in the namespace at path. A TCP connection is sent "<name> <the
// client's address>" and then has its lines echoed; a UDP datagram is answered with the same line.
func serve(t testing.TB, path, name string, port uint16) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := netnstest.Run(path, func() (err error) {
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatalf("servers in %s: %v", name, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s\n", name, from.(*net.UDPAddr).AddrPort().Addr().Unmap()), from)
		}
	}()
}

// answer is who answered a connection, and the client address it saw.
type answer struct{ name, seenFrom string }

// dialTimeout bounds a connection that fails (a refusal or an ICMP error comes at once); it is not a wait.
const dialTimeout = 5 * time.Second

// ask connects from the namespace at path to addr over network ("tcp" or "udp") and returns the answer. For TCP,
// the connection stays open when keep is non-nil (*keep is set to it).
func ask(path, network string, addr netip.AddrPort, keep *net.Conn) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	var c net.Conn
	if err := netnstest.Run(path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr.String())
		return err
	}); err != nil {
		return answer{}, err
	}
	_ = c.SetDeadline(time.Now().Add(dialTimeout))
	if network == "udp" {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			c.Close()
			return answer{}, err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if keep != nil && err == nil {
		*keep = c
	} else {
		c.Close()
	}
	if err != nil {
		return answer{}, err
	}
	name, from, _ := strings.Cut(strings.TrimSpace(line), " ")
	return answer{name: name, seenFrom: from}, nil
}

// askN makes n connections and counts the answers by name (errors under "error: ...").
func askN(path, network string, addr netip.AddrPort, n int) map[string]int {
	out := map[string]int{}
	for range n {
		a, err := ask(path, network, addr, nil)
		if err != nil {
			out["error: "+err.Error()]++
			continue
		}
		out[a.name]++
	}
	return out
}

// writeSysctl writes a sysctl of the calling thread's namespace.
func writeSysctl(key, value string) error {
	return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
}

// refused reports whether err is a connection the network refused (reset, port or host unreachable).
func refused(err error) bool {
	return errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.ENETUNREACH)
}
