package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"
)

var addrCmp = []cmp.Option{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })}

func programmed(st State) Programmed {
	out := Programmed{}
	for k, v := range st {
		out[k] = ProgrammedService{VirtualService: v}
	}
	return out
}

func ops(changes []Change) []string {
	var out []string
	for _, c := range changes {
		s := string(c.Op) + " " + c.Service.Key.String()
		if c.Dest.IsValid() {
			s += " " + c.Dest.String()
		}
		out = append(out, s)
	}
	return out
}

func TestDiffDrainsBeforeDeleting(t *testing.T) {
	vs := VirtualService{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http",
		Destinations: aps("10.244.0.5:8080", "10.244.0.6:8080")}
	kernel := programmed(State{vs.Key: vs})

	want := vs
	want.Destinations = aps("10.244.0.6:8080", "10.244.0.7:8080")
	first := Diff(kernel, State{vs.Key: want})
	if diff := cmp.Diff([]string{
		"add-destination tcp/10.96.0.10:80 10.244.0.7:8080",
		"drain-destination tcp/10.96.0.10:80 10.244.0.5:8080",
	}, ops(first)); diff != "" {
		t.Fatalf("first sync (-want +got):\n%s", diff)
	}
	kernel = Apply(kernel, first)
	if got := kernel[vs.Key].Drained; !cmp.Equal(got, aps("10.244.0.5:8080"), addrCmp...) {
		t.Fatalf("drained after the first sync: %v", got)
	}
	second := Diff(kernel, State{vs.Key: want})
	if diff := cmp.Diff([]string{"delete-destination tcp/10.96.0.10:80 10.244.0.5:8080"}, ops(second)); diff != "" {
		t.Fatalf("second sync (-want +got):\n%s", diff)
	}
	kernel = Apply(kernel, second)
	if got := Diff(kernel, State{vs.Key: want}); len(got) != 0 {
		t.Fatalf("third sync: %v, want nothing", ops(got))
	}

	// An endpoint drained and then back before its deletion is restored, not added twice.
	back := vs
	kernel = Apply(kernel, Diff(kernel, State{vs.Key: back})) // drains .7, adds .5
	restored := Diff(kernel, State{vs.Key: want})
	if diff := cmp.Diff([]string{
		"restore-destination tcp/10.96.0.10:80 10.244.0.7:8080",
		"drain-destination tcp/10.96.0.10:80 10.244.0.5:8080",
	}, ops(restored)); diff != "" {
		t.Fatalf("restore (-want +got):\n%s", diff)
	}
}

func TestDiffServices(t *testing.T) {
	a := VirtualService{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/a:http", Destinations: aps("10.244.0.5:8080")}
	b := VirtualService{Key: key("10.96.0.11", 80), Kind: ClusterIP, Service: "default/b:http"}
	aAffinity := a
	aAffinity.Affinity = time.Hour
	got := ops(Diff(programmed(State{a.Key: a}), State{aAffinity.Key: aAffinity, b.Key: b}))
	if diff := cmp.Diff([]string{"add-service tcp/10.96.0.11:80", "update-service tcp/10.96.0.10:80"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	got = ops(Diff(programmed(State{a.Key: a, b.Key: b}), State{}))
	if diff := cmp.Diff([]string{"delete-service tcp/10.96.0.10:80", "delete-service tcp/10.96.0.11:80"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// Property: from any kernel state, two syncs reach any desired state exactly (the first drains what the second
// deletes), a third changes nothing, and no sync both adds and deletes the same destination.
func TestDiffConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		genState := func(label string) State {
			st := State{}
			n := rapid.IntRange(0, 4).Draw(t, label+"-services")
			for i := range n {
				k := Key{Addr: netip.AddrFrom4([4]byte{10, 96, 0, byte(rapid.IntRange(1, 5).Draw(t, fmt.Sprint(label, i, "ip")))}),
					Protocol: rapid.SampledFrom([]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}).Draw(t, fmt.Sprint(label, i, "proto")),
					Port:     uint16(rapid.IntRange(80, 82).Draw(t, fmt.Sprint(label, i, "port")))}
				vs := VirtualService{Key: k, Kind: ClusterIP, Service: "ns/svc:p",
					Affinity: time.Duration(rapid.IntRange(0, 1).Draw(t, fmt.Sprint(label, i, "aff"))) * time.Hour}
				for j := range rapid.IntRange(0, 4).Draw(t, fmt.Sprint(label, i, "dests")) {
					d := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 0, byte(rapid.IntRange(1, 6).Draw(t, fmt.Sprint(label, i, j, "d")))}), 8080)
					vs.Destinations = insertSorted(vs.Destinations, d)
				}
				st[k] = vs
			}
			return st
		}
		kernel := programmed(genState("current"))
		// Some destinations of the current kernel are drained already.
		for k, ps := range kernel {
			for _, d := range ps.Destinations {
				if rapid.Bool().Draw(t, "drained "+d.String()) {
					ps.Destinations = slices.DeleteFunc(ps.Destinations, func(x netip.AddrPort) bool { return x == d })
					ps.Drained = insertSorted(ps.Drained, d)
				}
			}
			kernel[k] = ps
		}
		desired := genState("desired")
		for sync := range 2 {
			changes := Diff(kernel, desired)
			touched := map[string]Op{}
			for _, c := range changes {
				id := c.Service.Key.String() + c.Dest.String()
				if prev, ok := touched[id]; ok && c.Dest.IsValid() {
					t.Fatalf("sync %d changes %s twice: %s and %s", sync, id, prev, c.Op)
				}
				touched[id] = c.Op
			}
			kernel = Apply(kernel, changes)
		}
		if rest := Diff(kernel, desired); len(rest) != 0 {
			t.Fatalf("after two syncs: %v", ops(rest))
		}
		for k, want := range desired {
			got := kernel[k]
			if len(got.Drained) != 0 || !got.VirtualService.Equal(want) {
				t.Fatalf("%s: kernel %+v, want %+v", k, got, want)
			}
		}
		if len(kernel) != len(desired) {
			t.Fatalf("kernel has %d services, want %d", len(kernel), len(desired))
		}
	})
}
