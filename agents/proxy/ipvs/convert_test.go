package ipvs

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" when valid
	}{
		{"defaults", Config{}, ""},
		{"every known scheduler", Config{Scheduler: "mh"}, ""},
		{"an unknown scheduler", Config{Scheduler: "fastest"}, `unknown scheduler "fastest"`},
		{"an IPv6 pod CIDR", Config{PodCIDR: netip.MustParsePrefix("fd00:244::/56")}, ""},
		{"a long interface name", Config{Interface: "wh-ipvs-interface0"}, "longer than 15 bytes"},
		{"a mark of two bits", Config{MasqueradeMark: 0x4001}, "not one bit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate: %v, want %q", err, tc.err)
			}
		})
	}
	for _, s := range Schedulers {
		if err := (Config{Scheduler: s}).Validate(); err != nil {
			t.Errorf("scheduler %s: %v", s, err)
		}
	}
	if got := (Config{}).withDefaults(); got.Interface != DefaultInterface || got.Scheduler != "rr" || got.MasqueradeMark != 0x4000 {
		t.Errorf("defaults: %+v", got)
	}
}

// fromService is what the backend compares of a virtual service as moby/ipvs reads it (dump.go parses the same
// from the kernel's messages; TestKernelServices compares the two).
func fromService(s *ipvs.Service) (kernelService, bool) {
	k, ok := serviceKey(s)
	if !ok {
		return kernelService{}, false
	}
	ks := kernelService{key: k, scheduler: s.SchedName}
	flags := s.Flags &^ flagHashed
	if flags&flagPersistent != 0 {
		ks.affinity = time.Duration(s.Timeout) * time.Second
	}
	ks.foreign = flags&^flagPersistent != 0 || s.Netmask != hostMask(k.Addr) || s.PEName != ""
	return ks, true
}

// TestConvert: a virtual service to an IPVS service and back, destinations both ways.
func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vs    proxy.VirtualService
		want  ipvs.Service
		sched string
	}{
		{"an IPv4 cluster IP", web, ipvs.Service{Address: net.ParseIP("10.96.0.10").To4(), Protocol: unix.IPPROTO_TCP, Port: 80,
			SchedName: "rr", AddressFamily: unix.AF_INET, Netmask: 0xffffffff}, "rr"},
		{"UDP, another scheduler", dns, ipvs.Service{Address: net.ParseIP("10.96.0.11").To4(), Protocol: unix.IPPROTO_UDP, Port: 53,
			SchedName: "sh", AddressFamily: unix.AF_INET, Netmask: 0xffffffff}, "sh"},
		{"SCTP", sctp, ipvs.Service{Address: net.ParseIP("10.96.0.15").To4(), Protocol: unix.IPPROTO_SCTP, Port: 9000,
			SchedName: "rr", AddressFamily: unix.AF_INET, Netmask: 0xffffffff}, "rr"},
		{"affinity: persistent with the timeout", sticky, ipvs.Service{Address: net.ParseIP("10.96.0.12").To4(), Protocol: unix.IPPROTO_TCP, Port: 80,
			SchedName: "rr", AddressFamily: unix.AF_INET, Netmask: 0xffffffff, Flags: flagPersistent, Timeout: 3600}, "rr"},
		{"IPv6: a /128 netmask", webV6, ipvs.Service{Address: net.ParseIP("fd00:96::10"), Protocol: unix.IPPROTO_TCP, Port: 80,
			SchedName: "rr", AddressFamily: unix.AF_INET6, Netmask: 128}, "rr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := toService(tc.vs, tc.sched)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Fatalf("toService (-want +got):\n%s", diff)
			}
			// as the kernel answers: the hashed flag set, IPv4 addresses in 16 bytes
			back := *got
			back.Flags |= flagHashed
			back.Address = back.Address.To16()
			ks, ok := fromService(&back)
			want := kernelService{key: tc.vs.Key, scheduler: tc.sched, affinity: tc.vs.Affinity}
			if !ok || ks != want {
				t.Fatalf("fromService: %+v, %v; want %+v", ks, ok, want)
			}
		})
	}

	t.Run("an unknown protocol", func(t *testing.T) {
		vs := web
		vs.Protocol = "ICMP"
		if _, err := toService(vs, "rr"); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("not the backend's", func(t *testing.T) {
		s, _ := toService(web, "rr")
		for name, change := range map[string]func(*ipvs.Service){
			"one-packet scheduling": func(s *ipvs.Service) { s.Flags |= 0x4 },
			"a /24 persistence":     func(s *ipvs.Service) { s.Netmask = 0xffffff00 },
			"a persistence engine":  func(s *ipvs.Service) { s.PEName = "sip" },
		} {
			c := *s
			change(&c)
			if ks, ok := fromService(&c); !ok || !ks.foreign {
				t.Errorf("%s: %+v, %v; want foreign", name, ks, ok)
			}
		}
		c := *s
		c.FWMark, c.Address = 7, nil
		if _, ok := fromService(&c); ok {
			t.Error("a firewall-mark service taken for one of the backend's")
		}
	})
	t.Run("destinations", func(t *testing.T) {
		for _, d := range []netip.AddrPort{ep("a"), ep6("b")} {
			for _, tc := range []struct {
				weight int
				flags  uint32
				active bool
			}{{1, ipvs.ConnectionFlagMasq, true}, {0, ipvs.ConnectionFlagMasq, false}, {5, ipvs.ConnectionFlagMasq, false},
				{1, ipvs.ConnectionFlagDirectRoute, false}} {
				dst := toDestination(d, tc.weight)
				dst.ConnectionFlags = tc.flags
				dst.Address = dst.Address.To16()
				got, active, ok := fromDestination(dst)
				if !ok || got != d || active != tc.active {
					t.Errorf("%v weight %d flags %#x: %v active %v ok %v", d, tc.weight, tc.flags, got, active, ok)
				}
			}
		}
	})
}

// TestMasqContent: the sets' elements follow the virtual services: one per service that masquerades (by kind and
// family), one per endpoint address while any service has it.
func TestMasqContent(t *testing.T) {
	c := newMasqContent()
	elems := func(es []masqElem) []string {
		var out []string
		for _, e := range es {
			out = append(out, setNames[e.set]+" "+elementString([]byte(e.key)))
		}
		slices.Sort(out) // change's order follows a map's
		return out
	}
	step := func(name string, old proxy.VirtualService, had bool, vs proxy.VirtualService, has bool, add, del []string) {
		t.Helper()
		a, d := c.change(old, had, vs, has)
		if diff := cmp.Diff(add, elems(a)); diff != "" {
			t.Errorf("%s: added (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(del, elems(d)); diff != "" {
			t.Errorf("%s: deleted (-want +got):\n%s", name, diff)
		}
	}
	step("a cluster IP", proxy.VirtualService{}, false, web, true,
		[]string{"cluster4 10.96.0.10 tcp 80", "hairpin4 10.244.1.2", "hairpin4 10.244.2.2"}, nil)
	step("a node port sharing the endpoints", proxy.VirtualService{}, false, webNode, true, []string{"external4 192.0.2.1 tcp 30080"}, nil)
	step("keeping the source", proxy.VirtualService{}, false, localNode, true, nil, nil)
	step("IPv6", proxy.VirtualService{}, false, webV6, true,
		[]string{"cluster6 fd00:96::10 tcp 80", "hairpin6 fd00:244:1::2", "hairpin6 fd00:244:2::2"}, nil)
	step("the cluster IP removed: its endpoints stay (the node port has them)", web, true, proxy.VirtualService{}, false,
		nil, []string{"cluster4 10.96.0.10 tcp 80"})
	keep := webNode
	keep.KeepSource, keep.Destinations = true, []netip.AddrPort{ep("b")}
	step("the node port keeps the source now, with one endpoint", webNode, true, keep, true, nil,
		[]string{"external4 192.0.2.1 tcp 30080"}) // 10.244.1.2 stays: localNode has it
	step("localNode removed: 10.244.1.2 goes", localNode, true, proxy.VirtualService{}, false, nil, []string{"hairpin4 10.244.1.2"})
	if len(c.hairpin) != 3 || c.hairpin[podIPs["b"]] != 1 || c.hairpin[podIPs["a"]] != 0 {
		t.Errorf("hairpin counts: %v", c.hairpin)
	}
}

// TestAvailable: Available agrees with the kernel (ip_vs in /sys/module after it tried to load it), and New refuses a
// kernel without IPVS instead of programming nothing.
func TestAvailable(t *testing.T) {
	err := Available(0)
	_, statErr := os.Stat("/sys/module/ip_vs")
	if (err == nil) != (statErr == nil) {
		t.Fatalf("Available: %v, but /sys/module/ip_vs: %v", err, statErr)
	}
	if err != nil {
		if !errors.Is(err, ErrNoIPVS) {
			t.Fatalf("Available: %v, want ErrNoIPVS", err)
		}
		if _, err := New(Config{}); !errors.Is(err, ErrNoIPVS) {
			t.Fatalf("New on a kernel without IPVS: %v, want ErrNoIPVS", err)
		}
	}
	if _, err := New(Config{Scheduler: "fastest"}); err == nil {
		t.Fatal("New with an unknown scheduler succeeded")
	}
}
