package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes SyncRoutes makes (the rtm_protocol of `ip route ... proto 87`): it removes
// routes with this protocol that it was not asked for, and no others.
const RouteProtocol netlink.RouteProtocol = 87

// SyncRoutes makes the node's host-gw routes exactly peers: every other node's pod CIDR via its InternalIP,
// which must be on a network the node is directly attached to. Routes of its own protocol that are not in
// peers go; the node's own pod CIDR is skipped. A bad entry does not stop the others: the errors are joined.
func (n *Network) SyncRoutes(ctx context.Context, peers map[netip.Prefix]netip.Addr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	have, err := n.ourRoutes()
	if err != nil {
		return fmt.Errorf("network: list routes: %w", err)
	}
	var errs []error
	want := map[netip.Prefix]netip.Addr{}
	for cidr, via := range peers {
		cidr = cidr.Masked()
		switch {
		case cidr == n.cfg.PodCIDR:
			continue
		case !cidr.Addr().Is4() || !via.Is4():
			errs = append(errs, fmt.Errorf("network: route to %v via %v: not IPv4", cidr, via))
			continue
		}
		want[cidr] = via
	}
	for _, r := range have {
		if dst, gw, ok := routeKey(r); ok && want[dst] == gw {
			delete(want, dst) // already there
			continue
		}
		if err := n.h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("network: delete route %v: %w", r.Dst, err))
		}
	}
	for cidr, via := range want {
		r := &netlink.Route{Dst: ipNet(cidr), Gw: via.AsSlice(), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
		if err := n.h.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("network: route to %v via %v: %w", cidr, via, err))
		}
	}
	return errors.Join(errs...)
}

// ourRoutes are the main table's routes of RouteProtocol (a dump interrupted by a concurrent change is
// retried).
func (n *Network) ourRoutes() ([]netlink.Route, error) {
	filter := &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
	for range 5 {
		rs, err := n.h.RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return rs, err
		}
	}
	return nil, netlink.ErrDumpInterrupted
}

// Routes are the node's host-gw routes: pod CIDR → gateway.
func (n *Network) Routes() (map[netip.Prefix]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rs, err := n.ourRoutes()
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]netip.Addr{}
	for _, r := range rs {
		if dst, gw, ok := routeKey(r); ok {
			out[dst] = gw
		}
	}
	return out, nil
}

func routeKey(r netlink.Route) (netip.Prefix, netip.Addr, bool) {
	if r.Dst == nil {
		return netip.Prefix{}, netip.Addr{}, false
	}
	addr, ok1 := netip.AddrFromSlice(r.Dst.IP.To4())
	gw, ok2 := netip.AddrFromSlice(r.Gw.To4())
	bits, _ := r.Dst.Mask.Size()
	return netip.PrefixFrom(addr, bits), gw, ok1 && ok2
}
