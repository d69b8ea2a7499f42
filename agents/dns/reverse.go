package dns

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// reverse answers a PTR query for an address the Records know (a cluster IP, an endpoint's address) with
// its owners' names; nil for any other query, which is then forwarded.
func (s *Server) reverse(req *dns.Msg, q dns.Question, name string) *dns.Msg {
	if q.Qtype != dns.TypePTR {
		return nil
	}
	ip, ok := parseReverse(name)
	if !ok {
		return nil
	}
	names := s.records.Reverse(ip)
	if len(names) == 0 {
		return nil
	}
	resp := s.reply(req)
	for _, n := range names {
		target := n.Service + "." + n.Namespace + ".svc." + s.zone
		if n.Endpoint != "" {
			target = n.Endpoint + "." + target
		}
		resp.Answer = append(resp.Answer, &dns.PTR{Hdr: s.hdr(q.Name, dns.TypePTR), Ptr: target})
	}
	return resp
}

// parseReverse returns the address of a full reverse name (lower-case FQDN): d.c.b.a.in-addr.arpa. or
// the 32 nibbles of an ip6.arpa. name.
func parseReverse(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 10, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 16, 4)
			if err != nil || len(l) != 1 {
				return netip.Addr{}, false
			}
			nib := 31 - i // labels run from the last nibble to the first
			b[nib/2] |= byte(v) << (4 * (1 - nib%2))
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}
