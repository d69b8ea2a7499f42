package store

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy is a TCP proxy between a store and PostgreSQL that a test can break on purpose.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu          sync.Mutex // guards the fields below
	mode        proxyMode
	conns       map[net.Conn]struct{} // client-side connections
	dropCommits int                   // cut the connection right after forwarding this many COMMITs
	thenRefuse  bool                  // and then refuse every connection
}

type proxyMode int

const (
	proxyUp        proxyMode = iota
	proxyRefuse              // close new connections at once
	proxyBlackhole           // accept, forward nothing
)

// newFaultProxy proxies the database of dbURL and returns the proxy and the URL to use instead.
func newFaultProxy(t testing.TB, dbURL string) (*faultProxy, string) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		t.Fatalf("fault proxy needs a TCP database URL, got %q", dbURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.set(proxyRefuse) })
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

// set changes the mode; leaving proxyUp cuts every open connection.
func (p *faultProxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	if m != proxyUp {
		for c := range p.conns {
			c.Close()
		}
	}
}

// dropAfterCommit makes the proxy forward the next COMMIT and then cut its connection, so the server commits
// and the client never hears back.
func (p *faultProxy) dropAfterCommit(thenRefuse bool) {
	p.mu.Lock()
	p.dropCommits++
	p.thenRefuse = thenRefuse
	p.mu.Unlock()
}

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		switch mode {
		case proxyRefuse:
			c.Close()
		case proxyBlackhole:
			// hold it open, forward nothing; set() closes it
		default:
			go p.pipe(c)
		}
	}
}

func (p *faultProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	// The server side stays open until PostgreSQL has answered what was forwarded (a dropped COMMIT is then
	// processed, whatever the machine's load), at most 10 s; the answer goes nowhere once the client is cut.
	answered := make(chan struct{})
	var cut atomic.Bool
	defer func() {
		if cut.Load() {
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
			}
		}
		server.Close()
	}()
	go func() {
		rbuf := make([]byte, 64<<10)
		once := false
		for {
			n, err := server.Read(rbuf)
			if n > 0 {
				if cut.Load() {
					if !once {
						once = true
						close(answered)
					}
					continue // the client was cut off: the answer goes nowhere
				}
				_, _ = client.Write(rbuf[:n])
			}
			if err != nil {
				break
			}
		}
		client.Close()
		if !once {
			close(answered)
		}
	}()
	buf := make([]byte, 64<<10)
	// readOnly: this connection's current transaction began READ ONLY (the store's snapshot reads); its COMMIT
	// is not one to drop, the tests mean the commit of a write. (A read transaction may end in ROLLBACK, so the
	// flag follows each BEGIN rather than each COMMIT.)
	readOnly := false
	for {
		n, err := client.Read(buf)
		if n > 0 {
			lower := bytes.ToLower(buf[:n])
			if bytes.Contains(lower, []byte("begin")) { // each transaction says at its BEGIN whether it is read-only
				readOnly = bytes.Contains(lower, []byte("read only"))
			}
			drop := bytes.Contains(lower, []byte("commit\x00")) && !readOnly && p.takeDrop()
			if drop {
				// Cut the client off first, then hand the server the COMMIT: its answer cannot reach the client.
				cut.Store(true)
				client.Close()
			}
			if _, werr := server.Write(buf[:n]); werr != nil || drop {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
}

// takeDrop consumes one pending drop; with thenRefuse it also cuts every client connection and refuses new ones.
func (p *faultProxy) takeDrop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropCommits == 0 {
		return false
	}
	p.dropCommits--
	if p.thenRefuse {
		p.mode = proxyRefuse
		for c := range p.conns {
			c.Close()
		}
	}
	return true
}
