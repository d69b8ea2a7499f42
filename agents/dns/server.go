package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Records is the cluster state a Server answers from; *Index implements it. Its methods are called for
// every query, concurrently, and must neither block nor do I/O.
type Records interface {
	// Service returns the records of the Service namespace/name (lower-case).
	Service(namespace, name string) (*Service, bool)
	// Namespace reports whether the namespace exists as far as DNS is concerned.
	Namespace(namespace string) bool
	// Reverse returns the owners of an address; nil for an address outside the cluster's records.
	Reverse(ip netip.Addr) []ReverseName
}

const (
	// maxUDPSize is the largest UDP response sent (and the EDNS0 payload size advertised), whatever larger
	// size a client advertises: DNS flag day 2020's 1232 is for the Internet; this server's clients are on
	// the node.
	maxUDPSize = dns.DefaultMsgSize
	// shutdownTimeout bounds the wait for queries under way when the Server stops.
	shutdownTimeout = 5 * time.Second
)

var _ dns.Handler = (*Server)(nil)

// Server is the cluster DNS server of one node: see the package documentation for what it answers.
type Server struct {
	cfg     Config
	records Records
	log     *slog.Logger
	zone    string // Config.Domain as a lower-case FQDN
	ttl     uint32
	addr    netip.AddrPort
	nsAddrs []netip.Addr // ns.dns.<domain>: the listen IP, unless it is unspecified
	serial  uint32       // the SOA's: the time the Server was made

	udp, tcp     *dns.Server
	pc           net.PacketConn
	ln           net.Listener
	udpClient    *dns.Client
	tcpClient    *dns.Client
	rotation     atomic.Uint32 // turns the order of address answers between queries (round robin)
	shutdownOnce sync.Once
	stopped      atomic.Bool // set when the shutdown begins: serving errors after it are its own
}

// New validates cfg, fills in its defaults (reading the host's resolv.conf for the upstreams unless
// cfg.Upstreams is set) and binds cfg.Listen over UDP and TCP. The Server answers from records once
// Start runs. Errors: an invalid Config, no upstream, or an address that cannot be bound.
func New(ctx context.Context, cfg Config, records Records) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	listen, _ := listenAddr(cfg.Listen)
	pc, ln, err := bind(ctx, listen)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		records:   records,
		log:       cfg.Logger,
		zone:      cfg.Domain + ".",
		ttl:       uint32(cfg.TTL / time.Second),
		addr:      netip.AddrPortFrom(listen.Addr(), uint16(pc.LocalAddr().(*net.UDPAddr).Port)),
		serial:    uint32(time.Now().Unix()),
		pc:        pc,
		ln:        ln,
		udpClient: &dns.Client{Net: "udp", Timeout: cfg.ForwardTimeout, UDPSize: maxUDPSize},
		tcpClient: &dns.Client{Net: "tcp", Timeout: cfg.ForwardTimeout},
	}
	if !listen.Addr().IsUnspecified() {
		s.nsAddrs = []netip.Addr{listen.Addr().Unmap()}
	}
	s.udp = &dns.Server{PacketConn: pc, Handler: s, UDPSize: maxUDPSize}
	s.tcp = &dns.Server{Listener: ln, Handler: s}
	return s, nil
}

// bind listens on addr over UDP and TCP, on one port: with port 0, the port UDP was given, trying again
// when TCP has it taken.
func bind(ctx context.Context, addr netip.AddrPort) (net.PacketConn, net.Listener, error) {
	var lc net.ListenConfig
	for range 16 {
		pc, err := lc.ListenPacket(ctx, "udp", addr.String())
		if err != nil {
			return nil, nil, fmt.Errorf("dns: listen udp %s: %w", addr, err)
		}
		tcpAddr := netip.AddrPortFrom(addr.Addr(), uint16(pc.LocalAddr().(*net.UDPAddr).Port))
		ln, err := lc.Listen(ctx, "tcp", tcpAddr.String())
		if err == nil {
			return pc, ln, nil
		}
		_ = pc.Close()
		if addr.Port() != 0 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("dns: listen tcp %s: %w", tcpAddr, err)
		}
	}
	return nil, nil, fmt.Errorf("dns: listen %s: no port free for both UDP and TCP", addr)
}

// Addr returns the address served, over UDP and TCP: Config.Listen with its port chosen if it was 0.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// Start serves until ctx is done or serving fails, then stops (waiting up to 5 s for queries under way)
// and releases the sockets. It returns nil when ctx ended it. A Server starts once.
func (s *Server) Start(ctx context.Context) error {
	s.log.Debug("cluster dns serving", "addr", s.addr.String(), "domain", s.cfg.Domain, "upstreams", s.cfg.Upstreams)
	errc := make(chan error, 2)
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	var err error
	pending := 2
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
	}
	s.shutdown()
	for range pending {
		<-errc // errors after the shutdown are the shutdown's
	}
	if err != nil && !s.stopped.Load() {
		return fmt.Errorf("dns: serving %s: %w", s.addr, err)
	}
	return nil
}

// Close stops the Server (Start then returns) and releases its sockets; for a Server whose Start will
// not run. It is safe to call more than once.
func (s *Server) Close() error {
	s.shutdown()
	return nil
}

func (s *Server) shutdown() {
	s.shutdownOnce.Do(func() {
		s.stopped.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		for _, srv := range []*dns.Server{s.udp, s.tcp} {
			_ = srv.ShutdownContext(ctx) // "not started" if Start never ran, or has not yet: closing below stops it
		}
		_ = s.pc.Close()
		_ = s.ln.Close()
	})
}

// ServeDNS answers one query: from the Records for the cluster domain and the addresses they know,
// from the upstreams for the rest.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	resp := s.respond(req, tcp)
	s.write(w, req, resp, tcp)
	if s.log.Enabled(context.Background(), slog.LevelDebug) && len(req.Question) > 0 {
		q := req.Question[0]
		s.log.Debug("dns query", "name", q.Name, "type", dns.TypeToString[q.Qtype], "tcp", tcp,
			"rcode", dns.RcodeToString[resp.Rcode], "answers", len(resp.Answer), "truncated", resp.Truncated,
			"client", w.RemoteAddr().String())
	}
}

func (s *Server) respond(req *dns.Msg, tcp bool) *dns.Msg {
	if req.Opcode != dns.OpcodeQuery {
		return s.errorReply(req, dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 {
		return s.errorReply(req, dns.RcodeFormatError)
	}
	if opt := req.IsEdns0(); opt != nil && opt.Version() != 0 {
		return s.errorReply(req, dns.RcodeBadVers)
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if q.Qclass == dns.ClassINET {
		if dns.IsSubDomain(s.zone, name) {
			return s.authoritative(req, q, name)
		}
		if resp := s.reverse(req, q, name); resp != nil {
			return resp
		}
	}
	return s.forward(req, tcp)
}

// reply starts a response to req: authoritative, recursion available (other names are forwarded), and
// with an OPT record if req has one (version 0; the DO bit copied, as RFC 3225 asks).
func (s *Server) reply(req *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		resp.SetEdns0(maxUDPSize, opt.Do())
	}
	return resp
}

func (s *Server) errorReply(req *dns.Msg, rcode int) *dns.Msg {
	resp := s.reply(req)
	resp.Authoritative = false
	resp.Rcode = rcode
	return resp
}

// write sends resp, truncated (TC set) to what the client takes: 512 bytes over UDP, or its EDNS0
// payload size up to maxUDPSize; 64 KiB over TCP.
func (s *Server) write(w dns.ResponseWriter, req, resp *dns.Msg, tcp bool) {
	size := dns.MaxMsgSize
	if !tcp {
		size = dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPSize)
		}
	}
	resp.Truncate(size)
	if err := w.WriteMsg(resp); err != nil {
		s.log.Debug("dns write failed", "client", w.RemoteAddr().String(), "err", err)
	}
}
