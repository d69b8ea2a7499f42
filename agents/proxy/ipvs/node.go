package ipvs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
	"golang.org/x/sys/unix"
)

// sysctls are what kube-proxy sets in IPVS mode, as far as the backend needs them: conntrack keeps following
// IPVS's connections (the nftables masquerade needs it), connections to a deleted destination are dropped at once
// (the client retries and gets a live one) and so are persistence templates of a drained one; ip_forward for pods'
// traffic to other nodes' endpoints.
var sysctls = []struct{ key, value string }{
	{"net/ipv4/vs/conntrack", "1"},
	{"net/ipv4/vs/expire_nodest_conn", "1"},
	{"net/ipv4/vs/expire_quiescent_template", "1"},
	{"net/ipv4/ip_forward", "1"},
}

// Available reports whether the kernel of namespace ns (0: the caller's own) has IPVS: it loads ip_vs with
// modprobe when there is one, then asks for the generic netlink family "IPVS". The error wraps ErrNoIPVS when the
// family is missing. (moby/ipvs answers nil to every command when the family is missing, so this is the check.)
func Available(ns netns.NsHandle) error {
	_, err := ipvsFamily(ns)
	return err
}

// ipvsFamily is IPVS's generic netlink family, after loading ip_vs with modprobe when there is one.
func ipvsFamily(ns netns.NsHandle) (uint16, error) {
	var modprobeOut string
	if path, err := exec.LookPath("modprobe"); err == nil {
		out, err := exec.Command(path, "ip_vs").CombinedOutput()
		if err != nil {
			modprobeOut = fmt.Sprintf(" (modprobe ip_vs: %v: %s)", err, strings.TrimSpace(string(out)))
		}
	}
	h, err := netlink.NewHandleAt(handle(ns), unix.NETLINK_GENERIC)
	if err != nil {
		return 0, fmt.Errorf("ipvs: generic netlink socket: %w", err)
	}
	defer h.Close()
	f, err := h.GenlFamilyGet("IPVS")
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, fmt.Errorf("%w%s", ErrNoIPVS, modprobeOut)
		}
		return 0, fmt.Errorf("ipvs: generic netlink family IPVS: %w", err)
	}
	return f.ID, nil
}

// handle is ns as the netlink libraries take it: 0 means the caller's own namespace, which they call None.
func handle(ns netns.NsHandle) netns.NsHandle {
	if ns == 0 {
		return netns.None()
	}
	return ns
}

// setSysctls writes the sysctls that differ, in the node's namespace (/proc/sys/net is the opener's namespace's).
func setSysctls(ns netns.NsHandle) error {
	return nsexec.Do(ns, func() error {
		var errs []error
		for _, s := range sysctls {
			path := "/proc/sys/" + s.key
			if b, err := os.ReadFile(path); err == nil && string(bytes.TrimSpace(b)) == s.value {
				continue
			}
			if err := os.WriteFile(path, []byte(s.value), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("ipvs: sysctl %s=%s: %w", strings.ReplaceAll(s.key, "/", "."), s.value, err))
			}
		}
		return errors.Join(errs...)
	})
}

// dummy is the interface holding the service addresses, created (and set up) if missing.
func ensureDummy(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = name
		if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("ipvs: create dummy interface %s: %w", name, err)
		}
		l, err = h.LinkByName(name)
	}
	if err != nil {
		return nil, fmt.Errorf("ipvs: interface %s: %w", name, err)
	}
	if _, ok := l.(*netlink.Dummy); !ok {
		return nil, fmt.Errorf("ipvs: interface %s is a %s, not a dummy", name, l.Type())
	}
	// Up, so that IPv6 addresses are usable (IPv4 ones get their local routes either way).
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("ipvs: set %s up: %w", name, err)
		}
	}
	return l, nil
}

// linkAddrs are the addresses on link.
func linkAddrs(h *netlink.Handle, l netlink.Link) (map[netip.Addr]bool, error) {
	list, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ipvs: addresses of %s: %w", l.Attrs().Name, err)
	}
	out := make(map[netip.Addr]bool, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() { // the kernel's IPv6 link-local: not ours
			out[ip.Unmap()] = true
		}
	}
	return out, nil
}

// hostAddr is a as an address of its own (/32, /128), without duplicate address detection: it is the node's at
// once.
func hostAddr(a netip.Addr) *netlink.Addr {
	ip := net.IP(a.AsSlice())
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(a.BitLen(), a.BitLen())}, Flags: unix.IFA_F_NODAD}
}
