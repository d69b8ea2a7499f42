package proxy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"pgregory.net/rapid"
)

// TestTrackerIsBuild: whatever the events, the tracker's state is Build's of the objects that exist then, with
// Build given the Services in reverse name order (so that, of two claiming one key, the first by name has it, as
// the tracker decides). Services share a few addresses and ports on purpose.
func TestTrackerIsBuild(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodeAddrs := []netip.Addr{netip.MustParseAddr("192.168.1.10")}
		tr := NewTracker(func() Node { return Node{Name: "n1", Addrs: nodeAddrs} }, nil)
		h := tr.Handler()
		services := map[string]*corev1.Service{}
		slicesByName := map[string]*discoveryv1.EndpointSlice{}
		for step := range rapid.IntRange(1, 40).Draw(t, "steps") {
			svc := fmt.Sprintf("s%d", rapid.IntRange(0, 3).Draw(t, "service"))
			switch op := rapid.SampledFrom([]string{"service", "service", "slice", "slice", "delete-service", "delete-slice", "node"}).Draw(t, "op"); op {
			case "service":
				s := service(svc, func(s *corev1.Service) {
					ip := fmt.Sprintf("10.96.0.%d", rapid.IntRange(1, 3).Draw(t, "ip"))
					s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
					s.Spec.Ports[0].Port = int32(rapid.IntRange(80, 81).Draw(t, "port"))
					if rapid.Bool().Draw(t, "nodeport") {
						s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, int32(rapid.IntRange(30000, 30001).Draw(t, "nodePort"))
					}
					if rapid.Bool().Draw(t, "external") {
						s.Spec.ExternalIPs = []string{"192.0.2.1"}
					}
				})
				if old, ok := services[svc]; ok {
					h.OnUpdate(old, s)
				} else {
					h.OnAdd(s, false)
				}
				services[svc] = s
			case "slice":
				name := fmt.Sprintf("%s-%d", svc, rapid.IntRange(0, 1).Draw(t, "slice"))
				var eps []ep
				for i := range rapid.IntRange(0, 3).Draw(t, "endpoints") {
					addr := fmt.Sprintf("10.244.0.%d", rapid.IntRange(1, 4).Draw(t, fmt.Sprint("addr", i)))
					eps = append(eps, rapid.SampledFrom([]ep{ready(addr, "n1"), ready(addr, "n2"), notReady(addr, "n1"),
						terminatingServing(addr, "n2")}).Draw(t, fmt.Sprint("ep", i)))
				}
				es := slice(svc, name, 8080, eps...)
				if old, ok := slicesByName[name]; ok {
					h.OnUpdate(old, es)
				} else {
					h.OnAdd(es, false)
				}
				slicesByName[name] = es
			case "delete-service":
				if s, ok := services[svc]; ok {
					h.OnDelete(s)
					delete(services, svc)
				}
			case "delete-slice":
				name := fmt.Sprintf("%s-%d", svc, rapid.IntRange(0, 1).Draw(t, "slice"))
				if es, ok := slicesByName[name]; ok {
					h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/" + name, Obj: es})
					delete(slicesByName, name)
				}
			case "node":
				nodeAddrs = []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 1, byte(rapid.IntRange(10, 11).Draw(t, "nodeAddr"))})}
			}
			if !rapid.Bool().Draw(t, fmt.Sprint("check", step)) {
				continue
			}
			var svcs []*corev1.Service
			for _, s := range services {
				svcs = append(svcs, s)
			}
			slices.SortFunc(svcs, func(a, b *corev1.Service) int { return strings.Compare(b.Name, a.Name) })
			var ess []*discoveryv1.EndpointSlice
			for _, name := range slices.Sorted(maps.Keys(slicesByName)) {
				ess = append(ess, slicesByName[name])
			}
			want := Build(svcs, ess, Node{Name: "n1", Addrs: nodeAddrs})
			if diff := cmp.Diff(want, tr.State(), cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{}), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("after step %d the tracker differs from Build (-want +got):\n%s", step, diff)
			}
		}
	})
}

// TestTrackerCallsOnChange: every event that may change the state calls onChange; others (a slice of no
// Service) do not.
func TestTrackerCallsOnChange(t *testing.T) {
	n := 0
	tr := NewTracker(func() Node { return node }, func() { n++ })
	h := tr.Handler()
	h.OnAdd(service("web"), false)
	h.OnAdd(slice("web", "web-1", 8080, ready("10.244.0.2", "n1")), false)
	orphan := slice("web", "orphan", 8080)
	delete(orphan.Labels, discoveryv1.LabelServiceName)
	h.OnAdd(orphan, false)
	if n != 2 {
		t.Errorf("onChange called %d times, want 2 (the orphan slice changes nothing)", n)
	}
	if got := tr.State()[key("10.96.0.10", 80)].Destinations; !slices.Equal(got, aps("10.244.0.2:8080")) {
		t.Errorf("destinations %v", got)
	}
}
