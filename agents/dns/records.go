package dns

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Service is what the server answers about one Service: built by the Index from the Service and its
// EndpointSlices on every change of either, and never modified afterwards, so a query may keep using one
// after the Index has moved on.
type Service struct {
	Namespace, Name string
	// ExternalName is the CNAME target of an ExternalName Service: a lower-case FQDN (trailing dot). Empty
	// for the other types, and for an ExternalName that is an IP address (CoreDNS serves no record then).
	ExternalName string
	// Headless is a Service whose clusterIP is None: its name resolves to its endpoints' addresses.
	Headless bool
	// ClusterIPs are the Service's cluster IPs (spec.clusterIPs, both families for a dual-stack Service).
	ClusterIPs []netip.Addr
	// Ports are the Service's ports: the SRV records of a Service that is not headless.
	Ports []Port
	// Endpoints are the Service's endpoints that are ready (or all of them with publishNotReadyAddresses),
	// one per name and address, sorted by name then address.
	Endpoints []Endpoint

	addrs  []netip.Addr          // the distinct addresses of Endpoints, sorted
	byName map[string][]Endpoint // Endpoints by Name
}

// Endpoint is one address of one endpoint of a Service.
type Endpoint struct {
	// Name is the endpoint's hostname (set for StatefulSet pods behind their governing headless Service),
	// else its address with dashes for dots or colons (10-1-0-5, fd00--5), as CoreDNS names it.
	Name  string
	Addr  netip.Addr
	Ports []Port // the EndpointSlice's ports
}

// Port is a port of a Service or an EndpointSlice.
type Port struct {
	Name     string // empty for the single unnamed port a Service may have
	Protocol string // lower-case: tcp, udp, sctp
	Port     uint16
}

// EndpointsNamed returns the endpoints called name (lower-case); more than one for an endpoint with
// several addresses (dual-stack pods).
func (s *Service) EndpointsNamed(name string) []Endpoint { return s.byName[name] }

// Addrs returns the distinct addresses of the Service's endpoints, sorted; the caller must not modify it.
func (s *Service) Addrs() []netip.Addr { return s.addrs }

// newService builds the records of svc from its EndpointSlices (keyed by slice name).
func newService(svc *corev1.Service, slicesByName map[string]*discoveryv1.EndpointSlice) *Service {
	s := &Service{
		Namespace: svc.Namespace,
		Name:      svc.Name,
		Headless:  svc.Spec.ClusterIP == corev1.ClusterIPNone,
		Ports:     servicePorts(svc.Spec.Ports),
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if _, err := netip.ParseAddr(svc.Spec.ExternalName); err != nil && svc.Spec.ExternalName != "" {
			s.ExternalName = strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, ".")) + "."
		}
		return s
	}
	if !s.Headless {
		s.ClusterIPs = clusterIPs(svc.Spec)
	}
	s.Endpoints = endpoints(slicesByName, svc.Spec.PublishNotReadyAddresses)
	s.byName = make(map[string][]Endpoint, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		s.byName[ep.Name] = append(s.byName[ep.Name], ep)
		s.addrs = append(s.addrs, ep.Addr)
	}
	slices.SortFunc(s.addrs, netip.Addr.Compare)
	s.addrs = slices.Compact(s.addrs)
	return s
}

func clusterIPs(spec corev1.ServiceSpec) []netip.Addr {
	ips := spec.ClusterIPs
	if len(ips) == 0 && spec.ClusterIP != "" {
		ips = []string{spec.ClusterIP}
	}
	var out []netip.Addr
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func servicePorts(ports []corev1.ServicePort) []Port {
	out := make([]Port, 0, len(ports))
	for _, p := range ports {
		out = append(out, Port{Name: p.Name, Protocol: protocol(p.Protocol), Port: uint16(p.Port)})
	}
	return out
}

func slicePorts(ports []discoveryv1.EndpointPort) []Port {
	out := make([]Port, 0, len(ports))
	for _, p := range ports {
		if p.Port == nil {
			continue // "all ports" of a Service without a selector: no SRV record can name it
		}
		port := Port{Port: uint16(*p.Port), Protocol: "tcp"}
		if p.Name != nil {
			port.Name = *p.Name
		}
		if p.Protocol != nil {
			port.Protocol = protocol(*p.Protocol)
		}
		out = append(out, port)
	}
	return out
}

func protocol(p corev1.Protocol) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(string(p))
}

// endpoints flattens the slices' endpoints that are published: ready ones (a nil ready condition means
// ready, as the API documents), or all with publishNotReady. An address listed twice (an endpoint moving
// between slices) appears once, with the union of its ports.
func endpoints(slicesByName map[string]*discoveryv1.EndpointSlice, publishNotReady bool) []Endpoint {
	var out []Endpoint
	type key struct {
		name string
		addr netip.Addr
	}
	seen := map[key]int{} // index in out
	for _, name := range slices.Sorted(maps.Keys(slicesByName)) {
		es := slicesByName[name]
		if es.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports := slicePorts(es.Ports)
		for _, e := range es.Endpoints {
			if !publishNotReady && e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				k := key{endpointName(e.Hostname, addr), addr.Unmap()}
				if i, ok := seen[k]; ok {
					out[i].Ports = unionPorts(out[i].Ports, ports)
					continue
				}
				seen[k] = len(out)
				out = append(out, Endpoint{Name: k.name, Addr: k.addr, Ports: ports})
			}
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), a.Addr.Compare(b.Addr))
	})
	return out
}

func endpointName(hostname *string, addr netip.Addr) string {
	if hostname != nil && *hostname != "" {
		return strings.ToLower(*hostname)
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(addr.Unmap().String())
}

func unionPorts(a, b []Port) []Port {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
