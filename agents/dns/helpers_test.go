package dns

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// upstream is a real DNS server on loopback (UDP and TCP, one port) standing for the host's resolvers:
// it answers example.org. A 192.0.2.1 (TTL 300), NXDOMAIN for the rest, or REFUSED to everything, and
// counts the queries it gets.
type upstream struct {
	addr    string
	queries atomic.Int64
	refuse  bool
	stop    func()
}

func (u *upstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	u.queries.Add(1)
	resp := new(dns.Msg)
	resp.SetReply(req)
	switch q := req.Question[0]; {
	case u.refuse:
		resp.Rcode = dns.RcodeRefused
	case q.Name == "example.org." && q.Qtype == dns.TypeA:
		resp.Answer = append(resp.Answer, mustRR("example.org. 300 IN A 192.0.2.1"))
	default:
		resp.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(resp)
}

// startUpstream starts an upstream, stopped at the end of the test (or earlier by its stop).
func startUpstream(t *testing.T, refuse bool) *upstream {
	t.Helper()
	pc, ln, err := bind(t.Context(), netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: pc.LocalAddr().String(), refuse: refuse}
	var started sync.WaitGroup
	servers := []*dns.Server{
		{PacketConn: pc, Handler: u, NotifyStartedFunc: started.Done},
		{Listener: ln, Handler: u, NotifyStartedFunc: started.Done},
	}
	var served sync.WaitGroup
	for _, srv := range servers {
		started.Add(1)
		served.Go(func() { _ = srv.ActivateAndServe() })
	}
	started.Wait()
	u.stop = sync.OnceFunc(func() {
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
		served.Wait()
	})
	t.Cleanup(u.stop)
	return u
}

// startServer starts a Server on 127.0.0.1 (a free port) answering from records and forwarding to the
// upstreams, logging at debug level (to nowhere); it is stopped at the end of the test, which fails if
// Start returned an error.
func startServer(t testing.TB, records Records, upstreams ...string) *Server {
	t.Helper()
	return startServerConfig(t, Config{
		Upstreams: upstreams,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, records)
}

// startServerConfig is startServer with a Config (its Listen and ForwardTimeout set here).
func startServerConfig(t testing.TB, cfg Config, records Records) *Server {
	t.Helper()
	cfg.Listen, cfg.ForwardTimeout = "127.0.0.1:0", time.Second
	s, err := New(t.Context(), cfg, records)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return s
}

// exchange sends m to addr over netw ("udp" or "tcp") with a real miekg client.
func exchange(t testing.TB, addr netip.AddrPort, netw string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: netw, Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(m, addr.String())
	if err != nil {
		t.Fatalf("%s %s over %s: %v", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], netw, err)
	}
	if resp.Id != m.Id {
		t.Fatalf("response id %d, want %d", resp.Id, m.Id)
	}
	return resp
}

func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// lookup asks name/qtype over UDP.
func lookup(t testing.TB, addr netip.AddrPort, name string, qtype uint16) *dns.Msg {
	t.Helper()
	return exchange(t, addr, "udp", question(name, qtype))
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return rr
}

// zone returns records written in zone file syntax as their canonical text, sorted.
func zone(lines ...string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, mustRR(l).String())
	}
	slices.Sort(out)
	return out
}

// text returns records as their text, sorted; the OPT pseudo-record is left out and the SOA's serial (a
// time) is zeroed.
func text(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.OPT:
			continue
		case *dns.SOA:
			c := *r
			c.Serial = 0
			rr = &c
		}
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// equateEmpty has a nil and an empty slice equal.
var equateEmpty = cmpopts.EquateEmpty()

// reporter is what the assertions need of a *testing.T or a *rapid.T.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// equal fails the test with a diff when got and want differ.
func equal[T any](t reporter, what string, got, want T, opts ...cmp.Option) {
	t.Helper()
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// rcode fails the test when resp's response code is not want.
func rcode(t testing.TB, resp *dns.Msg, want int) {
	t.Helper()
	if resp.Rcode != want {
		t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[want])
	}
}

// API objects.

func service(ns, name string, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: clusterIPs, Ports: ports},
	}
	if len(clusterIPs) > 0 {
		s.Spec.ClusterIP = clusterIPs[0]
	}
	return s
}

func headless(ns, name string, publishNotReady bool) *corev1.Service {
	s := service(ns, name, []string{corev1.ClusterIPNone})
	s.Spec.PublishNotReadyAddresses = publishNotReady
	return s
}

func externalName(ns, name, target string) *corev1.Service {
	s := service(ns, name, nil)
	s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, target
	return s
}

func servicePort(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

func endpointSlice(ns, svc, name string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: family,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func slicePort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)}
}

// endpoint is an endpoint of one address; ready nil leaves the condition unset (ready, by the API's
// rule); hostname "" leaves it unset.
func endpoint(addr string, ready *bool, hostname string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	return e
}

// freeAddr returns a loopback address where nothing listens (over UDP: a query there is refused at once).
func freeAddr(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
