package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The connection scenario's node: the server pod on bridge wh0, the client pod on wh1, so that the node routes
// between them (a pod reaching a Service whose endpoint is on its own bridge needs br_netfilter, which the host may
// not have). The node programs the measured Service (cluster IP serviceIP(0):80 → the server pod's :8080) and
// the other Services, whose endpoints do not exist.
var (
	connServerGW = netip.MustParseAddr("10.244.0.1")
	connServerIP = netip.MustParseAddr("10.244.0.2")
	connClientGW = netip.MustParseAddr("10.244.1.1")
	connClientIP = netip.MustParseAddr("10.244.1.2")
)

// connWarmup pairs of connections precede the timed ones (ARP, the first conntrack entries, the server's
// goroutines).
const connWarmup = 100

// connRequest and connAnswer are the round trip after the connect.
var connRequest, connAnswer = []byte("ping\n"), []byte("pong\n")

// connectNet is the node, the pods, the server and the node's nftables backend.
type connectNet struct {
	node, client, server *netNS
	be                   proxy.Backend
	ln                   net.Listener
}

func (c *connectNet) Close() {
	if c.ln != nil {
		c.ln.Close()
	}
	if c.be != nil {
		_ = c.be.Cleanup(context.Background())
		c.be.Close()
	}
	for _, ns := range []*netNS{c.client, c.server, c.node} {
		if ns != nil {
			ns.Close()
		}
	}
}

// connect measures connection setup with the measured Service alone, then with ConnectOthers more Services.
func (r *proxyRunner) connect(ctx context.Context) []ProxyConnectResult {
	cn, err := newConnectNet(ctx)
	if err != nil {
		return []ProxyConnectResult{{Err: err.Error()}}
	}
	defer cn.Close()
	measured := makeProxyObjects(0, 1, 1, 0)
	measured.slices[0].Endpoints[0].Addresses = []string{connServerIP.String()}
	var out []ProxyConnectResult
	for _, others := range []int{0, r.cfg.ConnectOthers} {
		if others < 0 || ctx.Err() != nil || (others == 0 && len(out) > 0) {
			continue
		}
		objs := makeProxyObjects(1, others, r.cfg.Endpoints, 0)
		objs.services = append(objs.services, measured.services...)
		objs.slices = append(objs.slices, measured.slices...)
		res := ProxyConnectResult{OtherServices: others, Samples: r.cfg.ConnectSamples}
		if err := cn.be.Sync(ctx, objs.build()); err != nil {
			res.Err = fmt.Sprintf("sync of %d Services: %v", others+1, err)
		} else {
			r.connectRun(ctx, cn, &res)
		}
		r.log.Info("connect", "others", others, "direct p50", res.Direct.P50, "cluster ip p50", res.ClusterIP.P50, "err", res.Err)
		out = append(out, res)
	}
	return out
}

// newConnectNet makes the namespaces, links, routes, the server and the node's backend.
func newConnectNet(ctx context.Context) (_ *connectNet, err error) {
	c := &connectNet{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.node, err = newNetNS("node"); err != nil {
		return nil, err
	}
	if c.server, err = newNetNS("server-pod"); err != nil {
		return nil, err
	}
	if c.client, err = newNetNS("client-pod"); err != nil {
		return nil, err
	}
	if err := c.wire(ctx); err != nil {
		return nil, err
	}
	if c.be, err = newNFT(c.node, modeNFT); err != nil {
		return nil, err
	}
	err = c.server.run(func() (err error) {
		c.ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", endpointPort))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	go serveConnections(c.ln)
	return c, nil
}

// wire connects each pod to its bridge in the node by a veth, with a default route via the bridge.
func (c *connectNet) wire(ctx context.Context) error {
	pods := []struct {
		ns     *netNS
		br     string
		ip, gw netip.Addr
	}{{c.server, "wh0", connServerIP, connServerGW}, {c.client, "wh1", connClientIP, connClientGW}}
	for _, p := range pods {
		port := "veth-" + p.ns.name
		err := c.node.bridge(p.br, netip.PrefixFrom(p.gw, 24))
		if err == nil {
			err = p.ns.veth("eth0", netip.PrefixFrom(p.ip, 24), c.node, port)
		}
		if err == nil {
			err = c.node.enslave(port, p.br)
		}
		if err == nil {
			err = p.ns.defaultRoute(p.gw)
		}
		if err == nil {
			err = p.ns.waitUp(ctx, "eth0")
		}
		if err == nil {
			err = c.node.waitUp(ctx, p.br, port)
		}
		if err != nil {
			return err
		}
	}
	return c.node.sysctl("net/ipv4/ip_forward", "1")
}

// serveConnections answers each connection's request, then waits for the client to close first (so the
// client's side holds TIME_WAIT, as for a pod talking to a Service).
func serveConnections(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, len(connRequest))
			_ = c.SetDeadline(time.Now().Add(dialTimeout))
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(connAnswer); err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

// dialTimeout bounds one connection that fails; it is not a wait.
const dialTimeout = 5 * time.Second

// connectRun makes connWarmup + Samples pairs of connections from the client pod, one to the pod IP and one to
// the cluster IP in a random order per pair, and times the Samples pairs after the warm-up.
func (r *proxyRunner) connectRun(ctx context.Context, cn *connectNet, res *ProxyConnectResult) {
	targets := []netip.AddrPort{netip.AddrPortFrom(connServerIP, endpointPort), netip.AddrPortFrom(serviceIP(0), servicePort)}
	lat := [][]time.Duration{nil, nil}
	errs := []ProxyLatency{{Target: "pod IP " + targets[0].String()}, {Target: "cluster IP " + targets[1].String()}}
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(res.OtherServices)))
	err := cn.client.run(func() error {
		for i := range connWarmup + res.Samples {
			if err := ctx.Err(); err != nil {
				return err
			}
			order := []int{0, 1}
			if rng.IntN(2) == 1 {
				order = []int{1, 0}
			}
			for _, t := range order {
				d, err := connectOnce(ctx, targets[t])
				switch {
				case err != nil:
					if errs[t].Errors++; errs[t].FirstErr == "" {
						errs[t].FirstErr = err.Error()
					}
				case i >= connWarmup:
					lat[t] = append(lat[t], d)
				}
			}
		}
		return nil
	})
	if err != nil {
		res.Err = err.Error()
	}
	res.Direct, res.ClusterIP = latencyOf(errs[0], lat[0]), latencyOf(errs[1], lat[1])
	if res.Direct.P50 > 0 {
		res.Ratio = float64(res.ClusterIP.P50) / float64(res.Direct.P50)
	}
}

// connectOnce connects to addr, sends the request and reads the answer; the time covers all three. The socket
// is made on the calling thread, so in its network namespace.
func connectOnce(ctx context.Context, addr netip.AddrPort) (time.Duration, error) {
	buf := make([]byte, len(connAnswer))
	d := net.Dialer{Timeout: dialTimeout}
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp4", addr.String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(t0.Add(dialTimeout))
	if _, err := c.Write(connRequest); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if string(buf) != string(connAnswer) {
		return 0, errors.New("wrong answer " + string(buf))
	}
	return took, nil
}

// latencyOf summarizes one target's times.
func latencyOf(l ProxyLatency, ds []time.Duration) ProxyLatency {
	if len(ds) == 0 {
		return l
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	l.Mean = sum / time.Duration(len(ds))
	l.P50, l.P99, l.Max = medianDuration(ds), percentile(ds, 99), slices.Max(ds)
	return l
}
