package ipvs

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// IPVS service flags (include/uapi/linux/ip_vs.h).
const (
	flagPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT: ClientIP affinity
	flagHashed     = 0x0002 // IP_VS_SVC_F_HASHED: set by the kernel on every service it holds
)

// weightActive is the weight of a destination that takes new connections; a drained one has weight 0.
const weightActive = 1

// kernelService is what the backend compares of a virtual service the kernel holds: the attributes it programs.
type kernelService struct {
	key       proxy.Key
	scheduler string
	affinity  time.Duration
	// foreign: flags, netmask or persistence engine are not what the backend programs (someone changed them).
	foreign bool
}

// toService is the IPVS virtual service of vs with scheduler sched: persistent (ClientIP affinity) with the
// affinity's timeout, one client address per persistence template (netmask /32 or /128).
func toService(vs proxy.VirtualService, sched string) (*ipvs.Service, error) {
	proto, err := protocolNumber(vs.Protocol)
	if err != nil {
		return nil, err
	}
	s := &ipvs.Service{
		Address:       net.IP(vs.Addr.AsSlice()),
		Protocol:      proto,
		Port:          vs.Port,
		SchedName:     sched,
		AddressFamily: family(vs.Addr),
		Netmask:       hostMask(vs.Addr),
	}
	if vs.Affinity > 0 {
		secs := (vs.Affinity + time.Second - 1) / time.Second
		if secs > 1<<31 {
			return nil, fmt.Errorf("ipvs: %v: affinity timeout %v is too long", vs.Key, vs.Affinity)
		}
		s.Flags, s.Timeout = flagPersistent, uint32(secs)
	}
	return s, nil
}

// serviceKey is the key of an IPVS virtual service; false for one the backend never makes (firewall mark,
// unknown protocol).
func serviceKey(s *ipvs.Service) (proxy.Key, bool) {
	if s.FWMark != 0 {
		return proxy.Key{}, false
	}
	proto, ok := protocolName(s.Protocol)
	if !ok {
		return proxy.Key{}, false
	}
	a, ok := netip.AddrFromSlice(s.Address)
	if !ok {
		return proxy.Key{}, false
	}
	if s.AddressFamily == unix.AF_INET {
		a = a.Unmap()
	}
	return proxy.Key{Addr: a, Protocol: proto, Port: s.Port}, true
}

// toDestination is destination d with weight w, forwarded by masquerading (NAT).
func toDestination(d netip.AddrPort, w int) *ipvs.Destination {
	return &ipvs.Destination{
		Address:         net.IP(d.Addr().AsSlice()),
		Port:            d.Port(),
		Weight:          w,
		ConnectionFlags: ipvs.ConnectionFlagMasq,
		AddressFamily:   family(d.Addr()),
	}
}

// fromDestination is an IPVS destination's address and whether it is active as the backend makes them (weight 1,
// masqueraded). Any other is taken for drained: restoring it (or deleting it) puts it right.
func fromDestination(d *ipvs.Destination) (netip.AddrPort, bool, bool) {
	a, ok := netip.AddrFromSlice(d.Address)
	if !ok {
		return netip.AddrPort{}, false, false
	}
	if d.AddressFamily == unix.AF_INET {
		a = a.Unmap()
	}
	active := d.Weight == weightActive && d.ConnectionFlags&ipvs.ConnectionFlagFwdMask == ipvs.ConnectionFlagMasq
	return netip.AddrPortFrom(a, d.Port), active, true
}

func protocolNumber(p corev1.Protocol) (uint16, error) {
	switch p {
	case corev1.ProtocolTCP:
		return unix.IPPROTO_TCP, nil
	case corev1.ProtocolUDP:
		return unix.IPPROTO_UDP, nil
	case corev1.ProtocolSCTP:
		return unix.IPPROTO_SCTP, nil
	}
	return 0, fmt.Errorf("ipvs: unknown protocol %q", p)
}

func protocolName(n uint16) (corev1.Protocol, bool) {
	switch n {
	case unix.IPPROTO_TCP:
		return corev1.ProtocolTCP, true
	case unix.IPPROTO_UDP:
		return corev1.ProtocolUDP, true
	case unix.IPPROTO_SCTP:
		return corev1.ProtocolSCTP, true
	}
	return "", false
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// hostMask is the persistence netmask of one client: 255.255.255.255 for IPv4, a prefix length of 128 for IPv6 (the
// kernel reads the field so).
func hostMask(a netip.Addr) uint32 {
	if a.Is4() {
		return 0xffffffff
	}
	return 128
}
