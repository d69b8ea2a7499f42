package ipvs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/nftables"
	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The TestKernel tests need IPVS: TestVM runs them in Debian's kernel under qemu; on a host whose kernel has IPVS
// they run there too (each in network namespaces of its own).

// The test cluster's addresses: the node, an outside host, the pods (one veth pair each to the node).
var (
	podCIDR   = netip.MustParsePrefix("10.244.0.0/16")
	nodeIP    = netip.MustParseAddr("192.0.2.1")
	outsideIP = netip.MustParseAddr("192.0.2.100")
	podIPs    = map[string]netip.Addr{"a": netip.MustParseAddr("10.244.1.2"), "b": netip.MustParseAddr("10.244.2.2"),
		"d": netip.MustParseAddr("10.244.3.2")}
	podIPv6s = map[string]netip.Addr{"a": netip.MustParseAddr("fd00:244:1::2"), "b": netip.MustParseAddr("fd00:244:2::2"),
		"d": netip.MustParseAddr("fd00:244:3::2")}
)

const serverPort = 8080

func ep(pod string) netip.AddrPort        { return netip.AddrPortFrom(podIPs[pod], serverPort) }
func ep6(pod string) netip.AddrPort       { return netip.AddrPortFrom(podIPv6s[pod], serverPort) }
func addrPort(k proxy.Key) netip.AddrPort { return netip.AddrPortFrom(k.Addr, k.Port) }

func key(addr string, proto corev1.Protocol, port uint16) proxy.Key {
	return proxy.Key{Addr: netip.MustParseAddr(addr), Protocol: proto, Port: port}
}

func state(vss ...proxy.VirtualService) proxy.State {
	st := proxy.State{}
	for _, v := range vss {
		st[v.Key] = v
	}
	return st
}

// The cluster's virtual services.
var (
	web       = proxy.VirtualService{Key: key("10.96.0.10", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/web:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	dns       = proxy.VirtualService{Key: key("10.96.0.11", corev1.ProtocolUDP, 53), Kind: proxy.ClusterIP, Service: "default/dns:dns", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	sticky    = proxy.VirtualService{Key: key("10.96.0.12", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/sticky:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}, Affinity: time.Hour}
	self      = proxy.VirtualService{Key: key("10.96.0.13", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/self:http", Destinations: []netip.AddrPort{ep("a")}}
	empty     = proxy.VirtualService{Key: key("10.96.0.14", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/empty:http"}
	sctp      = proxy.VirtualService{Key: key("10.96.0.15", corev1.ProtocolSCTP, 9000), Kind: proxy.ClusterIP, Service: "default/sctp:s", Destinations: []netip.AddrPort{ep("a")}}
	webNode   = proxy.VirtualService{Key: proxy.Key{Addr: nodeIP, Protocol: corev1.ProtocolTCP, Port: 30080}, Kind: proxy.NodePort, Service: "default/web:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	localNode = proxy.VirtualService{Key: proxy.Key{Addr: nodeIP, Protocol: corev1.ProtocolTCP, Port: 30081}, Kind: proxy.NodePort, Service: "default/local:http", Destinations: []netip.AddrPort{ep("a")}, KeepSource: true}
	webExt    = proxy.VirtualService{Key: key("203.0.113.10", corev1.ProtocolTCP, 80), Kind: proxy.ExternalIP, Service: "default/web:http", Destinations: []netip.AddrPort{ep("a"), ep("b")}}
	webV6     = proxy.VirtualService{Key: key("fd00:96::10", corev1.ProtocolTCP, 80), Kind: proxy.ClusterIP, Service: "default/web:http", Destinations: []netip.AddrPort{ep6("a"), ep6("b")}}
)

func allServices() proxy.State {
	return state(web, dns, sticky, self, empty, sctp, webNode, localNode, webExt, webV6)
}

// programmedOf is desired as a freshly programmed kernel holds it: every destination active.
func programmedOf(desired proxy.State) proxy.Programmed {
	out := proxy.Programmed{}
	for k, v := range desired {
		out[k] = proxy.ProgrammedService{VirtualService: v}
	}
	return out
}

var equateAddrs = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})

// kernelService is a virtual service as the test reads it from the kernel, independently of the backend.
type viewService struct {
	Scheduler string
	Affinity  time.Duration
	Weights   map[netip.AddrPort]int // -1: not masqueraded
}

// kernelView reads every virtual service of the kernel through h.
func kernelView(t testing.TB, h *ipvs.Handle) map[proxy.Key]viewService {
	t.Helper()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	out := map[proxy.Key]viewService{}
	for _, s := range svcs {
		k, ok := serviceKey(s)
		if !ok {
			t.Fatalf("a virtual service the backend cannot have made: %+v", s)
		}
		v := viewService{Scheduler: s.SchedName, Weights: map[netip.AddrPort]int{}}
		if s.Flags&flagPersistent != 0 {
			v.Affinity = time.Duration(s.Timeout) * time.Second
		}
		dests, err := h.GetDestinations(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dests {
			a, _ := netip.AddrFromSlice(d.Address)
			if d.AddressFamily == 2 {
				a = a.Unmap()
			}
			w := d.Weight
			if d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq {
				w = -1
			}
			v.Weights[netip.AddrPortFrom(a, d.Port)] = w
		}
		out[k] = v
	}
	return out
}

// viewOf is what the kernel should hold for desired with scheduler sched (drained: weight 0).
func viewOf(desired proxy.State, sched string, drained map[proxy.Key][]netip.AddrPort) map[proxy.Key]viewService {
	out := map[proxy.Key]viewService{}
	for k, v := range desired {
		vs := viewService{Scheduler: sched, Affinity: v.Affinity, Weights: map[netip.AddrPort]int{}}
		for _, d := range v.Destinations {
			vs.Weights[d] = 1
		}
		for _, d := range drained[k] {
			vs.Weights[d] = 0
		}
		out[k] = vs
	}
	return out
}

// assertKernel compares the kernel's virtual services with want.
func assertKernel(t testing.TB, h *ipvs.Handle, want map[proxy.Key]viewService) {
	t.Helper()
	if diff := cmp.Diff(want, kernelView(t, h), equateAddrs); diff != "" {
		t.Fatalf("the kernel's virtual services (-want +got):\n%s", diff)
	}
}

// dummyAddrs are the addresses on the namespace's dummy interface (nil when there is none).
func dummyAddrs(t testing.TB, path string) []netip.Addr {
	t.Helper()
	h := netnstest.Handle(t, path)
	l, err := h.LinkByName(DefaultInterface)
	if err != nil {
		return nil
	}
	list, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range list {
		if ip, _ := netip.AddrFromSlice(a.IP); !ip.IsLinkLocalUnicast() {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// addrsOf are the addresses desired puts on the dummy interface.
func addrsOf(desired proxy.State) []netip.Addr {
	var out []netip.Addr
	for k, v := range desired {
		if v.Kind != proxy.NodePort && !slices.Contains(out, k.Addr) {
			out = append(out, k.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// nftConn is an nftables connection of the test's own in the namespace at path.
func nftConn(t testing.TB, path string) *nftables.Conn {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setElements are the elements of the table's set name, as strings (addresses, or address . protocol . port).
func setElements(t testing.TB, c *nftables.Conn, name string) []string {
	t.Helper()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tables, func(tb *nftables.Table) bool { return tb.Name == Table }) {
		return nil
	}
	table := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	elems, err := c.GetSetElements(&nftables.Set{Table: table, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range elems {
		out = append(out, elementString(e.Key))
	}
	slices.Sort(out)
	return out
}

// elementString prints a set element's key: "a" for a hairpin (a . a), "a proto port" for a service.
func elementString(k []byte) string {
	switch len(k) {
	case 8, 32:
		a, _ := netip.AddrFromSlice(k[:len(k)/2])
		return a.String()
	}
	a, _ := netip.AddrFromSlice(k[:len(k)-8])
	p := k[len(k)-8:]
	return fmt.Sprintf("%v %s %d", a, map[byte]string{6: "tcp", 17: "udp", 132: "sctp"}[p[0]], uint16(p[4])<<8|uint16(p[5]))
}

// nodeNS makes a namespace for a node, without a network.
func nodeNS(t testing.TB) string {
	t.Helper()
	return netnstest.New(t, t.TempDir(), "node")
}

// sysctlValue reads a sysctl of the namespace at path.
func sysctlValue(t testing.TB, path, key string) string {
	t.Helper()
	var v []byte
	if err := netnstest.Run(path, func() (err error) {
		v, err = os.ReadFile(filepath.Join("/proc/sys", key))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}
