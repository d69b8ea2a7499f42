package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netns"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
	"golang.org/x/sys/unix"
)

// The list of virtual services every Sync reads: one IPVS_CMD_GET_SERVICE dump parsed in place. moby/ipvs's
// GetServices allocates some twenty objects per service (statistics included), which at 10,000 services was most of
// a Sync that changes nothing.

// IPVS generic netlink command and attributes (include/uapi/linux/ip_vs.h).
const (
	ipvsCmdGetService = 4
	ipvsAttrService   = 1
	svcAttrAF         = 1
	svcAttrProtocol   = 2
	svcAttrAddr       = 3
	svcAttrPort       = 4
	svcAttrFWMark     = 5
	svcAttrSchedName  = 6
	svcAttrFlags      = 7
	svcAttrTimeout    = 8
	svcAttrNetmask    = 9
	svcAttrPEName     = 11
)

// dumpSock is a generic netlink socket in the node's namespace for the dumps; not safe for concurrent use (the
// Backend's mutex guards it).
type dumpSock struct {
	fd     int
	family uint16 // IPVS's generic netlink family
	seq    uint32
	buf    []byte
}

func openDumpSock(ns netns.NsHandle, family uint16) (*dumpSock, error) {
	var fd int
	if err := nsexec.Do(ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
		return err
	}); err != nil {
		return nil, fmt.Errorf("ipvs: generic netlink socket: %w", err)
	}
	tv := unix.Timeval{Sec: 30} // a dump that never ends is an error, not a hang
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ipvs: generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ipvs: generic netlink socket: %w", err)
	}
	return &dumpSock{fd: fd, family: family, buf: make([]byte, 1<<16)}, nil
}

func (s *dumpSock) close() error { return unix.Close(s.fd) }

// services lists the kernel's virtual services (those of a firewall mark or an unknown protocol left out).
func (s *dumpSock) services() ([]kernelService, error) {
	s.seq++
	req := make([]byte, unix.NLMSG_HDRLEN+4)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], s.family)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], s.seq)
	req[unix.NLMSG_HDRLEN], req[unix.NLMSG_HDRLEN+1] = ipvsCmdGetService, 1 // genlmsghdr: command, version
	if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("ipvs: dump virtual services: %w", err)
	}
	var out []kernelService
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if err != nil {
			return nil, fmt.Errorf("ipvs: dump virtual services: %w", err)
		}
		for b := s.buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, fmt.Errorf("ipvs: dump virtual services: a message of %d bytes in %d", l, len(b))
			}
			typ, seq, msg := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint32(b[8:]), b[unix.NLMSG_HDRLEN:l]
			b = b[min(nlAlign(l), len(b)):]
			switch {
			case seq != s.seq: // a reply to an abandoned request
			case typ == unix.NLMSG_DONE:
				return out, nil
			case typ == unix.NLMSG_ERROR:
				if len(msg) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(msg)); errno != 0 {
						return nil, fmt.Errorf("ipvs: dump virtual services: %w", unix.Errno(errno))
					}
				}
				return out, nil
			case typ == s.family && len(msg) >= 4:
				if ks, ok := parseService(msg[4:]); ok {
					out = append(out, ks)
				}
			}
		}
	}
}

// parseService reads a service message's attributes (after the genlmsghdr).
func parseService(b []byte) (kernelService, bool) {
	var ks kernelService
	var af, proto uint16
	var addr []byte
	var port uint16
	var flags, timeout, netmask, fwmark uint32
	var pe bool
	for a := range attrs(b) {
		if a.typ != ipvsAttrService {
			continue
		}
		for v := range attrs(a.val) {
			switch v.typ {
			case svcAttrAF:
				af = u16(v.val)
			case svcAttrProtocol:
				proto = u16(v.val)
			case svcAttrAddr:
				addr = v.val
			case svcAttrPort:
				if len(v.val) >= 2 {
					port = binary.BigEndian.Uint16(v.val)
				}
			case svcAttrFWMark:
				fwmark = u32(v.val)
			case svcAttrSchedName:
				ks.scheduler = cString(v.val)
			case svcAttrFlags:
				flags = u32(v.val)
			case svcAttrTimeout:
				timeout = u32(v.val)
			case svcAttrNetmask:
				netmask = u32(v.val)
			case svcAttrPEName:
				pe = cString(v.val) != ""
			}
		}
	}
	p, ok := protocolName(proto)
	if fwmark != 0 || !ok || len(addr) < 4 {
		return kernelService{}, false
	}
	var a netip.Addr
	switch {
	case af == unix.AF_INET:
		a = netip.AddrFrom4([4]byte(addr[:4]))
	case af == unix.AF_INET6 && len(addr) >= 16:
		a = netip.AddrFrom16([16]byte(addr[:16]))
	default:
		return kernelService{}, false
	}
	ks.key.Addr, ks.key.Protocol, ks.key.Port = a, p, port
	flags &^= flagHashed
	if flags&flagPersistent != 0 {
		ks.affinity = time.Duration(timeout) * time.Second
	}
	ks.foreign = flags&^flagPersistent != 0 || netmask != hostMask(a) || pe
	return ks, true
}

// attr is a netlink attribute: type (flags masked off) and value.
type attr struct {
	typ uint16
	val []byte
}

// attrs iterates over the attributes in b.
func attrs(b []byte) func(yield func(attr) bool) {
	return func(yield func(attr) bool) {
		for len(b) >= 4 {
			l := int(binary.NativeEndian.Uint16(b))
			if l < 4 || l > len(b) {
				return
			}
			if !yield(attr{typ: binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), val: b[4:l]}) {
				return
			}
			b = b[min(nlAlign(l), len(b)):]
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

func u16(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return binary.NativeEndian.Uint16(b)
}

func u32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(b)
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
