package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

type svcOpt func(*corev1.Service)

func service(name string, opts ...svcOpt) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	for _, o := range opts {
		o(s)
	}
	return s
}

type ep struct {
	addr, node                  string
	ready, serving, terminating *bool
}

func slice(svc, name string, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	for _, e := range eps {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.addr}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return es
}

func ready(addr, node string) ep { return ep{addr: addr, node: node, ready: ptr.To(true)} }
func notReady(addr, node string) ep {
	return ep{addr: addr, node: node, ready: ptr.To(false), serving: ptr.To(false)}
}
func terminatingServing(addr, node string) ep {
	return ep{addr: addr, node: node, ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)}
}

func aps(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, x := range s {
		out = append(out, netip.MustParseAddrPort(x))
	}
	return out
}

func key(addr string, port uint16) Key {
	return Key{Addr: netip.MustParseAddr(addr), Protocol: corev1.ProtocolTCP, Port: port}
}

var node = Node{Name: "n1", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}}

func TestBuild(t *testing.T) {
	web := []*discoveryv1.EndpointSlice{slice("web", "web-a", 8080, ready("10.244.0.5", "n1"), ready("10.244.1.7", "n2"),
		notReady("10.244.1.8", "n2"))}
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   []VirtualService
	}{
		{"cluster IP to the ready endpoints", service("web"), web, []VirtualService{
			{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080")}}},
		{"no endpoints: the address exists and refuses", service("web"), nil, []VirtualService{
			{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http"}}},
		{"terminating serving endpoints while none is ready", service("web"),
			[]*discoveryv1.EndpointSlice{slice("web", "a", 8080, terminatingServing("10.244.0.5", "n1"), notReady("10.244.0.6", "n1"))},
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080")}}},
		{"terminating endpoints are dropped once one is ready", service("web"),
			[]*discoveryv1.EndpointSlice{slice("web", "a", 8080, terminatingServing("10.244.0.5", "n1"), ready("10.244.0.6", "n1"))},
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.6:8080")}}},
		{"the same endpoint in two slices once", service("web"),
			[]*discoveryv1.EndpointSlice{slice("web", "a", 8080, ready("10.244.0.5", "n1")), slice("web", "b", 8080, ready("10.244.0.5", "n1"))},
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080")}}},
		{"another Service's slices are not used", service("web"),
			[]*discoveryv1.EndpointSlice{slice("db", "db-a", 5432, ready("10.244.0.9", "n1"))},
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http"}}},
		{"headless: nothing", service("web", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }), web, nil},
		{"ExternalName: nothing", service("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }), web, nil},
		{"internalTrafficPolicy Local: this node's endpoints only",
			service("web", func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}), web,
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080")}}},
		{"session affinity with its timeout",
			service("web", func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			}), web,
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http",
				Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080"), Affinity: time.Minute}}},
		{"session affinity's default timeout",
			service("web", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }), nil,
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Affinity: DefaultAffinityTimeout}}},
		{"NodePort on the node's addresses and external IPs",
			service("web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.ExternalIPs = []string{"203.0.113.7"}
			}), web,
			[]VirtualService{
				{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080")},
				{Key: key("192.168.1.10", 30080), Kind: NodePort, Service: "default/web:http", Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080")},
				{Key: key("203.0.113.7", 80), Kind: ExternalIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080")},
			}},
		{"externalTrafficPolicy Local: node port and external IPs keep the source and serve locally only",
			service("web", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.ExternalIPs = []string{"203.0.113.7"}
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}), web,
			[]VirtualService{
				{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080", "10.244.1.7:8080")},
				{Key: key("192.168.1.10", 30080), Kind: NodePort, Service: "default/web:http", Destinations: aps("10.244.0.5:8080"), KeepSource: true},
				{Key: key("203.0.113.7", 80), Kind: ExternalIP, Service: "default/web:http", Destinations: aps("10.244.0.5:8080"), KeepSource: true},
			}},
		{"a port the slices do not carry has no destinations",
			service("web", func(s *corev1.Service) { s.Spec.Ports[0].Name = "https" }), web,
			[]VirtualService{{Key: key("10.96.0.10", 80), Kind: ClusterIP, Service: "default/web:https"}}},
		{"UDP is its own virtual service",
			service("dns", func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
			}), nil,
			[]VirtualService{{Key: Key{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: corev1.ProtocolUDP, Port: 53}, Kind: ClusterIP,
				Service: "default/dns:dns"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Build([]*corev1.Service{tc.svc}, tc.slices, node).Sorted()
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildDualStack(t *testing.T) {
	svc := service("web", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"} })
	v6 := slice("web", "web-v6", 8080, ready("fd00:244::5", "n1"))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	st := Build([]*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice("web", "web-v4", 8080, ready("10.244.0.5", "n1")), v6}, node)
	if got := st[key("10.96.0.10", 80)].Destinations; !cmp.Equal(got, aps("10.244.0.5:8080"), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })) {
		t.Errorf("IPv4 cluster IP's destinations: %v", got)
	}
	if got := st[key("fd00::10", 80)].Destinations; !cmp.Equal(got, aps("[fd00:244::5]:8080"), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })) {
		t.Errorf("IPv6 cluster IP's destinations: %v", got)
	}
}
