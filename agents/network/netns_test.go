package network

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
)

// newNS, inNS and nsHandle: namespaces of the test (agents/network/netnstest).
func newNS(t *testing.T, dir, name string) string           { return netnstest.New(t, dir, name) }
func inNS(t *testing.T, path string, fn func() error) error { return netnstest.Run(path, fn) }
func nsHandle(t *testing.T, path string) *netlink.Handle    { return netnstest.Handle(t, path) }

// Test hosts are network namespaces bind-mounted on files of a temporary directory: nothing a test does
// touches the namespace the test runs in.

// lan is an L2 segment: a bridge in its own namespace, with hosts attached by veth pairs (eth0 on their side).
type lan struct {
	t      *testing.T
	dir    string
	h      *netlink.Handle
	bridge netlink.Link
}

func newLAN(t *testing.T, dir string) *lan {
	t.Helper()
	h := nsHandle(t, newNS(t, dir, "lan"))
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "lan0"
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		t.Fatal(err)
	}
	br, err := h.LinkByName("lan0")
	if err == nil {
		err = h.LinkSetUp(br)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &lan{t: t, dir: dir, h: h, bridge: br}
}

// host makes a namespace on the LAN with addr (a prefix: the LAN's network) on its eth0.
func (l *lan) host(name string, addr netip.Prefix) string {
	l.t.Helper()
	path := newNS(l.t, l.dir, name)
	ns, err := netns.GetFromPath(path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer ns.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MasterIndex = "lan-"+name, l.bridge.Attrs().Index
	if err := l.h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}); err != nil {
		l.t.Fatal(err)
	}
	port, err := l.h.LinkByName(attrs.Name)
	if err == nil {
		err = l.h.LinkSetUp(port)
	}
	if err != nil {
		l.t.Fatal(err)
	}
	h := nsHandle(l.t, path)
	eth, err := h.LinkByName("eth0")
	if err == nil {
		err = h.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(addr)})
	}
	if err == nil {
		err = h.LinkSetUp(eth)
	}
	if err != nil {
		l.t.Fatal(err)
	}
	return path
}

// listen serves TCP on addr in the namespace at path: each connection is sent the address it came from.
func listen(t *testing.T, path string, addr netip.AddrPort) {
	t.Helper()
	var ln net.Listener
	if err := inNS(t, path, func() (err error) {
		ln, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatalf("listen on %v in %s: %v", addr, filepath.Base(path), err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, c.RemoteAddr().(*net.TCPAddr).IP.String())
			c.Close()
		}
	}()
}
