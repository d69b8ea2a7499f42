package perf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netNS is a network namespace the harness made. Only its handle holds it (no bind mount, no name in
// /run/netns): closing the handle destroys it once no socket or thread is left in it, and it dies with the
// harness whatever happens. agents/network/netnstest does the same for tests, where namespaces are bind-mounted.
type netNS struct {
	name string
	h    netns.NsHandle
}

// newNetNS makes a network namespace with lo up.
func newNetNS(name string) (*netNS, error) {
	var h netns.NsHandle
	err := onThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		if h, err = netns.New(); err != nil { // unshares this thread
			return err
		}
		if err := netns.Set(orig); err != nil {
			return fmt.Errorf("back to the harness's namespace: %w", err) // the thread stays locked: Go drops it
		}
		runtime.UnlockOSThread()
		return nil
	})
	if err != nil {
		if h.IsOpen() {
			h.Close()
		}
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	ns := &netNS{name: name, h: h}
	if err := ns.linkUp("lo", netip.Prefix{}); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// Close releases the namespace.
func (ns *netNS) Close() { ns.h.Close() }

// onThread runs fn on a new locked OS thread; fn unlocks it when it leaves the thread as it found it.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// run runs fn on a thread in the namespace: the sockets fn opens are in it.
func (ns *netNS) run(fn func() error) error {
	return onThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		if err := netns.Set(ns.h); err != nil {
			return err
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		return err
	})
}

// handle is a netlink handle in the namespace; the caller closes it.
func (ns *netNS) handle() (*netlink.Handle, error) { return netlink.NewHandleAt(ns.h) }

// linkUp gives a link of the namespace its address (if any) and sets it up.
func (ns *netNS) linkUp(name string, addr netip.Prefix) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err == nil && addr.IsValid() {
		err = h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr)})
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		return fmt.Errorf("link %s in %s: %w", name, ns.name, err)
	}
	return nil
}

// veth makes a veth pair: name in ns with addr, peer in other (no address), both up.
func (ns *netNS) veth(name string, addr netip.Prefix, other *netNS, peer string) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer, PeerNamespace: netlink.NsFd(other.h)}); err != nil {
		return fmt.Errorf("veth %s in %s: %w", name, ns.name, err)
	}
	if err := ns.linkUp(name, addr); err != nil {
		return err
	}
	return other.linkUp(peer, netip.Prefix{})
}

// bridge makes a bridge with addr, up.
func (ns *netNS) bridge(name string, addr netip.Prefix) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("bridge %s in %s: %w", name, ns.name, err)
	}
	return ns.linkUp(name, addr)
}

// enslave puts the link port on the bridge br.
func (ns *netNS) enslave(port, br string) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	p, err := h.LinkByName(port)
	if err != nil {
		return err
	}
	m, err := h.LinkByName(br)
	if err != nil {
		return err
	}
	return h.LinkSetMaster(p, m)
}

// defaultRoute routes everything via gw.
func (ns *netNS) defaultRoute(gw netip.Addr) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	r := &netlink.Route{Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: gw.AsSlice()}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("default route via %v in %s: %w", gw, ns.name, err)
	}
	return nil
}

// sysctl writes a sysctl of the namespace (key under /proc/sys).
func (ns *netNS) sysctl(key, value string) error {
	return ns.run(func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) })
}

// waitUp polls until the links are operationally up: a device that just got its carrier drops what it is given
// until the kernel's link watcher activates it, up to a second later.
func (ns *netNS) waitUp(ctx context.Context, names ...string) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, name := range names {
		for {
			l, err := h.LinkByName(name)
			if err != nil {
				return err
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("link %s in %s is %v: %w", name, ns.name, l.Attrs().OperState, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// errNoNFTables is returned (wrapped) when the kernel has no nf_tables netlink.
var errNoNFTables = errors.New("the kernel has no nf_tables netlink (CONFIG_NF_TABLES)")

// nftErr translates the backend's error for a kernel without nf_tables.
func nftErr(err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("%w: %w", errNoNFTables, err)
	}
	return err
}
