package nft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
)

// newNS, inNS and nsHandle: namespaces of the test (agents/network/netnstest).
func newNS(t testing.TB, dir, name string) string        { return netnstest.New(t, dir, name) }
func inNS(path string, fn func() error) error            { return netnstest.Run(path, fn) }
func nsHandle(t testing.TB, path string) *netlink.Handle { return netnstest.Handle(t, path) }

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
		err = h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr)})
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
}

// waitUp polls until the links of the namespace at path are operationally up. A device that just got its carrier
// drops what it is given until the kernel's link watcher activates it, up to a second later.
func waitUp(t testing.TB, path string, names ...string) {
	t.Helper()
	h := nsHandle(t, path)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
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
			<-tick.C
		}
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

// route adds a route to dst via gw in the namespace at path; an invalid gw makes it unreachable.
func route(t testing.TB, path string, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	r := &netlink.Route{Dst: ipNet(dst)}
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
	} else {
		r.Type = unix.RTN_UNREACHABLE
	}
	if err := nsHandle(t, path).RouteAdd(r); err != nil {
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
	if err := inNS(path, func() (err error) {
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
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
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr().(*net.TCPAddr).IP)
				s := bufio.NewScanner(c)
				for s.Scan() {
					fmt.Fprintln(c, s.Text())
				}
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
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s\n", name, from.(*net.UDPAddr).IP), from)
		}
	}()
}

// answer is who answered a connection, and the client address it saw.
type answer struct{ name, seenFrom string }

// dialTimeout bounds a connection that fails (a refusal or an ICMP error comes at once); it is not a wait.
const dialTimeout = 5 * time.Second

// ask connects from the namespace at path to addr ("tcp" or "udp") and returns the answer. For TCP, the
// connection stays open when keep is non-nil (*keep is set to it), else it is closed.
func ask(path, network string, addr netip.AddrPort, keep *net.Conn) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	var c net.Conn
	if err := inNS(path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network+"4", addr.String())
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

// refused reports whether err is a connection the network refused (reset, port or host unreachable).
func refused(err error) bool {
	return errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.ENETUNREACH)
}
