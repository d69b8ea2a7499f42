package network

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// podInterface is the sandbox's end of its veth pair.
const podInterface = "eth0"

// Network is the pod network of one node. Its methods are safe for concurrent use.
type Network struct {
	cfg  Config
	gw   netip.Addr
	ipam *allocator
	ns   netns.NsHandle // the node's namespace; netns.None() for the agent's own

	// mu guards h (a netlink handle is not safe for concurrent use) and serialises the changes to the node's
	// links, so that two SetUps never race over the bridge's ports. It is taken before the allocator's lock.
	mu sync.Mutex
	h  *netlink.Handle
}

var _ process.Network = (*Network)(nil)

// New opens the pod network of a node; Setup makes it. Close releases its handles (the network stays).
func New(cfg Config) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.PodCIDR, cfg.ClusterCIDR = cfg.PodCIDR.Masked(), cfg.ClusterCIDR.Masked()
	ipam, err := newAllocator(cfg.StateDir, cfg.PodCIDR)
	if err != nil {
		return nil, err
	}
	n := &Network{cfg: cfg, gw: gateway(cfg.PodCIDR), ipam: ipam, ns: netns.None()}
	if cfg.NetNS != "" {
		if n.ns, err = netns.GetFromPath(cfg.NetNS); err != nil {
			return nil, fmt.Errorf("network: node namespace %s: %w", cfg.NetNS, err)
		}
		n.h, err = netlink.NewHandleAt(n.ns)
	} else {
		n.h, err = netlink.NewHandle()
	}
	if err != nil {
		n.ns.Close()
		return nil, fmt.Errorf("network: netlink: %w", err)
	}
	return n, nil
}

// Close releases the handles.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.h.Close()
	if n.ns.IsOpen() {
		return n.ns.Close()
	}
	return nil
}

// Gateway is the bridge's address, the pods' default gateway.
func (n *Network) Gateway() netip.Addr { return n.gw }

// ClusterCIDR is the cluster's pod network (every node's pod CIDR is part of it).
func (n *Network) ClusterCIDR() netip.Prefix { return n.cfg.ClusterCIDR }

// Setup makes the node's part of the network: IPv4 forwarding on, the bridge up with the gateway address, the
// nftables table. Idempotent; call it once at start and whenever the configuration may have been lost.
func (n *Network) Setup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.inNodeNS(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		return fmt.Errorf("network: enable IPv4 forwarding: %w", err)
	}
	n.mu.Lock()
	err := n.ensureBridge()
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("network: bridge %s: %w", n.cfg.Bridge, err)
	}
	if err := n.applyTable(); err != nil {
		return fmt.Errorf("network: nftables table %s: %w", tableName, err)
	}
	return nil
}

// ensureBridge makes the bridge, gives it the gateway address (only) and sets it up. Call it holding mu.
func (n *Network) ensureBridge() error {
	br, err := n.h.LinkByName(n.cfg.Bridge)
	if notFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU = n.cfg.Bridge, n.cfg.MTU
		if err := n.h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return err
		}
		br, err = n.h.LinkByName(n.cfg.Bridge)
	}
	if err != nil {
		return err
	}
	if br.Type() != "bridge" {
		return fmt.Errorf("a %s link has the bridge's name", br.Type())
	}
	if br.Attrs().MTU != n.cfg.MTU {
		if err := n.h.LinkSetMTU(br, n.cfg.MTU); err != nil {
			return err
		}
	}
	want := &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(n.gw, n.cfg.PodCIDR.Bits()))}
	addrs, err := n.h.AddrList(br, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if !a.IPNet.IP.Equal(want.IP) || a.IPNet.Mask.String() != want.Mask.String() {
			if err := n.h.AddrDel(br, &a); err != nil {
				return err
			}
		}
	}
	if err := n.h.AddrReplace(br, want); err != nil {
		return err
	}
	return n.h.LinkSetUp(br)
}

// SetUp connects the sandbox's namespace at netnsPath to the bridge and returns its address. A sandbox set up
// before gets the address it holds (its veth pair is made anew). Failures leave nothing behind.
func (n *Network) SetUp(ctx context.Context, sandboxID, netnsPath string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ip, err := n.ipam.allocate(sandboxID)
	if err != nil {
		return "", err
	}
	if err := n.attach(sandboxID, netnsPath, ip); err != nil {
		return "", errors.Join(fmt.Errorf("network: sandbox %s: %w", sandboxID, err), n.detach(sandboxID),
			n.ipam.release(sandboxID))
	}
	return ip.String(), nil
}

// attach makes the sandbox's veth pair and configures its end. Call it holding mu.
func (n *Network) attach(sandboxID, netnsPath string, ip netip.Addr) error {
	podNS, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", netnsPath, err)
	}
	defer podNS.Close()
	br, err := n.h.LinkByName(n.cfg.Bridge)
	if err != nil {
		return fmt.Errorf("bridge %s (is the network set up?): %w", n.cfg.Bridge, err)
	}
	if err := n.detach(sandboxID); err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU, attrs.MasterIndex = hostInterface(sandboxID), n.cfg.MTU, br.Attrs().Index
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: podInterface, PeerNamespace: netlink.NsFd(podNS),
		PeerMTU: uint32(n.cfg.MTU)}
	if err := n.h.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s: %w", attrs.Name, err)
	}
	host, err := n.h.LinkByName(attrs.Name)
	if err != nil {
		return err
	}
	if err := n.h.LinkSetHairpin(host, true); err != nil { // a pod reaching itself through a Service
		return fmt.Errorf("veth %s hairpin: %w", attrs.Name, err)
	}
	if err := n.h.LinkSetUp(host); err != nil {
		return fmt.Errorf("veth %s up: %w", attrs.Name, err)
	}
	return n.configurePod(podNS, ip)
}

// configurePod gives the sandbox's eth0 its address and default route and sets lo and eth0 up.
func (n *Network) configurePod(podNS netns.NsHandle, ip netip.Addr) error {
	ph, err := netlink.NewHandleAt(podNS)
	if err != nil {
		return err
	}
	defer ph.Close()
	lo, err := ph.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := ph.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	eth, err := ph.LinkByName(podInterface)
	if err != nil {
		return err
	}
	if err := ph.AddrReplace(eth, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(ip, n.cfg.PodCIDR.Bits()))}); err != nil {
		return fmt.Errorf("address %v: %w", ip, err)
	}
	if err := ph.LinkSetUp(eth); err != nil {
		return fmt.Errorf("%s up: %w", podInterface, err)
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)),
		Gw: n.gw.AsSlice()}
	if err := ph.RouteReplace(def); err != nil {
		return fmt.Errorf("default route via %v: %w", n.gw, err)
	}
	return nil
}

// TearDown disconnects the sandbox and releases its address. It succeeds when nothing is set up (again, or
// for a namespace that is gone), so it may be retried.
func (n *Network) TearDown(ctx context.Context, sandboxID, _ string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.detach(sandboxID); err != nil {
		return fmt.Errorf("network: sandbox %s: %w", sandboxID, err)
	}
	return n.ipam.release(sandboxID)
}

// detach deletes the sandbox's veth pair (deleting the host end deletes both). Call it holding mu.
func (n *Network) detach(sandboxID string) error {
	name := hostInterface(sandboxID)
	link, err := n.h.LinkByName(name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := n.h.LinkDel(link); err != nil && !notFound(err) {
		return fmt.Errorf("delete veth %s: %w", name, err)
	}
	return nil
}

// Reclaim tears down the sandboxes that hold an address but are not live (their runtime lost them while the
// agent was away: a reboot, a removed state directory) and returns their IDs. Call it before sandboxes are
// created, with every sandbox the runtime knows as live.
func (n *Network) Reclaim(ctx context.Context, live map[string]bool) ([]string, error) {
	held, err := n.Allocations()
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	var gone []string
	var errs []error
	for id := range held {
		if live[id] {
			continue
		}
		if err := n.TearDown(ctx, id, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, id)
	}
	slices.Sort(gone)
	return gone, errors.Join(errs...)
}

// Allocations are the addresses held, by sandbox ID.
func (n *Network) Allocations() (map[string]netip.Addr, error) {
	held, err := n.ipam.allocations()
	if err != nil {
		return nil, err
	}
	out := make(map[string]netip.Addr, len(held))
	for ip, id := range held {
		out[id] = ip
	}
	return out, nil
}

// Cleanup removes what Setup, SetUp and SyncRoutes made in the node's namespace: the routes, the table, the
// sandboxes' veth pairs and the bridge (for tests and agent uninstall; the state dir is the caller's to
// remove). What is already gone is not an error.
func (n *Network) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	errs := []error{n.SyncRoutes(ctx, nil), n.deleteTable()}
	n.mu.Lock()
	defer n.mu.Unlock()
	br, err := n.h.LinkByName(n.cfg.Bridge)
	if notFound(err) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	links, err := n.h.LinkList()
	errs = append(errs, err)
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index && l.Type() == "veth" {
			errs = append(errs, ignoreNotFound(n.h.LinkDel(l)))
		}
	}
	errs = append(errs, ignoreNotFound(n.h.LinkDel(br)))
	return errors.Join(errs...)
}

// inNodeNS runs fn on a thread in the node's namespace (the calling one for the agent's own).
func (n *Network) inNodeNS(fn func() error) error { return nsexec.Do(n.ns, fn) }

// hostInterface names the host end of a sandbox's veth pair: "wh" and 12 hex digits of the ID's hash (15
// bytes is the kernel's limit).
func hostInterface(sandboxID string) string {
	sum := sha256.Sum256([]byte(sandboxID))
	return "wh" + hex.EncodeToString(sum[:6])
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func notFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

func ignoreNotFound(err error) error {
	if notFound(err) {
		return nil
	}
	return err
}

// bridgeNetfilterKnob makes bridged IPv4 traffic pass the ip family's netfilter hooks (br_netfilter).
const bridgeNetfilterKnob = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// EnableBridgeNetfilter has traffic between the bridge's ports pass netfilter (bridge-nf-call-iptables=1 in the
// node's namespace, loading the br_netfilter module when the knob is missing), as every kube-proxy needs: a pod
// reaching a Service whose endpoint shares its bridge gets the replies un-DNATed only then, since they are
// bridged, not routed.
func (n *Network) EnableBridgeNetfilter() error {
	err := n.inNodeNS(func() error {
		if _, err := os.Stat(bridgeNetfilterKnob); errors.Is(err, fs.ErrNotExist) {
			if out, err := exec.Command("modprobe", "br_netfilter").CombinedOutput(); err != nil {
				return fmt.Errorf("modprobe br_netfilter: %w: %s", err, bytes.TrimSpace(out))
			}
		}
		return os.WriteFile(bridgeNetfilterKnob, []byte("1"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("network: bridge netfilter (CONFIG_BRIDGE_NETFILTER): %w", err)
	}
	return nil
}

// CleanupNode removes a node's pod network as Cleanup does — host-gw routes, the masquerade table, the pods'
// veths, the bridge — without the node's configuration (for uninstalling: `wheelhouse agent cleanup`). bridge ""
// is DefaultBridge; netnsPath "" the caller's namespace.
func CleanupNode(ctx context.Context, bridge, netnsPath string) error {
	dir, err := os.MkdirTemp("", "wheelhouse-network-cleanup-")
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer os.RemoveAll(dir)
	// Cleanup needs neither network: any valid pair will do.
	n, err := New(Config{PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		Bridge: bridge, StateDir: dir, NetNS: netnsPath})
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Cleanup(ctx)
}
