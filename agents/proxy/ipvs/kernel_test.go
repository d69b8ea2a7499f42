package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// TestKernelServices programs every kind of virtual service and reads the kernel back: the virtual services with
// their scheduler, persistence and masqueraded destinations, the addresses on the dummy interface, the sets of the
// masquerade table, the sysctls; a second Sync changes nothing and reads no destination back.
func TestKernelServices(t *testing.T) {
	requireIPVS(t)
	node := nodeNS(t)
	b := newBackend(t, node, Config{PodCIDR: podCIDR})
	desired := allServices()
	if err := b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ipvsHandle(t, node), viewOf(desired, "rr", nil))
	if diff := cmp.Diff(programmedOf(desired), b.Programmed(), equateAddrs); diff != "" {
		t.Fatalf("Programmed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(addrsOf(desired), dummyAddrs(t, node), equateAddrs); diff != "" {
		t.Fatalf("addresses on %s (-want +got):\n%s", DefaultInterface, diff)
	}
	nft := nftConn(t, node)
	for set, want := range map[string][]string{
		"cluster4":  {"10.96.0.10 tcp 80", "10.96.0.11 udp 53", "10.96.0.12 tcp 80", "10.96.0.13 tcp 80", "10.96.0.14 tcp 80", "10.96.0.15 sctp 9000"},
		"external4": {"192.0.2.1 tcp 30080", "203.0.113.10 tcp 80"}, // not localNode: it keeps the source
		"hairpin4":  {"10.244.1.2", "10.244.2.2"},
		"cluster6":  {"fd00:96::10 tcp 80"},
		"hairpin6":  {"fd00:244:1::2", "fd00:244:2::2"},
		"external6": nil,
	} {
		if diff := cmp.Diff(want, setElements(t, nft, set)); diff != "" {
			t.Errorf("set %s (-want +got):\n%s", set, diff)
		}
	}
	for _, s := range sysctls {
		if got := sysctlValue(t, node, s.key); got != s.value {
			t.Errorf("sysctl %s = %s, want %s", s.key, got, s.value)
		}
	}

	t.Run("the dump parser reads what moby/ipvs reads", func(t *testing.T) {
		svcs, err := ipvsHandle(t, node).GetServices()
		if err != nil {
			t.Fatal(err)
		}
		var want []kernelService
		for _, s := range svcs {
			ks, _ := fromService(s)
			want = append(want, ks)
		}
		got, err := b.dump.services()
		if err != nil {
			t.Fatal(err)
		}
		less := func(a, b kernelService) int { return a.key.Compare(b.key) }
		slices.SortFunc(want, less)
		slices.SortFunc(got, less)
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(kernelService{}), equateAddrs); diff != "" {
			t.Fatalf("(-moby +dump):\n%s", diff)
		}
	})

	if err := b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	if len(b.last.changes) != 0 || b.last.destReads != 0 || b.last.services != len(desired) {
		t.Fatalf("a Sync without changes: %d changes, %d destinations read back, %d services seen (want 0, 0, %d)",
			len(b.last.changes), b.last.destReads, b.last.services, len(desired))
	}
}

// TestKernelScheduler: the configured scheduler on every virtual service; one changed by hand is put back.
func TestKernelScheduler(t *testing.T) {
	requireIPVS(t)
	for _, sched := range Schedulers {
		t.Run(sched, func(t *testing.T) {
			node := nodeNS(t)
			b := newBackend(t, node, Config{Scheduler: sched})
			desired := state(web, sticky)
			if err := b.Sync(t.Context(), desired); err != nil {
				t.Fatal(err)
			}
			h := ipvsHandle(t, node)
			assertKernel(t, h, viewOf(desired, sched, nil))
			other := "rr"
			if sched == "rr" {
				other = "wrr"
			}
			s, _ := toService(web, other)
			if err := h.UpdateService(s); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(t.Context(), desired); err != nil {
				t.Fatal(err)
			}
			assertKernel(t, h, viewOf(desired, sched, nil))
		})
	}
}

// TestKernelUpdate: an endpoint change of one service among 100 touches that service only: its destinations are
// the only ones read back, the new endpoint is added, the old one drained (weight 0), and deleted by the next Sync.
func TestKernelUpdate(t *testing.T) {
	requireIPVS(t)
	node := nodeNS(t)
	b := newBackend(t, node, Config{})
	h := ipvsHandle(t, node)
	desired := manyServices(100, 3)
	if err := b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	k := key("10.96.0.7", corev1.ProtocolTCP, 80)
	vs := desired[k]
	gone, added := vs.Destinations[0], netip.MustParseAddrPort("10.245.0.1:8080")
	vs.Destinations = append(slices.Clone(vs.Destinations[1:]), added)
	slices.SortFunc(vs.Destinations, netip.AddrPort.Compare)
	desired[k] = vs

	steps := []struct {
		name    string
		changes []proxy.Change
		drained map[proxy.Key][]netip.AddrPort
	}{
		{"added and drained", []proxy.Change{{Op: proxy.AddDest, Service: vs, Dest: added}, {Op: proxy.DrainDest, Service: vs, Dest: gone}},
			map[proxy.Key][]netip.AddrPort{k: {gone}}},
		{"drained deleted", []proxy.Change{{Op: proxy.DeleteDest, Service: vs, Dest: gone}}, nil},
		{"nothing left to do", nil, nil},
	}
	for _, step := range steps {
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.changes, b.last.changes, equateAddrs); diff != "" {
			t.Fatalf("%s: the changes (-want +got):\n%s", step.name, diff)
		}
		wantReads := 1
		if step.changes == nil {
			wantReads = 0
		}
		if b.last.destReads != wantReads {
			t.Fatalf("%s: %d virtual services' destinations read back, want %d", step.name, b.last.destReads, wantReads)
		}
		assertKernel(t, h, viewOf(desired, "rr", step.drained))
	}

	t.Run("a drained destination wanted again is restored", func(t *testing.T) {
		old := vs
		vs.Destinations = vs.Destinations[1:]
		desired[k] = vs
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		desired[k] = old
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		want := []proxy.Change{{Op: proxy.RestoreDest, Service: old, Dest: old.Destinations[0]}}
		if diff := cmp.Diff(want, b.last.changes, equateAddrs); diff != "" {
			t.Fatalf("the changes (-want +got):\n%s", diff)
		}
		assertKernel(t, h, viewOf(desired, "rr", nil))
	})

	t.Run("affinity changed", func(t *testing.T) {
		vs := desired[k]
		vs.Affinity = 30 * time.Second
		desired[k] = vs
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if want := []proxy.Change{{Op: proxy.UpdateService, Service: vs}}; !cmp.Equal(want, b.last.changes, equateAddrs) {
			t.Fatalf("changes %v, want %v", b.last.changes, want)
		}
		assertKernel(t, h, viewOf(desired, "rr", nil))
	})

	t.Run("services removed", func(t *testing.T) {
		for key := range desired {
			if key.Addr.As4()[3]%2 == 0 {
				delete(desired, key)
			}
		}
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, h, viewOf(desired, "rr", nil))
		if diff := cmp.Diff(addrsOf(desired), dummyAddrs(t, node), equateAddrs); diff != "" {
			t.Fatalf("addresses on %s (-want +got):\n%s", DefaultInterface, diff)
		}
	})
}

// manyServices is n cluster IPs 10.96.x.y:80 with dests endpoints each, drawn from 5,000 pod addresses.
func manyServices(n, dests int) proxy.State {
	st := proxy.State{}
	for i := range n {
		k := proxy.Key{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Protocol: corev1.ProtocolTCP, Port: 80}
		vs := proxy.VirtualService{Key: k, Kind: proxy.ClusterIP, Service: fmt.Sprintf("default/svc-%d:http", i)}
		for j := range dests {
			p := (i*dests + j) % 5000
			vs.Destinations = append(vs.Destinations, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(p / 250), byte(p%250 + 1)}), 8080))
		}
		slices.SortFunc(vs.Destinations, netip.AddrPort.Compare)
		st[k] = vs
	}
	return st
}

// TestKernelRepair: what someone else changes is repaired — a deleted virtual service, address or table, and an
// extra virtual service on the dummy interface, by the next Sync; a deleted destination or set element (not seen
// by Sync's cheap read back) by Resync. Virtual services on other addresses are left alone.
func TestKernelRepair(t *testing.T) {
	requireIPVS(t)
	node := nodeNS(t)
	b := newBackend(t, node, Config{PodCIDR: podCIDR})
	h := ipvsHandle(t, node)
	desired := allServices()
	if err := b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	foreign := &ipvs.Service{Address: net.ParseIP("198.51.100.1").To4(), Protocol: unix.IPPROTO_TCP, Port: 443,
		AddressFamily: unix.AF_INET, SchedName: "wlc", Netmask: 0xffffffff}
	if err := h.NewService(foreign); err != nil {
		t.Fatal(err)
	}
	want := viewOf(desired, "rr", nil)
	want[key("198.51.100.1", corev1.ProtocolTCP, 443)] = viewService{Scheduler: "wlc", Weights: map[netip.AddrPort]int{}}
	nft := nftConn(t, node)
	table := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	svc := func(vs proxy.VirtualService) *ipvs.Service {
		s, err := toService(vs, "rr")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	for _, tc := range []struct {
		name   string
		resync bool
		meddle func() error
	}{
		{"a virtual service deleted", false, func() error { return h.DelService(svc(web)) }},
		{"an IPv6 one", false, func() error { return h.DelService(svc(webV6)) }},
		{"an extra one on a cluster IP", false, func() error {
			extra := web
			extra.Port = 8443
			return h.NewService(svc(extra))
		}},
		{"an address removed", false, func() error {
			hn := netnstest.Handle(t, node)
			l, err := hn.LinkByName(DefaultInterface)
			if err != nil {
				return err
			}
			return hn.AddrDel(l, hostAddr(dns.Addr))
		}},
		{"the table deleted", false, func() error {
			nft.DelTable(table)
			return nft.Flush()
		}},
		{"the dummy interface deleted", false, func() error {
			hn := netnstest.Handle(t, node)
			l, err := hn.LinkByName(DefaultInterface)
			if err != nil {
				return err
			}
			return hn.LinkDel(l)
		}},
		{"a destination deleted", true, func() error { return h.DelDestination(svc(web), toDestination(ep("a"), 1)) }},
		{"a destination's weight changed", true, func() error { return h.UpdateDestination(svc(web), toDestination(ep("a"), 5)) }},
		{"a set element deleted", true, func() error {
			e, _ := serviceElem(web)
			if err := nft.SetDeleteElements(&nftables.Set{Table: table, Name: "cluster4"}, []nftables.SetElement{{Key: []byte(e.key)}}); err != nil {
				return err
			}
			return nft.Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.meddle(); err != nil {
				t.Fatal(err)
			}
			sync := b.Sync
			if tc.resync {
				sync = func(ctx context.Context, _ proxy.State) error { return b.Resync(ctx) }
			}
			if err := sync(t.Context(), desired); err != nil {
				t.Fatal(err)
			}
			assertKernel(t, h, want)
			if diff := cmp.Diff(addrsOf(desired), dummyAddrs(t, node), equateAddrs); diff != "" {
				t.Fatalf("addresses on %s (-want +got):\n%s", DefaultInterface, diff)
			}
			if got := setElements(t, nft, "cluster4"); len(got) != 6 {
				t.Fatalf("set cluster4 holds %v", got)
			}
		})
	}

	t.Run("Cleanup removes everything but the foreign virtual service", func(t *testing.T) {
		if err := b.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, h, map[proxy.Key]viewService{key("198.51.100.1", corev1.ProtocolTCP, 443): want[key("198.51.100.1", corev1.ProtocolTCP, 443)]})
		if _, err := netnstest.Handle(t, node).LinkByName(DefaultInterface); err == nil {
			t.Fatalf("%s is still there", DefaultInterface)
		}
		tables, err := nft.ListTablesOfFamily(nftables.TableFamilyINet)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) != 0 {
			t.Fatalf("tables left: %v", tables[0].Name)
		}
		if len(b.Programmed()) != 0 {
			t.Fatalf("Programmed after Cleanup: %v", b.Programmed())
		}
		// and the backend starts again from nothing
		if err := b.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, h, want)
	})
}

// TestKernelRefused: a change the kernel refuses (a multicast destination) does not stop the others; the error
// names the virtual service, and the next Sync retries.
func TestKernelRefused(t *testing.T) {
	requireIPVS(t)
	node := nodeNS(t)
	b := newBackend(t, node, Config{})
	h := ipvsHandle(t, node)
	bad := dns
	bad.Destinations = []netip.AddrPort{ep("a"), netip.MustParseAddrPort("224.0.0.5:53")}
	desired := state(web, bad, sticky)
	for range 2 {
		err := b.Sync(t.Context(), desired)
		if err == nil || !strings.Contains(err.Error(), bad.Key.String()) || !errors.Is(err, unix.EINVAL) {
			t.Fatalf("Sync: %v, want an EINVAL naming %v", err, bad.Key)
		}
		partial := state(web, sticky, dns)
		partial[dns.Key] = proxy.VirtualService{Key: dns.Key, Kind: dns.Kind, Service: dns.Service, Destinations: []netip.AddrPort{ep("a")}}
		assertKernel(t, h, viewOf(partial, "rr", nil))
	}
	desired[dns.Key] = dns
	if err := b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, h, viewOf(desired, "rr", nil))
}

// TestKernelClosed: a closed backend refuses to work.
func TestKernelClosed(t *testing.T) {
	requireIPVS(t)
	node := nodeNS(t)
	b := newBackend(t, node, Config{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(t.Context(), state(web)); err == nil {
		t.Fatal("Sync on a closed backend succeeded")
	}
}
