package dns

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

const soaLine = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5"

// fixture is a small cluster:
//
//	default/web    ClusterIP 10.96.0.10, ports http 80/TCP and dns 53/UDP, one endpoint 10.1.0.20
//	default/dual   dual-stack ClusterIPs 10.96.0.11 and fd00:96::11
//	default/db     headless: db-0 (10.1.0.5 and fd00:1::5) ready, db-1 (10.1.0.6) not ready,
//	               10.1.0.7 ready (condition unset, no hostname); port pg 5432/TCP
//	default/pub    headless with publishNotReadyAddresses: 10.1.0.9, not ready
//	default/empty  headless without endpoints
//	default/ext    ExternalName example.org
//	default/int    ExternalName web.default.svc.cluster.local
//	kube-system/kube-dns  ClusterIP 10.96.0.3
func fixture() *Index {
	x := NewIndex()
	pg := []discoveryv1.EndpointPort{slicePort("pg", corev1.ProtocolTCP, 5432)}
	for _, svc := range []*corev1.Service{
		service("default", "web", []string{"10.96.0.10"}, servicePort("http", corev1.ProtocolTCP, 80), servicePort("dns", corev1.ProtocolUDP, 53)),
		service("default", "dual", []string{"10.96.0.11", "fd00:96::11"}, servicePort("http", corev1.ProtocolTCP, 80)),
		headless("default", "db", false),
		headless("default", "pub", true),
		headless("default", "empty", false),
		externalName("default", "ext", "example.org"),
		externalName("default", "int", "web.default.svc.cluster.local"),
		service("kube-system", "kube-dns", []string{"10.96.0.3"}, servicePort("dns", corev1.ProtocolUDP, 53)),
	} {
		x.UpsertService(svc)
	}
	for _, es := range []*discoveryv1.EndpointSlice{
		endpointSlice("default", "web", "web-a", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{slicePort("http", corev1.ProtocolTCP, 8080), slicePort("dns", corev1.ProtocolUDP, 5353)},
			endpoint("10.1.0.20", ptr.To(true), "")),
		endpointSlice("default", "db", "db-v4", discoveryv1.AddressTypeIPv4, pg,
			endpoint("10.1.0.5", ptr.To(true), "db-0"),
			endpoint("10.1.0.6", ptr.To(false), "db-1"),
			endpoint("10.1.0.7", nil, "")),
		endpointSlice("default", "db", "db-v6", discoveryv1.AddressTypeIPv6, pg,
			endpoint("fd00:1::5", ptr.To(true), "db-0")),
		endpointSlice("default", "pub", "pub-a", discoveryv1.AddressTypeIPv4, pg,
			endpoint("10.1.0.9", ptr.To(false), "")),
	} {
		x.UpsertEndpointSlice(es)
	}
	return x
}

func reverseName(t *testing.T, ip string) string {
	t.Helper()
	name, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestAnswers queries a Server on loopback for the names of the fixture and checks the whole response:
// code, answers, additional records, authority (the SOA of negative answers) and how many queries
// reached the upstream (none, but for an ExternalName's target outside the cluster).
func TestAnswers(t *testing.T) {
	up := startUpstream(t, false)
	s := startServer(t, fixture(), up.addr)
	tests := []struct {
		name     string
		qname    string
		qtype    uint16
		rcode    int
		answer   []string
		extra    []string
		ns       []string
		upstream int64
	}{
		{name: "A of a ClusterIP Service", qname: "web.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("web.default.svc.cluster.local. 5 IN A 10.96.0.10")},
		{name: "AAAA of an IPv4 Service is NODATA", qname: "web.default.svc.cluster.local.", qtype: dns.TypeAAAA,
			ns: zone(soaLine)},
		{name: "AAAA of a dual-stack Service", qname: "dual.default.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: zone("dual.default.svc.cluster.local. 5 IN AAAA fd00:96::11")},
		{name: "A of a dual-stack Service", qname: "dual.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("dual.default.svc.cluster.local. 5 IN A 10.96.0.11")},
		{name: "headless A has the ready endpoints only", qname: "db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("db.default.svc.cluster.local. 5 IN A 10.1.0.5", "db.default.svc.cluster.local. 5 IN A 10.1.0.7")},
		{name: "headless AAAA", qname: "db.default.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: zone("db.default.svc.cluster.local. 5 IN AAAA fd00:1::5")},
		{name: "headless with publishNotReadyAddresses has not-ready endpoints", qname: "pub.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("pub.default.svc.cluster.local. 5 IN A 10.1.0.9")},
		{name: "headless without endpoints is NXDOMAIN", qname: "empty.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "hostname A", qname: "db-0.db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("db-0.db.default.svc.cluster.local. 5 IN A 10.1.0.5")},
		{name: "hostname AAAA", qname: "db-0.db.default.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: zone("db-0.db.default.svc.cluster.local. 5 IN AAAA fd00:1::5")},
		{name: "dashed address of an endpoint without hostname", qname: "10-1-0-7.db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("10-1-0-7.db.default.svc.cluster.local. 5 IN A 10.1.0.7")},
		{name: "hostname of a not-ready endpoint is NXDOMAIN", qname: "db-1.db.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "endpoint of a ClusterIP Service", qname: "10-1-0-20.web.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("10-1-0-20.web.default.svc.cluster.local. 5 IN A 10.1.0.20")},
		{name: "SRV of a ClusterIP Service's named port", qname: "_http._tcp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: zone("_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local."),
			extra:  zone("web.default.svc.cluster.local. 5 IN A 10.96.0.10")},
		{name: "SRV of a UDP port", qname: "_dns._udp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: zone("_dns._udp.web.default.svc.cluster.local. 5 IN SRV 0 100 53 web.default.svc.cluster.local."),
			extra:  zone("web.default.svc.cluster.local. 5 IN A 10.96.0.10")},
		{name: "SRV of a Service's name has every port", qname: "web.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: zone(
				"web.default.svc.cluster.local. 5 IN SRV 0 50 80 web.default.svc.cluster.local.",
				"web.default.svc.cluster.local. 5 IN SRV 0 50 53 web.default.svc.cluster.local."),
			extra: zone("web.default.svc.cluster.local. 5 IN A 10.96.0.10")},
		{name: "SRV of a port with another protocol is NXDOMAIN", qname: "_http._udp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "SRV of a headless Service targets its endpoints", qname: "_pg._tcp.db.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: zone(
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 50 5432 10-1-0-7.db.default.svc.cluster.local.",
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 50 5432 db-0.db.default.svc.cluster.local."),
			extra: zone(
				"10-1-0-7.db.default.svc.cluster.local. 5 IN A 10.1.0.7",
				"db-0.db.default.svc.cluster.local. 5 IN A 10.1.0.5",
				"db-0.db.default.svc.cluster.local. 5 IN AAAA fd00:1::5")},
		{name: "A of a headless SRV name", qname: "_pg._tcp.db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("_pg._tcp.db.default.svc.cluster.local. 5 IN A 10.1.0.5", "_pg._tcp.db.default.svc.cluster.local. 5 IN A 10.1.0.7")},
		{name: "ExternalName CNAME", qname: "ext.default.svc.cluster.local.", qtype: dns.TypeCNAME,
			answer: zone("ext.default.svc.cluster.local. 5 IN CNAME example.org.")},
		{name: "ExternalName A follows the CNAME upstream", qname: "ext.default.svc.cluster.local.", qtype: dns.TypeA,
			answer:   zone("ext.default.svc.cluster.local. 5 IN CNAME example.org.", "example.org. 300 IN A 192.0.2.1"),
			upstream: 1},
		{name: "ExternalName into the cluster domain is followed here", qname: "int.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: zone("int.default.svc.cluster.local. 5 IN CNAME web.default.svc.cluster.local.", "web.default.svc.cluster.local. 5 IN A 10.96.0.10")},
		{name: "PTR of a cluster IP", qname: reverseName(t, "10.96.0.10"), qtype: dns.TypePTR,
			answer: zone("10.0.96.10.in-addr.arpa. 5 IN PTR web.default.svc.cluster.local.")},
		{name: "PTR of an IPv6 cluster IP", qname: reverseName(t, "fd00:96::11"), qtype: dns.TypePTR,
			answer: zone(reverseName(t, "fd00:96::11") + " 5 IN PTR dual.default.svc.cluster.local.")},
		{name: "PTR of a headless endpoint with hostname", qname: reverseName(t, "10.1.0.5"), qtype: dns.TypePTR,
			answer: zone("5.0.1.10.in-addr.arpa. 5 IN PTR db-0.db.default.svc.cluster.local.")},
		{name: "PTR of a headless endpoint without hostname", qname: reverseName(t, "10.1.0.7"), qtype: dns.TypePTR,
			answer: zone("7.0.1.10.in-addr.arpa. 5 IN PTR 10-1-0-7.db.default.svc.cluster.local.")},
		{name: "unknown Service is NXDOMAIN", qname: "nope.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "unknown namespace is NXDOMAIN", qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "unknown namespace's name is NXDOMAIN", qname: "nope.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "too many labels is NXDOMAIN", qname: "a.b.c.web.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "no svc label is NXDOMAIN", qname: "web.default.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: zone(soaLine)},
		{name: "known namespace is NODATA", qname: "default.svc.cluster.local.", qtype: dns.TypeA,
			ns: zone(soaLine)},
		{name: "svc is NODATA", qname: "svc.cluster.local.", qtype: dns.TypeA,
			ns: zone(soaLine)},
		{name: "TXT of a Service is NODATA", qname: "web.default.svc.cluster.local.", qtype: dns.TypeTXT,
			ns: zone(soaLine)},
		{name: "apex SOA", qname: "cluster.local.", qtype: dns.TypeSOA,
			answer: zone(soaLine)},
		{name: "apex NS", qname: "cluster.local.", qtype: dns.TypeNS,
			answer: zone("cluster.local. 5 IN NS ns.dns.cluster.local."),
			extra:  zone("ns.dns.cluster.local. 5 IN A 127.0.0.1")},
		{name: "dns-version", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT,
			answer: zone(`dns-version.cluster.local. 5 IN TXT "1.1.0"`)},
		{name: "pod A from its dashed address", qname: "10-1-0-99.default.pod.cluster.local.", qtype: dns.TypeA,
			answer: zone("10-1-0-99.default.pod.cluster.local. 5 IN A 10.1.0.99")},
		{name: "names are case-insensitive, answers keep the question's case", qname: "WEB.Default.SVC.Cluster.Local.", qtype: dns.TypeA,
			answer: zone("WEB.Default.SVC.Cluster.Local. 5 IN A 10.96.0.10")},
		{name: "case-insensitive reverse name", qname: "10.0.96.10.IN-ADDR.ARPA.", qtype: dns.TypePTR,
			answer: zone("10.0.96.10.IN-ADDR.ARPA. 5 IN PTR web.default.svc.cluster.local.")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.queries.Load()
			resp := lookup(t, s.Addr(), tt.qname, tt.qtype)
			rcode(t, resp, tt.rcode)
			if !resp.Authoritative {
				t.Error("not authoritative")
			}
			equal(t, "answer", text(resp.Answer), tt.answer, equateEmpty)
			equal(t, "additional", text(resp.Extra), tt.extra, equateEmpty)
			equal(t, "authority", text(resp.Ns), tt.ns, equateEmpty)
			equal(t, "queries upstream", up.queries.Load()-before, tt.upstream)
		})
	}
}

// TestRotation: the addresses of a headless Service come in turns, so that clients taking the first one
// spread over the endpoints.
func TestRotation(t *testing.T) {
	s := startServer(t, fixture(), freeAddr(t))
	firsts := map[string]bool{}
	for range 4 {
		resp := lookup(t, s.Addr(), "db.default.svc.cluster.local.", dns.TypeA)
		if len(resp.Answer) != 2 {
			t.Fatalf("answer %v, want 2 records", resp.Answer)
		}
		firsts[resp.Answer[0].(*dns.A).A.String()] = true
	}
	equal(t, "first addresses", firsts, map[string]bool{"10.1.0.5": true, "10.1.0.7": true})
}

// TestTruncation: a headless Service of 200 endpoints does not fit 512 bytes: over UDP without EDNS0 the
// answer is truncated (TC); with an EDNS0 size of 4096 it fits; over TCP it is whole.
func TestTruncation(t *testing.T) {
	x := NewIndex()
	x.UpsertService(headless("default", "big", false))
	var eps []discoveryv1.Endpoint
	for i := range 200 {
		eps = append(eps, endpoint(fmt.Sprintf("10.2.%d.%d", i/100, i%100+1), nil, ""))
	}
	x.UpsertEndpointSlice(endpointSlice("default", "big", "big-a", discoveryv1.AddressTypeIPv4, nil, eps...))
	s := startServer(t, x, freeAddr(t))
	const name = "big.default.svc.cluster.local."
	edns := question(name, dns.TypeA)
	edns.SetEdns0(4096, false)
	tests := []struct {
		name      string
		netw      string
		req       *dns.Msg
		truncated bool
	}{
		{"udp", "udp", question(name, dns.TypeA), true},
		{"udp with edns0 4096", "udp", edns, false},
		{"tcp", "tcp", question(name, dns.TypeA), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := exchange(t, s.Addr(), tt.netw, tt.req)
			rcode(t, resp, dns.RcodeSuccess)
			if resp.Truncated != tt.truncated {
				t.Errorf("truncated %v, want %v", resp.Truncated, tt.truncated)
			}
			if !tt.truncated && len(resp.Answer) != 200 {
				t.Errorf("%d answers, want 200", len(resp.Answer))
			}
			if tt.truncated && len(resp.Answer) >= 200 {
				t.Errorf("%d answers in a truncated response", len(resp.Answer))
			}
		})
	}
}

// TestEDNS0: a query with EDNS0 gets an OPT record back (DO bit copied); one of EDNS version 1 gets
// BADVERS.
func TestEDNS0(t *testing.T) {
	s := startServer(t, fixture(), freeAddr(t))
	tests := []struct {
		name    string
		version uint8
		do      bool
		rcode   int
		answers int
	}{
		{"version 0", 0, false, dns.RcodeSuccess, 1},
		{"DO bit", 0, true, dns.RcodeSuccess, 1},
		{"version 1", 1, false, dns.RcodeBadVers, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := question("web.default.svc.cluster.local.", dns.TypeA)
			req.SetEdns0(1232, tt.do)
			req.IsEdns0().SetVersion(tt.version)
			resp := exchange(t, s.Addr(), "udp", req)
			rcode(t, resp, tt.rcode)
			equal(t, "answers", len(resp.Answer), tt.answers)
			opt := resp.IsEdns0()
			if opt == nil {
				t.Fatal("no OPT record in the response")
			}
			equal(t, "OPT", [3]any{opt.Version(), opt.Do(), opt.UDPSize()}, [3]any{uint8(0), tt.do, uint16(maxUDPSize)})
		})
	}
}

// TestUpdates: changes to the Index show in the next answer, without waiting.
func TestUpdates(t *testing.T) {
	up := startUpstream(t, false)
	x := NewIndex()
	s := startServer(t, x, up.addr)
	const web, db = "web.default.svc.cluster.local.", "db.default.svc.cluster.local."
	pg := []discoveryv1.EndpointPort{slicePort("pg", corev1.ProtocolTCP, 5432)}
	steps := []struct {
		name   string
		change func()
		qname  string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{"before the Service", func() {}, web, dns.TypeA, dns.RcodeNameError, nil},
		{"Service added", func() { x.UpsertService(service("default", "web", []string{"10.96.0.10"})) },
			web, dns.TypeA, dns.RcodeSuccess, zone(web + " 5 IN A 10.96.0.10")},
		{"cluster IP changed", func() { x.UpsertService(service("default", "web", []string{"10.96.0.99"})) },
			web, dns.TypeA, dns.RcodeSuccess, zone(web + " 5 IN A 10.96.0.99")},
		{"new cluster IP's PTR", func() {}, reverseName(t, "10.96.0.99"), dns.TypePTR, dns.RcodeSuccess,
			zone("99.0.96.10.in-addr.arpa. 5 IN PTR " + web)},
		{"old cluster IP's PTR is forwarded", func() {}, reverseName(t, "10.96.0.10"), dns.TypePTR, dns.RcodeNameError, nil},
		{"headless Service without slices", func() { x.UpsertService(headless("default", "db", false)) },
			db, dns.TypeA, dns.RcodeNameError, nil},
		{"slice added", func() {
			x.UpsertEndpointSlice(endpointSlice("default", "db", "db-a", discoveryv1.AddressTypeIPv4, pg, endpoint("10.1.0.5", nil, "db-0")))
		}, db, dns.TypeA, dns.RcodeSuccess, zone(db + " 5 IN A 10.1.0.5")},
		{"second slice added", func() {
			x.UpsertEndpointSlice(endpointSlice("default", "db", "db-b", discoveryv1.AddressTypeIPv4, pg, endpoint("10.1.0.6", nil, "db-1")))
		}, db, dns.TypeA, dns.RcodeSuccess, zone(db+" 5 IN A 10.1.0.5", db+" 5 IN A 10.1.0.6")},
		{"endpoint not ready", func() {
			x.UpsertEndpointSlice(endpointSlice("default", "db", "db-a", discoveryv1.AddressTypeIPv4, pg, endpoint("10.1.0.5", ptr.To(false), "db-0")))
		}, db, dns.TypeA, dns.RcodeSuccess, zone(db + " 5 IN A 10.1.0.6")},
		{"not-ready endpoint's hostname", func() {}, "db-0." + db, dns.TypeA, dns.RcodeNameError, nil},
		{"slice deleted", func() { x.DeleteEndpointSlice("default", "db-b") }, db, dns.TypeA, dns.RcodeNameError, nil},
		{"Service deleted", func() { x.DeleteService("default", "web") }, web, dns.TypeA, dns.RcodeNameError, nil},
		{"namespace with a Service left", func() {}, "default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"last Service deleted", func() { x.DeleteService("default", "db") }, "default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
	}
	for _, st := range steps {
		st.change()
		resp := lookup(t, s.Addr(), st.qname, st.qtype)
		if resp.Rcode != st.rcode {
			t.Errorf("%s: rcode %s, want %s", st.name, dns.RcodeToString[resp.Rcode], dns.RcodeToString[st.rcode])
		}
		equal(t, st.name+": answer", text(resp.Answer), st.answer, equateEmpty)
	}
}
