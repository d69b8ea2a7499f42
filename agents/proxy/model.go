package proxy

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Kind says how traffic reaches a virtual service.
type Kind string

// The kinds of virtual services.
const (
	ClusterIP  Kind = "ClusterIP"
	NodePort   Kind = "NodePort"
	ExternalIP Kind = "ExternalIP"
)

// DefaultAffinityTimeout is sessionAffinity ClientIP's timeout when the Service gives none (upstream's).
const DefaultAffinityTimeout = 10800 * time.Second

// Key names a virtual service: one address, protocol and port.
type Key struct {
	Addr     netip.Addr
	Protocol corev1.Protocol
	Port     uint16
}

func (k Key) String() string {
	return strings.ToLower(string(k.Protocol)) + "/" + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// Compare orders keys (for stable output).
func (k Key) Compare(o Key) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Protocol, o.Protocol); c != 0 {
		return c
	}
	return cmp.Compare(k.Port, o.Port)
}

// VirtualService is one address, protocol and port that leads to a Service port's endpoints.
type VirtualService struct {
	Key
	Kind Kind
	// Service is the Service port it serves, "namespace/name:port" (for events and logs).
	Service string
	// Destinations are the endpoints, sorted; empty when the Service has none (traffic is rejected).
	Destinations []netip.AddrPort
	// Affinity is the ClientIP session affinity timeout; 0 for none.
	Affinity time.Duration
	// KeepSource: externalTrafficPolicy Local on a node port or external IP — the client's address is kept (no
	// masquerade) and only this node's endpoints serve.
	KeepSource bool
}

// Equal reports whether two virtual services are the same in everything a backend programs.
func (v VirtualService) Equal(o VirtualService) bool {
	return v.Key == o.Key && v.Kind == o.Kind && v.Service == o.Service && v.Affinity == o.Affinity &&
		v.KeepSource == o.KeepSource && slices.Equal(v.Destinations, o.Destinations)
}

// Node is the node a desired state is for.
type Node struct {
	Name string
	// Addrs are the node's addresses that node ports listen on.
	Addrs []netip.Addr
}

// State is a desired (or read back) set of virtual services, by key.
type State map[Key]VirtualService

// Sorted lists the state's virtual services in key order.
func (s State) Sorted() []VirtualService {
	out := make([]VirtualService, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b VirtualService) int { return a.Key.Compare(b.Key) })
	return out
}

// Build is the desired state of node for services and their EndpointSlices (slices may hold other Services'
// slices: they are matched by the kubernetes.io/service-name label).
func Build(services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, node Node) State {
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, es := range endpointSlices {
		name := es.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		bySvc[es.Namespace+"/"+name] = append(bySvc[es.Namespace+"/"+name], es)
	}
	out := State{}
	for _, svc := range services {
		addService(out, svc, bySvc[svc.Namespace+"/"+svc.Name], node)
	}
	return out
}

// addService adds a Service's virtual services to st.
func addService(st State, svc *corev1.Service, ess []*discoveryv1.EndpointSlice, node Node) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	var clusterIPs []netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil {
			clusterIPs = append(clusterIPs, a)
		}
	}
	if len(clusterIPs) == 0 {
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
			clusterIPs = append(clusterIPs, a)
		}
	}
	if len(clusterIPs) == 0 {
		return // headless: DNS answers with the endpoints, nothing to proxy
	}
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = DefaultAffinityTimeout
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	externalLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer)
	for _, sp := range svc.Spec.Ports {
		if sp.Port <= 0 || sp.Port > 65535 {
			continue
		}
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		name := svc.Namespace + "/" + svc.Name + ":" + sp.Name
		all, local := endpoints(ess, sp.Name, proto, node.Name)
		add := func(addr netip.Addr, port int32, kind Kind, dests []netip.AddrPort, keep bool) {
			// A destination of the other family cannot serve this address.
			dests = slicesFilter(dests, func(d netip.AddrPort) bool { return d.Addr().Is4() == addr.Is4() })
			k := Key{Addr: addr, Protocol: proto, Port: uint16(port)}
			st[k] = VirtualService{Key: k, Kind: kind, Service: name, Destinations: dests, Affinity: affinity, KeepSource: keep}
		}
		clusterDests := all
		if internalLocal {
			clusterDests = local
		}
		for _, ip := range clusterIPs {
			add(ip, sp.Port, ClusterIP, clusterDests, false)
		}
		externalDests := all
		if externalLocal {
			externalDests = local
		}
		for _, s := range svc.Spec.ExternalIPs {
			if a, err := netip.ParseAddr(s); err == nil {
				add(a, sp.Port, ExternalIP, externalDests, svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal)
			}
		}
		if sp.NodePort > 0 && sp.NodePort <= 65535 && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) {
			for _, a := range node.Addrs {
				add(a, sp.NodePort, NodePort, externalDests, externalLocal)
			}
		}
	}
}

// endpoints are the destinations of a Service port from its slices: the ready endpoints, or, while none is
// ready, the serving terminating ones (all: every node's; local: this node's only).
func endpoints(ess []*discoveryv1.EndpointSlice, port string, proto corev1.Protocol, node string) (all, local []netip.AddrPort) {
	type cand struct {
		ap             netip.AddrPort
		ready, serving bool
		local          bool
	}
	var cands []cand
	seen := map[netip.AddrPort]bool{}
	for _, es := range ess {
		if es.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var p int32 = -1
		for _, ep := range es.Ports {
			if ep.Port != nil && ptrString(ep.Name) == port && ptrProto(ep.Protocol) == proto {
				p = *ep.Port
			}
		}
		if p <= 0 || p > 65535 {
			continue
		}
		for _, e := range es.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready // unset means ready (upstream)
			serving := e.Conditions.Serving == nil && ready || e.Conditions.Serving != nil && *e.Conditions.Serving
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			if !ready && !(serving && terminating) {
				continue
			}
			for _, s := range e.Addresses {
				a, err := netip.ParseAddr(s)
				if err != nil {
					continue
				}
				ap := netip.AddrPortFrom(a, uint16(p))
				if seen[ap] {
					continue // the same endpoint in two slices (a slice being moved): once
				}
				seen[ap] = true
				cands = append(cands, cand{ap: ap, ready: ready, serving: serving, local: e.NodeName != nil && *e.NodeName == node})
			}
		}
	}
	pick := func(onlyLocal bool) []netip.AddrPort {
		var ready, fallback []netip.AddrPort
		for _, c := range cands {
			if onlyLocal && !c.local {
				continue
			}
			if c.ready {
				ready = append(ready, c.ap)
			} else {
				fallback = append(fallback, c.ap)
			}
		}
		if len(ready) == 0 {
			ready = fallback // terminating but still serving: better than refusing connections
		}
		slices.SortFunc(ready, func(a, b netip.AddrPort) int { return a.Compare(b) })
		return ready
	}
	return pick(false), pick(true)
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptrProto(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return corev1.ProtocolTCP
	}
	return *p
}

func slicesFilter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
