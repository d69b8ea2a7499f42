package dns

import (
	"github.com/miekg/dns"
)

// forward sends req to the upstreams, over the transport the client used, and returns the first answer;
// SERVFAIL when none answers. The upstream's answer is passed on as it is (its EDNS0 record included, its
// TC bit too: a UDP client then asks again over TCP, and the query is forwarded over TCP).
func (s *Server) forward(req *dns.Msg, tcp bool) *dns.Msg {
	if resp := s.exchange(req, tcp); resp != nil {
		return resp
	}
	resp := s.errorReply(req, dns.RcodeServerFailure)
	return resp
}

// exchange tries the upstreams in order, each once with Config.ForwardTimeout, and returns the first
// answer that is neither SERVFAIL nor REFUSED; else the last answer (SERVFAIL or REFUSED), or nil when
// no upstream answered.
func (s *Server) exchange(req *dns.Msg, tcp bool) *dns.Msg {
	c := s.udpClient
	if tcp {
		c = s.tcpClient
	}
	var last *dns.Msg
	for _, up := range s.cfg.Upstreams {
		resp, _, err := c.Exchange(req, up)
		if err != nil {
			s.log.Debug("dns upstream exchange failed", "upstream", up, "name", req.Question[0].Name, "tcp", tcp, "err", err)
			continue
		}
		if resp.Rcode != dns.RcodeServerFailure && resp.Rcode != dns.RcodeRefused {
			return resp
		}
		s.log.Debug("dns upstream refused", "upstream", up, "name", req.Question[0].Name, "rcode", dns.RcodeToString[resp.Rcode])
		last = resp
	}
	return last
}

// chase adds the records of type qtype at target, a CNAME's target, to resp: from the cluster domain, or
// asked of the upstreams (over UDP, then TCP if the answer was truncated). The CNAME stays alone if the
// upstreams fail; the answer's code becomes NXDOMAIN if the target does not exist (RFC 6604).
func (s *Server) chase(resp *dns.Msg, target string, qtype uint16, depth int) {
	if depth > maxChase {
		return
	}
	if dns.IsSubDomain(s.zone, target) {
		n, ok := s.lookup(s.labels(target))
		if !ok {
			resp.Rcode = dns.RcodeNameError
			return
		}
		s.fill(resp, target, qtype, n, depth)
		return
	}
	q := new(dns.Msg)
	q.SetQuestion(target, qtype)
	q.SetEdns0(maxUDPSize, false)
	r := s.exchange(q, false)
	if r != nil && r.Truncated {
		r = s.exchange(q, true)
	}
	if r == nil {
		return
	}
	resp.Answer = append(resp.Answer, r.Answer...)
	if r.Rcode == dns.RcodeNameError {
		resp.Rcode = dns.RcodeNameError
	}
}
