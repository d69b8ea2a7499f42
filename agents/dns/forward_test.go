package dns

import (
	"testing"

	"github.com/miekg/dns"
)

// TestForward: names outside the cluster domain, and reverse names of addresses the Index does not
// know, go to the upstream, over the transport the client used, and its answer comes back as it is.
func TestForward(t *testing.T) {
	up := startUpstream(t, false)
	s := startServer(t, fixture(), up.addr)
	tests := []struct {
		name   string
		netw   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{"A over udp", "udp", "example.org.", dns.TypeA, dns.RcodeSuccess, zone("example.org. 300 IN A 192.0.2.1")},
		{"A over tcp", "tcp", "example.org.", dns.TypeA, dns.RcodeSuccess, zone("example.org. 300 IN A 192.0.2.1")},
		{"unknown name", "udp", "nope.example.org.", dns.TypeA, dns.RcodeNameError, nil},
		{"PTR of an address outside the cluster", "udp", reverseName(t, "192.0.2.1"), dns.TypePTR, dns.RcodeNameError, nil},
		{"A of a known address's reverse name", "udp", reverseName(t, "10.96.0.10"), dns.TypeA, dns.RcodeNameError, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.queries.Load()
			resp := exchange(t, s.Addr(), tt.netw, question(tt.qname, tt.qtype))
			rcode(t, resp, tt.rcode)
			equal(t, "answer", text(resp.Answer), tt.answer, equateEmpty)
			equal(t, "queries upstream", up.queries.Load()-before, int64(1))
			if resp.Authoritative {
				t.Error("a forwarded answer is authoritative")
			}
		})
	}
}

// TestForwardFailures: the upstreams are tried in order, past one that is down or refuses; when none
// answers the client gets SERVFAIL.
func TestForwardFailures(t *testing.T) {
	stopped := startUpstream(t, false)
	stopped.stop()
	refusing := startUpstream(t, true)
	tests := []struct {
		name      string
		upstreams []string
		rcode     int
		answers   int
	}{
		{"the only upstream is down", []string{stopped.addr}, dns.RcodeServerFailure, 0},
		{"next after one down", []string{stopped.addr, startUpstream(t, false).addr}, dns.RcodeSuccess, 1},
		{"next after one refusing", []string{refusing.addr, startUpstream(t, false).addr}, dns.RcodeSuccess, 1},
		{"all refuse", []string{refusing.addr}, dns.RcodeRefused, 0},
		{"down and refusing", []string{stopped.addr, refusing.addr}, dns.RcodeRefused, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, fixture(), tt.upstreams...)
			resp := lookup(t, s.Addr(), "example.org.", dns.TypeA)
			rcode(t, resp, tt.rcode)
			equal(t, "answers", len(resp.Answer), tt.answers)
		})
	}
}

// TestExternalNameUpstreamDown: an ExternalName Service's CNAME is answered even when its target cannot
// be followed.
func TestExternalNameUpstreamDown(t *testing.T) {
	s := startServer(t, fixture(), freeAddr(t))
	resp := lookup(t, s.Addr(), "ext.default.svc.cluster.local.", dns.TypeA)
	rcode(t, resp, dns.RcodeSuccess)
	equal(t, "answer", text(resp.Answer), zone("ext.default.svc.cluster.local. 5 IN CNAME example.org."))
}

// TestNoForward: a server told not to forward (its host lists no nameserver) still answers the cluster's
// names, and others at once with SERVFAIL.
func TestNoForward(t *testing.T) {
	s := startServerConfig(t, Config{Listen: "127.0.0.1:0", ResolvConf: "/nonexistent", NoForward: true}, fixture())
	rcode(t, lookup(t, s.Addr(), "example.org.", dns.TypeA), dns.RcodeServerFailure)
	rcode(t, lookup(t, s.Addr(), "web.default.svc.cluster.local.", dns.TypeA), dns.RcodeSuccess)
}
