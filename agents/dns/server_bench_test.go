package dns

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkQueries measures the queries a Server answers from its Index over UDP on loopback, from
// parallel clients (GOMAXPROCS of them, each with its own socket and one query outstanding); it reports
// queries/s. Each query's response is checked. The Server logs nothing, as in production.
func BenchmarkQueries(b *testing.B) {
	s := startServerConfig(b, Config{Upstreams: []string{freeAddr(b)}}, fixture())
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers int
	}{
		{"A", "web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		{"headless SRV", "_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, 2},
		{"NXDOMAIN", "nope.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				co, err := dns.Dial("udp", s.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				defer func() { _ = co.Close() }()
				req := question(tt.qname, tt.qtype)
				for pb.Next() {
					req.Id = dns.Id()
					_ = co.SetDeadline(time.Now().Add(5 * time.Second))
					if err := co.WriteMsg(req); err != nil {
						b.Error(err)
						return
					}
					resp, err := co.ReadMsg()
					if err != nil {
						b.Error(err)
						return
					}
					if resp.Id != req.Id || resp.Rcode != tt.rcode || len(resp.Answer) != tt.answers {
						b.Errorf("response %d %s with %d answers, want %d %s with %d",
							resp.Id, dns.RcodeToString[resp.Rcode], len(resp.Answer), req.Id, dns.RcodeToString[tt.rcode], tt.answers)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		})
	}
}
