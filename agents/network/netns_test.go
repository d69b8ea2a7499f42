package network

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Test hosts are network namespaces bind-mounted on files of a temporary directory: nothing a test does
// touches the namespace the test runs in.

// newNS makes a network namespace with lo up and returns its path; it is removed when the test ends.
func newNS(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	err := onThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.New() // unshares this thread
		if err != nil {
			return err
		}
		defer ns.Close()
		mountErr := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
		if err := netns.Set(orig); err != nil {
			return fmt.Errorf("back to the test's namespace: %w", err) // the thread stays locked: Go drops it
		}
		runtime.UnlockOSThread()
		return mountErr
	})
	if err != nil {
		t.Fatalf("network namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", path, err)
		}
	})
	h := nsHandle(t, path)
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// onThread runs fn on a new locked OS thread; fn unlocks it when it leaves the thread as it found it.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// inNS runs fn on a thread in the namespace at path (sockets fn opens stay there).
func inNS(t *testing.T, path string, fn func() error) error {
	t.Helper()
	return onThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			return err
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			return err
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		return err
	})
}

// nsHandle is a netlink handle in the namespace at path, closed when the test ends.
func nsHandle(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

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
