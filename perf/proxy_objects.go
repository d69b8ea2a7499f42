package perf

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The synthetic cluster's addresses: Service i has cluster IP 10.96.0.0 + firstServiceIP + i; its endpoints
// are numbered over 10.244.16.0/20 (5,000 addresses, shared round robin by the Services, as the nft package's
// benchmark does). The connection scenario's real pods are on 10.244.0.0/24 and 10.244.1.0/24.
const (
	firstServiceIP = 16
	fakeEndpoints  = 5000
	servicePort    = 80
	endpointPort   = 8080
	proxyNamespace = 100 // Services spread over this many namespaces
)

var (
	serviceBase = netip.MustParseAddr("10.96.0.0")
	proxyPodNet = netip.MustParsePrefix("10.244.0.0/16")
	proxyNode   = proxy.Node{Name: "perf-node"}
)

// proxyObjects is a synthetic cluster's Services and EndpointSlices, as the agent's informers hold them.
type proxyObjects struct {
	services []*corev1.Service
	slices   []*discoveryv1.EndpointSlice
}

// build is the desired state of the node, proxy.Build of every object.
func (o proxyObjects) build() proxy.State { return proxy.Build(o.services, o.slices, proxyNode) }

// track is the agent's proxy.Tracker fed every object, as its informers' first lists feed it.
func (o proxyObjects) track() *proxy.Tracker {
	tr := proxy.NewTracker(func() proxy.Node { return proxyNode }, nil)
	h := tr.Handler()
	for _, svc := range o.services {
		h.OnAdd(svc, true)
	}
	for _, es := range o.slices {
		h.OnAdd(es, true)
	}
	return tr
}

// makeProxyObjects makes n Services with one TCP port (80 → 8080) and one EndpointSlice of endpoints ready
// endpoints each, numbered from first; every headlessEvery-th Service is headless (0: none).
func makeProxyObjects(first, n, endpoints, headlessEvery int) proxyObjects {
	var o proxyObjects
	for i := first; i < first+n; i++ {
		headless := headlessEvery > 0 && i%headlessEvery == 0
		svc, es := proxyService(i, endpoints, headless)
		o.services = append(o.services, svc)
		o.slices = append(o.slices, es)
	}
	return o
}

// proxyService is Service i and its EndpointSlice.
func proxyService(i, endpoints int, headless bool) (*corev1.Service, *discoveryv1.EndpointSlice) {
	ns, name := fmt.Sprintf("ns-%02d", i%proxyNamespace), fmt.Sprintf("svc-%06d", i)
	ip := serviceIP(i).String()
	if headless {
		ip = corev1.ClusterIPNone
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: servicePort,
				TargetPort: intstr.FromInt32(endpointPort)}},
		},
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To[int32](endpointPort)}},
	}
	for j := range endpoints {
		es.Endpoints = append(es.Endpoints, proxyEndpoint(fakeEndpoint(i*endpoints+j), j))
	}
	return svc, es
}

func proxyEndpoint(addr netip.Addr, j int) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		NodeName:   ptr.To(fmt.Sprintf("node-%d", j%3)),
	}
}

// serviceIP is Service i's cluster IP.
func serviceIP(i int) netip.Addr {
	b := serviceBase.As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n += uint32(firstServiceIP + i)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// fakeEndpoint is the p-th fake endpoint address (p modulo fakeEndpoints).
func fakeEndpoint(p int) netip.Addr {
	p %= fakeEndpoints
	return netip.AddrFrom4([4]byte{10, 244, byte(16 + p/250), byte(p%250 + 1)})
}

// replaceEndpoint replaces Service i's EndpointSlice by a copy whose first endpoint has a new address (the k-th
// change), as an informer holds it after the slice's update: a new object, the others untouched. It returns the
// old and the new slice (an informer's update event).
func (o proxyObjects) replaceEndpoint(i, k int) (old, updated *discoveryv1.EndpointSlice) {
	old = o.slices[i]
	es := old.DeepCopy()
	es.Endpoints[0] = proxyEndpoint(netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)}), 0)
	o.slices[i] = es
	return old, es
}
