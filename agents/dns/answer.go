package dns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// dnsSchemaVersion is the Kubernetes DNS specification's version, served as dns-version.<domain> TXT.
const dnsSchemaVersion = "1.1.0"

// maxChase bounds the CNAME chain followed for an ExternalName Service pointing into the cluster domain.
const maxChase = 8

// node is the records at one name of the cluster domain.
type node struct {
	apex  bool         // the domain itself: SOA and NS
	addrs []netip.Addr // A and AAAA
	srvs  []srv
	cname string // an ExternalName Service's target
	txt   string
}

// srv is one SRV record, with the addresses of its target for the additional section.
type srv struct {
	target string
	port   uint16
	addrs  []netip.Addr
}

// authoritative answers a query for a name of the cluster domain. A name that does not exist is
// NXDOMAIN; a name without records of the type asked is NOERROR without answers (NODATA); both carry the
// domain's SOA in the authority section, for negative caching.
func (s *Server) authoritative(req *dns.Msg, q dns.Question, name string) *dns.Msg {
	resp := s.reply(req)
	n, ok := s.lookup(s.labels(name))
	if !ok {
		resp.Rcode = dns.RcodeNameError
	} else {
		s.fill(resp, q.Name, q.Qtype, n, 0)
	}
	if len(resp.Answer) == 0 {
		resp.Ns = []dns.RR{s.soa()}
	}
	return resp
}

// labels returns the labels of name (lower-case, in the cluster domain) before the domain.
func (s *Server) labels(name string) []string {
	return dns.SplitDomainName(strings.TrimSuffix(name, s.zone))
}

// lookup finds the records at the name whose labels before the domain are given, as the Kubernetes DNS
// specification and CoreDNS's kubernetes plugin have them:
//
//	(apex)                                    SOA, NS
//	dns-version                               TXT "1.1.0"
//	ns.dns                                    A/AAAA of this server, if it listens on one address
//	svc, <ns>.svc                             empty (NODATA); <ns>.svc is NXDOMAIN for an unknown namespace
//	<svc>.<ns>.svc                            see serviceNode
//	<endpoint>.<svc>.<ns>.svc                 the endpoint's addresses; SRV for its ports
//	_<port>._<proto>.<svc>.<ns>.svc           SRV for the named port (underscores optional, as CoreDNS)
//	pod, <ns>.pod                             empty (NODATA)
//	<a-b-c-d>.<ns>.pod                        A a.b.c.d, unchecked (CoreDNS's "pods insecure")
//
// ok is false for any other name, and for names of Services, endpoints and ports that do not exist.
func (s *Server) lookup(labels []string) (n node, ok bool) {
	l := len(labels)
	switch {
	case l == 0:
		return node{apex: true}, true
	case l == 1 && labels[0] == "dns-version":
		return node{txt: dnsSchemaVersion}, true
	case l == 1 && labels[0] == "dns":
		return node{}, true
	case l == 2 && labels[0] == "ns" && labels[1] == "dns":
		return node{addrs: s.nsAddrs}, true
	case labels[l-1] == "svc":
		return s.lookupService(labels[:l-1])
	case labels[l-1] == "pod":
		return lookupPod(labels[:l-1])
	}
	return node{}, false
}

// lookupService resolves the labels before "svc".
func (s *Server) lookupService(l []string) (node, bool) {
	switch len(l) {
	case 0:
		return node{}, true
	case 1:
		return node{}, s.records.Namespace(l[0])
	case 2, 3, 4:
	default:
		return node{}, false
	}
	svc, ok := s.records.Service(l[len(l)-1], l[len(l)-2])
	if !ok {
		return node{}, false
	}
	switch len(l) {
	case 2:
		return s.serviceNode(svc)
	case 3:
		return s.endpointNode(svc, l[0])
	default:
		return s.portNode(svc, strings.TrimPrefix(l[0], "_"), strings.TrimPrefix(l[1], "_"))
	}
}

// serviceNode is <svc>.<ns>.svc: the CNAME of an ExternalName Service; the cluster IPs of a Service with
// them, and an SRV record per port; the endpoints' addresses of a headless Service and an SRV record per
// endpoint and port, or nothing at all (NXDOMAIN, as CoreDNS) when it has no endpoint.
func (s *Server) serviceNode(svc *Service) (node, bool) {
	switch {
	case svc.ExternalName != "":
		return node{cname: svc.ExternalName}, true
	case svc.Headless:
		return s.endpointsNode(svc, svc.Endpoints, "", ""), len(svc.Endpoints) > 0
	}
	return s.clusterIPNode(svc, "", ""), true
}

// endpointNode is <endpoint>.<svc>.<ns>.svc, for a Service of any type but ExternalName (as CoreDNS).
func (s *Server) endpointNode(svc *Service, name string) (node, bool) {
	eps := svc.EndpointsNamed(name)
	if svc.ExternalName != "" || len(eps) == 0 {
		return node{}, false
	}
	return s.endpointsNode(svc, eps, "", ""), true
}

// portNode is _<port>._<proto>.<svc>.<ns>.svc: its SRV records and their targets' addresses; NXDOMAIN
// when no port of that name and protocol exists.
func (s *Server) portNode(svc *Service, port, proto string) (node, bool) {
	var n node
	switch {
	case svc.ExternalName != "":
		return node{}, false
	case svc.Headless:
		n = s.endpointsNode(svc, svc.Endpoints, port, proto)
	default:
		n = s.clusterIPNode(svc, port, proto)
	}
	return n, len(n.srvs) > 0
}

// clusterIPNode holds the cluster IPs and an SRV record (target: the Service's name) per port matching
// port and proto (empty matches all).
func (s *Server) clusterIPNode(svc *Service, port, proto string) node {
	n := node{addrs: svc.ClusterIPs}
	target := serviceName(svc, s.zone)
	for _, p := range svc.Ports {
		if matchPort(p, port, proto) {
			n.srvs = appendSRV(n.srvs, 0, srv{target: target, port: p.Port, addrs: svc.ClusterIPs})
		}
	}
	return n
}

// endpointsNode holds the addresses of eps and an SRV record (target: the endpoint's name) per endpoint
// and port matching port and proto (empty matches all). With a port given, the addresses are those of
// the endpoints that have it. eps are sorted by name, as Service.Endpoints.
func (s *Server) endpointsNode(svc *Service, eps []Endpoint, port, proto string) node {
	var n node
	all := port == "" && len(eps) == len(svc.Endpoints)
	if all {
		n.addrs = svc.Addrs()
	}
	suffix := "." + serviceName(svc, s.zone)
	first := 0 // the first SRV record of the current endpoint name
	for i, ep := range eps {
		if i > 0 && ep.Name != eps[i-1].Name {
			first = len(n.srvs)
		}
		matched := port == ""
		for _, p := range ep.Ports {
			if matchPort(p, port, proto) {
				n.srvs = appendSRV(n.srvs, first, srv{target: ep.Name + suffix, port: p.Port, addrs: []netip.Addr{ep.Addr}})
				matched = true
			}
		}
		if matched && !all {
			n.addrs = append(n.addrs, ep.Addr)
		}
	}
	if !all {
		slices.SortFunc(n.addrs, netip.Addr.Compare)
		n.addrs = slices.Compact(n.addrs)
	}
	return n
}

// appendSRV appends r to srvs, or merges its addresses into the record of srvs[from:] with its target and
// port (an endpoint with an address of each family).
func appendSRV(srvs []srv, from int, r srv) []srv {
	for i := from; i < len(srvs); i++ {
		if srvs[i].target == r.target && srvs[i].port == r.port {
			for _, a := range r.addrs {
				if !slices.Contains(srvs[i].addrs, a) {
					srvs[i].addrs = append(slices.Clip(srvs[i].addrs), a)
				}
			}
			return srvs
		}
	}
	return append(srvs, r)
}

func matchPort(p Port, name, proto string) bool {
	return (name == "" || strings.EqualFold(name, p.Name)) && (proto == "" || proto == p.Protocol)
}

func serviceName(svc *Service, zone string) string {
	return svc.Name + "." + svc.Namespace + ".svc." + zone
}

// lookupPod resolves the labels before "pod".
func lookupPod(l []string) (node, bool) {
	switch len(l) {
	case 0, 1:
		return node{}, true
	case 2:
		if a, ok := podAddr(l[0]); ok {
			return node{addrs: []netip.Addr{a}}, true
		}
	}
	return node{}, false
}

// podAddr parses the dashed address of a pod name: 10-1-0-5, or fd00--5 for IPv6.
func podAddr(label string) (netip.Addr, bool) {
	s := strings.ReplaceAll(label, "-", ":")
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil && a.Zone() == ""
}

// fill adds the records of n of type qtype, owned by owner, to resp: the answers, and the addresses of
// SRV targets as additional records. The CNAME of an ExternalName Service answers every type, followed
// by the records of its target (chased in the cluster domain or through the upstreams).
func (s *Server) fill(resp *dns.Msg, owner string, qtype uint16, n node, depth int) {
	if n.cname != "" {
		resp.Answer = append(resp.Answer, &dns.CNAME{Hdr: s.hdr(owner, dns.TypeCNAME), Target: n.cname})
		if qtype != dns.TypeCNAME {
			s.chase(resp, n.cname, qtype, depth+1)
		}
		return
	}
	anyType := qtype == dns.TypeANY
	if qtype == dns.TypeA || qtype == dns.TypeAAAA || anyType {
		resp.Answer = s.appendAddrs(resp.Answer, owner, n.addrs, qtype)
	}
	if qtype == dns.TypeSRV || anyType {
		s.appendSRVs(resp, owner, n.srvs)
	}
	if n.txt != "" && (qtype == dns.TypeTXT || anyType) {
		resp.Answer = append(resp.Answer, &dns.TXT{Hdr: s.hdr(owner, dns.TypeTXT), Txt: []string{n.txt}})
	}
	if n.apex && (qtype == dns.TypeSOA || anyType) {
		resp.Answer = append(resp.Answer, s.soa())
	}
	if n.apex && (qtype == dns.TypeNS || anyType) {
		resp.Answer = append(resp.Answer, &dns.NS{Hdr: s.hdr(owner, dns.TypeNS), Ns: "ns.dns." + s.zone})
		resp.Extra = s.appendAddrs(resp.Extra, "ns.dns."+s.zone, s.nsAddrs, dns.TypeANY)
	}
}

// appendAddrs appends an A or AAAA record (as qtype asks; ANY: both) for each address, starting at a
// position that turns from one query to the next, so that clients taking the first address spread
// over a headless Service's endpoints (as CoreDNS's loadbalance plugin).
func (s *Server) appendAddrs(rrs []dns.RR, owner string, addrs []netip.Addr, qtype uint16) []dns.RR {
	if len(addrs) == 0 {
		return rrs
	}
	start := int(s.rotation.Add(1) % uint32(len(addrs)))
	for i := range addrs {
		a := addrs[(start+i)%len(addrs)]
		switch {
		case a.Is4() && qtype != dns.TypeAAAA:
			rrs = append(rrs, &dns.A{Hdr: s.hdr(owner, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && qtype != dns.TypeA:
			rrs = append(rrs, &dns.AAAA{Hdr: s.hdr(owner, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return rrs
}

// appendSRVs appends the SRV records, all of priority 0 and of an equal share of weight 100 (as
// CoreDNS), and their targets' addresses as additional records.
func (s *Server) appendSRVs(resp *dns.Msg, owner string, srvs []srv) {
	if len(srvs) == 0 {
		return
	}
	weight := uint16(100 / len(srvs))
	for i, r := range srvs {
		resp.Answer = append(resp.Answer, &dns.SRV{Hdr: s.hdr(owner, dns.TypeSRV), Weight: weight, Port: r.port, Target: r.target})
		if i == 0 || r.target != srvs[i-1].target {
			resp.Extra = s.appendAddrs(resp.Extra, r.target, r.addrs, dns.TypeANY)
		}
	}
}

func (s *Server) hdr(owner string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: rrtype, Class: dns.ClassINET, Ttl: s.ttl}
}

// soa is the cluster domain's SOA, as CoreDNS's: its minimum (the negative answers' TTL) is the TTL.
func (s *Server) soa() dns.RR {
	return &dns.SOA{
		Hdr:     s.hdr(s.zone, dns.TypeSOA),
		Ns:      "ns.dns." + s.zone,
		Mbox:    "hostmaster." + s.zone,
		Serial:  s.serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  s.ttl,
	}
}
