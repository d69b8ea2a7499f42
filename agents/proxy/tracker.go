package proxy

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Tracker keeps the desired state up to date from informer events, rebuilding only the Services that changed (or
// whose EndpointSlices did) — Build of 10,000 Services costs ~100 ms, more than the kernel's part of a change. It
// is kube-proxy's ServiceChangeTracker and EndpointsChangeTracker in one. Its methods are safe for concurrent use.
//
// When several Services claim one virtual service (two Services with the same external IP and port), the one
// whose namespace/name sorts first has it, whatever the order of events.
type Tracker struct {
	node     func() Node
	onChange func()

	mu       sync.Mutex
	services map[string]*corev1.Service                       // by namespace/name
	slices   map[string]map[string]*discoveryv1.EndpointSlice // by Service namespace/name, then slice name
	dirty    map[string]bool                                  // Services to rebuild
	owned    map[string][]Key                                 // the keys each Service claims
	claims   map[Key]map[string]VirtualService                // every claim on a key, by Service
	state    State                                            // the winning claim of each key
	lastNode Node
	built    bool // state was built once (with lastNode)
}

// NewTracker returns a tracker for node (called at every State, so that a change of the node's addresses moves
// its node ports); onChange (may be nil) is called after every event that may change the state.
func NewTracker(node func() Node, onChange func()) *Tracker {
	if onChange == nil {
		onChange = func() {}
	}
	return &Tracker{node: node, onChange: onChange, services: map[string]*corev1.Service{},
		slices: map[string]map[string]*discoveryv1.EndpointSlice{}, dirty: map[string]bool{}, owned: map[string][]Key{},
		claims: map[Key]map[string]VirtualService{}, state: State{}}
}

// Handler is the event handler of both the Service and the EndpointSlice informer.
func (t *Tracker) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.upsert(obj) },
		UpdateFunc: func(_, obj any) { t.upsert(obj) },
		DeleteFunc: func(obj any) { t.remove(obj) },
	}
}

func (t *Tracker) upsert(obj any) {
	t.mu.Lock()
	switch o := obj.(type) {
	case *corev1.Service:
		k := o.Namespace + "/" + o.Name
		t.services[k] = o
		t.dirty[k] = true
	case *discoveryv1.EndpointSlice:
		svc := o.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			t.mu.Unlock()
			return
		}
		k := o.Namespace + "/" + svc
		if t.slices[k] == nil {
			t.slices[k] = map[string]*discoveryv1.EndpointSlice{}
		}
		t.slices[k][o.Name] = o
		t.dirty[k] = true
	default:
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.onChange()
}

func (t *Tracker) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t.mu.Lock()
	switch o := obj.(type) {
	case *corev1.Service:
		k := o.Namespace + "/" + o.Name
		delete(t.services, k)
		t.dirty[k] = true
	case *discoveryv1.EndpointSlice:
		k := o.Namespace + "/" + o.Labels[discoveryv1.LabelServiceName]
		delete(t.slices[k], o.Name)
		if len(t.slices[k]) == 0 {
			delete(t.slices, k)
		}
		t.dirty[k] = true
	default:
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.onChange()
}

// State applies the pending changes and returns the desired state. The caller must not change it; it stays valid
// until the next call of State.
func (t *Tracker) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	node := t.node()
	if !t.built || !sameNode(node, t.lastNode) {
		// The node's name or addresses changed (or this is the first build): every Service may differ.
		for k := range t.services {
			t.dirty[k] = true
		}
		for k := range t.owned {
			t.dirty[k] = true
		}
		t.lastNode, t.built = node, true
	}
	for svcKey := range t.dirty {
		t.rebuild(svcKey, node)
	}
	clear(t.dirty)
	return t.state
}

// rebuild replaces the claims of one Service with what it and its slices make now.
func (t *Tracker) rebuild(svcKey string, node Node) {
	touched := map[Key]bool{}
	for _, k := range t.owned[svcKey] {
		delete(t.claims[k], svcKey)
		touched[k] = true
	}
	delete(t.owned, svcKey)
	if svc, ok := t.services[svcKey]; ok {
		part := State{}
		// In name order: of an endpoint in two slices (one being moved), the first one's conditions count.
		ess := slices.SortedFunc(maps.Values(t.slices[svcKey]), func(a, b *discoveryv1.EndpointSlice) int {
			return strings.Compare(a.Name, b.Name)
		})
		addService(part, svc, ess, node)
		for k, vs := range part {
			if t.claims[k] == nil {
				t.claims[k] = map[string]VirtualService{}
			}
			t.claims[k][svcKey] = vs
			t.owned[svcKey] = append(t.owned[svcKey], k)
			touched[k] = true
		}
	}
	for k := range touched {
		if len(t.claims[k]) == 0 {
			delete(t.claims, k)
			delete(t.state, k)
			continue
		}
		owner := slices.MinFunc(slices.Collect(maps.Keys(t.claims[k])), strings.Compare)
		t.state[k] = t.claims[k][owner]
	}
}

func sameNode(a, b Node) bool { return a.Name == b.Name && slices.Equal(a.Addrs, b.Addrs) }
