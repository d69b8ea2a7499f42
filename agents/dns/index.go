package dns

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ReverseName is the owner of an address, the target of its PTR record: the Service
// <Service>.<Namespace>.svc.<domain> for a cluster IP, <Endpoint>.<Service>.<Namespace>.svc.<domain> for an
// endpoint's address.
type ReverseName struct {
	Endpoint, Service, Namespace string
}

var _ Records = (*Index)(nil)

// Index is the agent's view of the cluster's Services and EndpointSlices, kept for the DNS server: the
// agent feeds it from its informers (Handler, or the Upsert and Delete methods) and the server reads the
// derived records. Every method is safe for concurrent use. A change is visible to the next lookup once
// its method has returned; lookups are map reads, O(1) in the number of Services and endpoints.
//
// Objects passed in are kept, not copied, and never modified: informer objects are shared and read-only.
type Index struct {
	mu sync.RWMutex // guards the maps below; the only lock in this package, never held while calling out

	services   map[key]*corev1.Service
	slices     map[key]map[string]*discoveryv1.EndpointSlice // by Service, then slice name
	sliceOwner map[key]key                                   // slice namespace/name -> its Service
	records    map[key]*Service                              // derived from services and slices
	namespaces map[string]int                                // Services per namespace
	// reverse lists the owners of each cluster IP and endpoint address, cluster IPs first. Its slices
	// are replaced, never modified in place, so Reverse may hand them out.
	reverse map[netip.Addr][]ReverseName
}

type key struct{ namespace, name string }

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		services:   map[key]*corev1.Service{},
		slices:     map[key]map[string]*discoveryv1.EndpointSlice{},
		sliceOwner: map[key]key{},
		records:    map[key]*Service{},
		namespaces: map[string]int{},
		reverse:    map[netip.Addr][]ReverseName{},
	}
}

// UpsertService adds or replaces a Service.
func (x *Index) UpsertService(svc *corev1.Service) {
	k := key{svc.Namespace, svc.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.services[k] = svc
	x.rebuild(k)
}

// DeleteService removes a Service; its EndpointSlices are kept until they are deleted themselves (the
// garbage collector deletes them after the Service) so that a Service created again is whole at once.
func (x *Index) DeleteService(namespace, name string) {
	k := key{namespace, name}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.services, k)
	x.rebuild(k)
}

// UpsertEndpointSlice adds or replaces an EndpointSlice. A slice belongs to the Service its
// kubernetes.io/service-name label names; one without the label is ignored (and forgotten if it had one).
func (x *Index) UpsertEndpointSlice(es *discoveryv1.EndpointSlice) {
	sk := key{es.Namespace, es.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSlice(sk)
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	owner := key{es.Namespace, svc}
	if x.slices[owner] == nil {
		x.slices[owner] = map[string]*discoveryv1.EndpointSlice{}
	}
	x.slices[owner][es.Name] = es
	x.sliceOwner[sk] = owner
	x.rebuild(owner)
}

// DeleteEndpointSlice removes an EndpointSlice.
func (x *Index) DeleteEndpointSlice(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeSlice(key{namespace, name})
}

// removeSlice forgets a slice and rebuilds the Service it belonged to. x.mu is held.
func (x *Index) removeSlice(sk key) {
	owner, ok := x.sliceOwner[sk]
	if !ok {
		return
	}
	delete(x.sliceOwner, sk)
	delete(x.slices[owner], sk.name)
	if len(x.slices[owner]) == 0 {
		delete(x.slices, owner)
	}
	x.rebuild(owner)
}

// rebuild derives the records of the Service k from its object and slices and updates the namespace
// counts and the reverse map. x.mu is held.
func (x *Index) rebuild(k key) {
	old := x.records[k]
	var cur *Service
	if svc, ok := x.services[k]; ok {
		cur = newService(svc, x.slices[k])
		x.records[k] = cur
	} else {
		delete(x.records, k)
	}
	switch {
	case old == nil && cur != nil:
		x.namespaces[k.namespace]++
	case old != nil && cur == nil:
		if x.namespaces[k.namespace]--; x.namespaces[k.namespace] <= 0 {
			delete(x.namespaces, k.namespace)
		}
	}
	x.unindexReverse(old)
	x.indexReverse(cur)
}

func (x *Index) indexReverse(s *Service) {
	if s == nil {
		return
	}
	add := func(a netip.Addr, n ReverseName) {
		names := append(slices.Clone(x.reverse[a]), n)
		slices.SortFunc(names, compareReverse)
		x.reverse[a] = slices.Compact(names)
	}
	for _, a := range s.ClusterIPs {
		add(a, ReverseName{Service: s.Name, Namespace: s.Namespace})
	}
	for _, ep := range s.Endpoints {
		add(ep.Addr, ReverseName{Endpoint: ep.Name, Service: s.Name, Namespace: s.Namespace})
	}
}

func (x *Index) unindexReverse(s *Service) {
	if s == nil {
		return
	}
	drop := func(a netip.Addr) {
		names := slices.DeleteFunc(slices.Clone(x.reverse[a]), func(n ReverseName) bool {
			return n.Service == s.Name && n.Namespace == s.Namespace
		})
		if len(names) == 0 {
			delete(x.reverse, a)
			return
		}
		x.reverse[a] = names
	}
	for _, a := range s.ClusterIPs {
		drop(a)
	}
	for _, ep := range s.Endpoints {
		drop(ep.Addr)
	}
}

// compareReverse orders cluster IP owners (no Endpoint) first, then by namespace, Service and endpoint.
func compareReverse(a, b ReverseName) int {
	return cmp.Or(
		cmp.Compare(isEndpoint(a), isEndpoint(b)),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Service, b.Service),
		strings.Compare(a.Endpoint, b.Endpoint),
	)
}

// Service returns the records of the Service namespace/name.
func (x *Index) Service(namespace, name string) (*Service, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, ok := x.records[key{namespace, name}]
	return s, ok
}

// Namespace reports whether the namespace holds a Service.
func (x *Index) Namespace(namespace string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.namespaces[namespace] > 0
}

// Reverse returns the owners of the address: the Service whose cluster IP it is, else the endpoints that
// have it (a pod behind several Services has one name for each), sorted; nil for an unknown address. The
// caller must not modify the slice.
func (x *Index) Reverse(ip netip.Addr) []ReverseName {
	x.mu.RLock()
	names := x.reverse[ip.Unmap()]
	x.mu.RUnlock()
	if i := slices.IndexFunc(names, func(n ReverseName) bool { return n.Endpoint != "" }); i > 0 {
		return names[:i:i] // cluster IP owners only, as CoreDNS answers
	}
	return names
}

func isEndpoint(n ReverseName) int {
	if n.Endpoint == "" {
		return 0
	}
	return 1
}
