package netnstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Serve runs a TCP and a UDP server on port in the namespace at path, until the test ends. A TCP connection is
// sent "<name> <the client's address>" and then has what it sends echoed; a UDP datagram is answered with the
// same line.
func Serve(t testing.TB, path, name string, port uint16) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := Run(path, func() (err error) {
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatalf("servers in %s: %v", name, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s\n", name, from.(*net.UDPAddr).AddrPort().Addr().Unmap()), from)
		}
	}()
}

// Answer is who answered a connection to a Serve server, and the client address it saw.
type Answer struct{ Name, SeenFrom string }

// DialTimeout bounds a connection that fails (a refusal or an ICMP error comes at once); it is not a wait.
const DialTimeout = 5 * time.Second

// Ask connects from the namespace at path to addr over network ("tcp" or "udp") and returns the Serve server's
// answer. For TCP, the connection stays open when keep is non-nil (*keep is set to it), else it is closed.
func Ask(path, network string, addr netip.AddrPort, keep *net.Conn) (Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	var c net.Conn
	if err := Run(path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr.String())
		return err
	}); err != nil {
		return Answer{}, err
	}
	_ = c.SetDeadline(time.Now().Add(DialTimeout))
	if network == "udp" {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			c.Close()
			return Answer{}, err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if keep != nil && err == nil {
		*keep = c
	} else {
		c.Close()
	}
	if err != nil {
		return Answer{}, err
	}
	name, from, _ := strings.Cut(strings.TrimSpace(line), " ")
	return Answer{Name: name, SeenFrom: from}, nil
}

// AskN makes n connections and counts the answers by name (errors under "error: ...").
func AskN(path, network string, addr netip.AddrPort, n int) map[string]int {
	out := map[string]int{}
	for range n {
		a, err := Ask(path, network, addr, nil)
		if err != nil {
			out["error: "+err.Error()]++
			continue
		}
		out[a.Name]++
	}
	return out
}

// Refused reports whether err is a connection the network refused (reset, port or host unreachable).
func Refused(err error) bool {
	return errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.ENETUNREACH)
}

// WaitUp polls until the named links of the namespace at path are operationally up (a device that just got its
// carrier drops what it is given until the kernel's link watcher activates it, up to a second later).
func WaitUp(t testing.TB, path string, names ...string) {
	t.Helper()
	h := Handle(t, path)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("link %s in %s is %v", name, filepath.Base(path), l.Attrs().OperState)
			}
			<-tick.C
		}
	}
}

// Route adds a route to dst via gw in the namespace at path; an invalid gw makes it unreachable.
func Route(t testing.TB, path string, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	r := &netlink.Route{Dst: IPNet(dst)}
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
	} else {
		r.Type = unix.RTN_UNREACHABLE
	}
	if err := Handle(t, path).RouteAdd(r); err != nil {
		t.Fatalf("route %v via %v: %v", dst, gw, err)
	}
}

// IPNet is p as the netlink library takes it.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
