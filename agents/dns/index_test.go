package dns

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
)

// addrs returns the endpoints' names and addresses ("db-0=10.1.0.5") of the Service, or nil if it is
// not in x.
func addrs(x *Index, ns, name string) []string {
	s, ok := x.Service(ns, name)
	if !ok {
		return nil
	}
	var out []string
	for _, ep := range s.Endpoints {
		out = append(out, ep.Name+"="+ep.Addr.String())
	}
	return out
}

// TestHandler drives the Index through its informer event handler, the way the agent does: adds,
// updates, deletes, and a delete seen only as a tombstone.
func TestHandler(t *testing.T) {
	x := NewIndex()
	h := x.Handler()
	pg := []discoveryv1.EndpointPort{slicePort("pg", corev1.ProtocolTCP, 5432)}
	a := endpointSlice("default", "db", "db-a", discoveryv1.AddressTypeIPv4, pg, endpoint("10.1.0.5", nil, "db-0"))
	a2 := endpointSlice("default", "db", "db-a", discoveryv1.AddressTypeIPv4, pg, endpoint("10.1.0.5", nil, "db-0"), endpoint("10.1.0.6", nil, ""))
	svc := headless("default", "db", false)
	steps := []struct {
		name  string
		event func()
		want  []string
	}{
		{"slice before its Service", func() { h.OnAdd(a, true) }, nil},
		{"Service added", func() { h.OnAdd(svc, true) }, []string{"db-0=10.1.0.5"}},
		{"slice updated", func() { h.OnUpdate(a, a2) }, []string{"10-1-0-6=10.1.0.6", "db-0=10.1.0.5"}},
		{"other types ignored", func() { h.OnAdd(&corev1.Pod{}, false); h.OnDelete("junk") }, []string{"10-1-0-6=10.1.0.6", "db-0=10.1.0.5"}},
		{"slice deleted as a tombstone", func() {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/db-a", Obj: a2})
		}, []string{}},
		{"Service deleted", func() { h.OnDelete(svc) }, nil},
	}
	for _, st := range steps {
		st.event()
		got := addrs(x, "default", "db")
		if _, ok := x.Service("default", "db"); ok && got == nil {
			got = []string{}
		}
		equal(t, st.name, got, st.want)
	}
}

// TestSliceRelabeled: a slice whose service-name label changes moves to the other Service; one that
// loses the label leaves.
func TestSliceRelabeled(t *testing.T) {
	x := NewIndex()
	x.UpsertService(headless("default", "a", false))
	x.UpsertService(headless("default", "b", false))
	es := endpointSlice("default", "a", "s", discoveryv1.AddressTypeIPv4, nil, endpoint("10.1.0.5", nil, ""))
	x.UpsertEndpointSlice(es)
	moved := es.DeepCopy()
	moved.Labels[discoveryv1.LabelServiceName] = "b"
	x.UpsertEndpointSlice(moved)
	equal(t, "a after the move", addrs(x, "default", "a"), []string(nil))
	equal(t, "b after the move", addrs(x, "default", "b"), []string{"10-1-0-5=10.1.0.5"})
	unlabeled := moved.DeepCopy()
	unlabeled.Labels = nil
	x.UpsertEndpointSlice(unlabeled)
	equal(t, "b after the label went", addrs(x, "default", "b"), []string(nil))
	equal(t, "reverse after the label went", x.Reverse(netip.MustParseAddr("10.1.0.5")), []ReverseName(nil))
}

// TestReverse: a cluster IP's owner is its Service alone; a pod behind two Services has a name in each.
func TestReverse(t *testing.T) {
	x := NewIndex()
	x.UpsertService(service("default", "web", []string{"10.96.0.10"}))
	x.UpsertService(headless("default", "a", false))
	x.UpsertService(headless("other", "b", false))
	x.UpsertEndpointSlice(endpointSlice("default", "a", "a-1", discoveryv1.AddressTypeIPv4, nil, endpoint("10.1.0.5", nil, "p")))
	x.UpsertEndpointSlice(endpointSlice("other", "b", "b-1", discoveryv1.AddressTypeIPv4, nil, endpoint("10.1.0.5", nil, "")))
	// An endpoint with the address of a cluster IP (not a real cluster, but it shows the precedence).
	x.UpsertEndpointSlice(endpointSlice("default", "a", "a-2", discoveryv1.AddressTypeIPv4, nil, endpoint("10.96.0.10", nil, "")))
	tests := []struct {
		ip   string
		want []ReverseName
	}{
		{"10.96.0.10", []ReverseName{{Service: "web", Namespace: "default"}}},
		{"10.1.0.5", []ReverseName{{Endpoint: "p", Service: "a", Namespace: "default"}, {Endpoint: "10-1-0-5", Service: "b", Namespace: "other"}}},
		{"::ffff:10.1.0.5", []ReverseName{{Endpoint: "p", Service: "a", Namespace: "default"}, {Endpoint: "10-1-0-5", Service: "b", Namespace: "other"}}},
		{"10.1.0.6", nil},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			equal(t, "owners", x.Reverse(netip.MustParseAddr(tt.ip)), tt.want)
		})
	}
}

// TestIndexProperty: whatever the order of upserts and deletes, the Index holds what an Index given only
// the surviving objects holds: its derived records, namespaces and reverse map are functions of the
// current objects, not of their history.
func TestIndexProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		namespaces := []string{"a", "b"}
		names := []string{"s1", "s2", "s3"}
		x := NewIndex()
		services := map[key]*corev1.Service{}
		slices := map[key]*discoveryv1.EndpointSlice{}
		for range rapid.IntRange(0, 40).Draw(t, "ops") {
			ns := rapid.SampledFrom(namespaces).Draw(t, "ns")
			name := rapid.SampledFrom(names).Draw(t, "name")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				svc := drawService(t, ns, name)
				services[key{ns, name}] = svc
				x.UpsertService(svc)
			case 1:
				delete(services, key{ns, name})
				x.DeleteService(ns, name)
			case 2:
				es := drawSlice(t, ns, name, rapid.SampledFrom(names).Draw(t, "owner"))
				slices[key{ns, name}] = es
				x.UpsertEndpointSlice(es)
			case 3:
				delete(slices, key{ns, name})
				x.DeleteEndpointSlice(ns, name)
			}
		}
		y := NewIndex()
		for _, es := range slices {
			y.UpsertEndpointSlice(es)
		}
		for _, svc := range services {
			y.UpsertService(svc)
		}
		opts := cmp.Options{cmp.AllowUnexported(Service{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), equateEmpty}
		equal(t, "records", x.records, y.records, opts)
		equal(t, "namespaces", x.namespaces, y.namespaces)
		equal(t, "reverse", x.reverse, y.reverse, opts)
	})
}

func drawService(t *rapid.T, ns, name string) *corev1.Service {
	ip := fmt.Sprintf("10.96.0.%d", rapid.IntRange(1, 3).Draw(t, "clusterIP"))
	switch rapid.IntRange(0, 2).Draw(t, "type") {
	case 0:
		return service(ns, name, []string{ip}, servicePort("http", corev1.ProtocolTCP, 80))
	case 1:
		return headless(ns, name, rapid.Bool().Draw(t, "publishNotReady"))
	}
	return externalName(ns, name, "example.org")
}

func drawSlice(t *rapid.T, ns, name, owner string) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for i := range rapid.IntRange(0, 3).Draw(t, "endpoints") {
		host := rapid.SampledFrom([]string{"", "p0", "p1"}).Draw(t, "hostname")
		ready := rapid.SampledFrom([]*bool{nil, ptr.To(true), ptr.To(false)}).Draw(t, "ready")
		eps = append(eps, endpoint(fmt.Sprintf("10.1.0.%d", rapid.IntRange(1, 4).Draw(t, fmt.Sprint("addr", i))), ready, host))
	}
	return endpointSlice(ns, owner, name, discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{slicePort("pg", corev1.ProtocolTCP, 5432)}, eps...)
}
