package controllers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// The EndpointSlice controller (upstream's endpointslice-controller): for every Service with a selector (and
// not of type ExternalName), the pods of its cluster and namespace that the selector matches become endpoints
// in EndpointSlices of address type IPv4, labelled kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by and controlled by the Service, so that the garbage collector removes
// them with it. Pods whose named target ports resolve to different numbers go into different slices; a slice
// holds at most epMaxEndpointsPerSlice endpoints. Existing slices are updated in place where possible, slices
// that would be deleted are reused for ones that would be created, and nothing is written when nothing
// changed. A Service without endpoints keeps one empty placeholder slice, as upstream.
//
// Unlike upstream, a Service that loses its selector (or becomes ExternalName) loses the slices this
// controller made for it (kubernetes#118376): they are recognisable by their managed-by label, and stale ones
// would keep routing traffic to pods the Service no longer selects.

const (
	// epMaxEndpointsPerSlice is upstream's default --max-endpoints-per-slice.
	epMaxEndpointsPerSlice = 100
	// epSliceManager is the managed-by label value of the slices this controller owns.
	epSliceManager = "endpointslice-controller.k8s.io"
)

var (
	epServicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	epSlicesGVR   = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	epNodesGVR    = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	epServiceKind = corev1.SchemeGroupVersion.WithKind("Service")
)

// epCollectionFunc returns a cross-cluster collection (the watch cache's current one).
type epCollectionFunc = func(context.Context) (*watchcache.Collection, error)

func epCollection(d Deps, gvr schema.GroupVersionResource) epCollectionFunc {
	return func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, gvr) }
}

type epSliceController struct {
	cl                            *clients
	services, pods, slices, nodes epCollectionFunc
	d                             Deps
}

// RunEndpointSlices runs the controller until ctx ends. Keys are Services.
func RunEndpointSlices(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "endpointslices")
	q := newQueue("endpointslices")
	c := &epSliceController{d: d, cl: newClients(d.API, serviceAccountUser("endpointslice-controller")),
		services: epCollection(d, epServicesGVR), pods: epCollection(d, podsGVR),
		slices: epCollection(d, epSlicesGVR), nodes: epCollection(d, epNodesGVR)}
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, c.services, func(ev watchcache.Event) {
			q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ev.Object.Name})
		}, log)
	})
	wg.Go(func() { follow(ctx, c.pods, epPodHandler(ctx, c.services, q.Add), log) })
	// A managed slice changed or deleted by someone else is put back.
	wg.Go(func() {
		follow(ctx, c.slices, func(ev watchcache.Event) {
			for _, e := range []*watchcache.Entry{ev.Object, ev.Prev} {
				if e == nil {
					continue
				}
				if l := e.Object.(*discoveryv1.EndpointSlice).Labels; l[discoveryv1.LabelManagedBy] == epSliceManager {
					q.Add(Key{Cluster: e.Cluster, Namespace: e.Namespace, Name: l[discoveryv1.LabelServiceName]})
				}
			}
		}, log)
	})
	work(ctx, q, 4, d.clock(), c.reconcile, log)
	wg.Wait()
}

func (c *epSliceController) reconcile(ctx context.Context, k Key) error {
	svc, ok, err := epService(ctx, c.services, k)
	if err != nil || !ok {
		return err // a deleted Service's slices go with it (the garbage collector)
	}
	sliceCol, err := c.slices(ctx)
	if err != nil {
		return err
	}
	existing := epManagedSlices(sliceCol, k)
	plan := epSlicePlan{deletes: existing}
	var missing []string
	if epSelects(svc) {
		pods, err := epSelectedPods(ctx, c.pods, k.Cluster, svc)
		if err != nil {
			return err
		}
		var groups map[string]*epGroup
		groups, missing = epDesiredEndpoints(svc, pods, c.zones(ctx, k.Cluster))
		plan = epPlanSlices(svc, groups, existing)
	}
	wrote, err := c.apply(ctx, k, svc, plan)
	if wrote {
		// The next reconcile of this Service must see these writes (deletes included): no duplicate slices.
		if ferr := sliceCol.Fresh(ctx); err == nil {
			err = ferr
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			c.d.recorder(k.Cluster, "endpoint-slice-controller").Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
				"Error updating Endpoint Slices for Service %s/%s: %v", svc.Namespace, svc.Name, err)
		}
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("service %s: %d pods (%s first) are on nodes that do not exist; retrying", k, len(missing), missing[0])
	}
	return nil
}

// zones looks up the zone label of a cluster's nodes; ok is false for a node that does not exist. The nodes
// collection is only loaded when a selected pod is bound to a node.
func (c *epSliceController) zones(ctx context.Context, cluster string) func(node string) (zone string, ok bool) {
	var col *watchcache.Collection
	return func(name string) (string, bool) {
		if col == nil {
			var err error
			if col, err = c.nodes(ctx); err != nil {
				return "", true // unknown: include the pod, without a zone
			}
		}
		e, ok, _ := col.GetIn(cluster, "", name)
		if !ok {
			return "", false
		}
		return e.Object.(*corev1.Node).Labels[corev1.LabelTopologyZone], true
	}
}

// apply writes a plan: creates (not while the Service is being deleted, as upstream: the garbage collector
// would race them), updates, deletes. wrote tells whether anything was written, even on error.
func (c *epSliceController) apply(ctx context.Context, k Key, svc *corev1.Service, plan epSlicePlan) (wrote bool, err error) {
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return false, err
	}
	api := cs.DiscoveryV1().EndpointSlices(k.Namespace)
	for _, s := range plan.creates {
		if svc.DeletionTimestamp != nil {
			break
		}
		if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return wrote, nil
			}
			return wrote, fmt.Errorf("create an EndpointSlice of service %s: %w", k, err)
		}
		wrote = true
	}
	for _, s := range plan.updates {
		if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return wrote, fmt.Errorf("update EndpointSlice %s of service %s: %w", s.Name, k, err)
		}
		wrote = true
	}
	for _, s := range plan.deletes {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return wrote, fmt.Errorf("delete EndpointSlice %s of service %s: %w", s.Name, k, err)
		}
		wrote = true
	}
	return wrote, nil
}

// epManagedSlices lists the slices this controller made for a Service (by label: the owner may be an older
// Service of the same name), in name order.
func epManagedSlices(col *watchcache.Collection, k Key) []*discoveryv1.EndpointSlice {
	entries, _ := col.ListIn(k.Cluster, k.Namespace)
	var out []*discoveryv1.EndpointSlice
	for _, e := range entries {
		s := e.Object.(*discoveryv1.EndpointSlice)
		if s.Labels[discoveryv1.LabelServiceName] == k.Name && s.Labels[discoveryv1.LabelManagedBy] == epSliceManager {
			out = append(out, s)
		}
	}
	return out
}

// epGroup is the desired endpoints of the pods whose service ports resolve to the same numbers: they share
// slices.
type epGroup struct {
	ports     []discoveryv1.EndpointPort
	endpoints map[string]discoveryv1.Endpoint // by pod name
}

// epDesiredEndpoints is the endpoints of a Service's selected pods, grouped by resolved ports (keyed by
// epPortsKey). Terminal pods and pods without an IPv4 address are left out; terminating ones are in, as
// terminating endpoints. A pod bound to a node that does not exist is left out (unless the Service publishes
// not-ready addresses) and named in missing, so that the caller retries, as upstream.
func epDesiredEndpoints(svc *corev1.Service, pods []*corev1.Pod, zoneOf func(node string) (string, bool)) (groups map[string]*epGroup, missing []string) {
	groups = map[string]*epGroup{}
	for _, pod := range pods {
		addrs := epPodIPv4s(pod)
		if !epPodServes(pod, true) || len(addrs) == 0 {
			continue
		}
		var zone string
		if pod.Spec.NodeName != "" {
			z, ok := zoneOf(pod.Spec.NodeName)
			if !ok && !svc.Spec.PublishNotReadyAddresses {
				missing = append(missing, pod.Name)
				continue
			}
			zone = z
		}
		ports := epSlicePorts(svc, pod)
		key := epPortsKey(ports)
		g := groups[key]
		if g == nil {
			g = &epGroup{ports: ports, endpoints: map[string]discoveryv1.Endpoint{}}
			groups[key] = g
		}
		g.endpoints[pod.Name] = epEndpoint(svc, pod, addrs, zone)
	}
	return groups, missing
}

// epEndpoint is a pod's endpoint: serving when Ready, ready when serving and not terminating (always, when
// the Service publishes not-ready addresses), terminating once the pod has a deletion timestamp.
func epEndpoint(svc *corev1.Service, pod *corev1.Pod, addrs []string, zone string) discoveryv1.Endpoint {
	serving := podReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || serving && !terminating
	ep := discoveryv1.Endpoint{Addresses: addrs,
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	if pod.Spec.NodeName != "" {
		ep.NodeName = new(pod.Spec.NodeName)
	}
	if zone != "" {
		ep.Zone = &zone
	}
	if epSetsHostname(pod, svc) {
		ep.Hostname = new(pod.Spec.Hostname)
	}
	return ep
}

// epSlicePorts is the Service's ports as a pod serves them, in the Service's order; ports the pod cannot
// resolve (a named target port none of its containers has) are left out, as upstream.
func epSlicePorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := make([]discoveryv1.EndpointPort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, ok := epFindPort(pod, sp)
		if !ok {
			continue
		}
		ports = append(ports, discoveryv1.EndpointPort{Name: new(sp.Name), Protocol: new(epProtocol(sp.Protocol)),
			Port: new(n), AppProtocol: sp.AppProtocol})
	}
	return ports
}

// epPortsKey names a list of slice ports.
func epPortsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(epDeref(p.Name))
		b.WriteByte('/')
		b.WriteString(string(epDeref(p.Protocol)))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(epDeref(p.Port))))
		b.WriteByte('/')
		b.WriteString(epDeref(p.AppProtocol))
		b.WriteByte(';')
	}
	return b.String()
}

// epSlicePlan is what a reconcile writes.
type epSlicePlan struct {
	creates, updates, deletes []*discoveryv1.EndpointSlice
}

// epPlanSlices turns the desired endpoint groups and the existing managed slices into writes: slices of
// another address type or of an older Service of the same name go; each group's slices keep the endpoints
// still desired (updated when they changed), new endpoints fill the slices being updated anyway, then one
// unchanged slice that can take them all, then new slices; slices that would be deleted are reused for new
// ones; with no endpoints at all a placeholder slice stays. Pure: the existing slices are not modified.
func epPlanSlices(svc *corev1.Service, groups map[string]*epGroup, existing []*discoveryv1.EndpointSlice) epSlicePlan {
	labels := epSliceLabels(svc)
	var plan epSlicePlan
	byKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if s.AddressType != discoveryv1.AddressTypeIPv4 || !epOwnedBy(s, svc) {
			plan.deletes = append(plan.deletes, s)
			continue
		}
		key := epPortsKey(s.Ports)
		byKey[key] = append(byKey[key], s)
	}
	kept := 0
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		p, unchanged := epPlanGroup(svc, groups[key], byKey[key], labels)
		plan.creates = append(plan.creates, p.creates...)
		plan.updates = append(plan.updates, p.updates...)
		plan.deletes = append(plan.deletes, p.deletes...)
		kept += unchanged
		delete(byKey, key)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		plan.deletes = append(plan.deletes, byKey[key]...)
	}
	if len(plan.creates) == 0 && len(plan.updates) == 0 && kept == 0 {
		placeholder := epNewSlice(svc, labels, nil, nil)
		if len(plan.deletes) == 1 && epIsPlaceholder(plan.deletes[0], svc, labels) {
			plan.deletes = nil
		} else {
			plan.creates = append(plan.creates, placeholder)
		}
	}
	epReuseDeleted(svc, &plan)
	return plan
}

// epPlanGroup plans the slices of one port group; unchanged counts the existing slices left as they are.
func epPlanGroup(svc *corev1.Service, g *epGroup, existing []*discoveryv1.EndpointSlice, labels map[string]string) (plan epSlicePlan, unchanged int) {
	want := maps.Clone(g.endpoints)
	var touched, same []*discoveryv1.EndpointSlice
	for _, s := range existing {
		changed := !maps.Equal(s.Labels, labels)
		eps := make([]discoveryv1.Endpoint, 0, len(s.Endpoints))
		for _, ep := range s.Endpoints {
			key := epEndpointKey(ep)
			d, ok := want[key]
			if !ok {
				changed = true // no longer selected, or a duplicate
				continue
			}
			delete(want, key)
			changed = changed || !epEndpointEqual(ep, d)
			eps = append(eps, d)
		}
		switch {
		case len(eps) == 0:
			plan.deletes = append(plan.deletes, s)
		case changed:
			u := s.DeepCopy()
			u.Labels, u.Endpoints = maps.Clone(labels), eps
			touched = append(touched, u)
		default:
			same = append(same, s)
		}
	}
	rest := make([]discoveryv1.Endpoint, 0, len(want))
	for _, key := range slices.Sorted(maps.Keys(want)) {
		rest = append(rest, want[key])
	}
	for _, u := range touched {
		n := min(epMaxEndpointsPerSlice-len(u.Endpoints), len(rest))
		if n > 0 {
			u.Endpoints, rest = append(u.Endpoints, rest[:n]...), rest[n:]
		}
	}
	if len(rest) > 0 && len(rest) < epMaxEndpointsPerSlice {
		if i := epFullestFitting(same, len(rest)); i >= 0 {
			u := same[i].DeepCopy()
			u.Endpoints, rest = append(u.Endpoints, rest...), nil
			touched = append(touched, u)
			same = slices.Delete(same, i, i+1)
		}
	}
	for len(rest) > 0 {
		n := min(epMaxEndpointsPerSlice, len(rest))
		plan.creates = append(plan.creates, epNewSlice(svc, labels, g.ports, rest[:n]))
		rest = rest[n:]
	}
	plan.updates = touched
	return plan, len(same)
}

// epFullestFitting is the index of the fullest slice with room for n more endpoints, or -1.
func epFullestFitting(ss []*discoveryv1.EndpointSlice, n int) int {
	best := -1
	for i, s := range ss {
		if len(s.Endpoints)+n <= epMaxEndpointsPerSlice && (best < 0 || len(s.Endpoints) > len(ss[best].Endpoints)) {
			best = i
		}
	}
	return best
}

// epReuseDeleted turns creates into updates of slices that would be deleted (same address type, owned by the
// Service), so that replacing a slice's contents keeps its name.
func epReuseDeleted(svc *corev1.Service, plan *epSlicePlan) {
	for i := 0; i < len(plan.deletes) && len(plan.creates) > 0; {
		old := plan.deletes[i]
		if old.AddressType != discoveryv1.AddressTypeIPv4 || !epOwnedBy(old, svc) {
			i++
			continue
		}
		c := plan.creates[len(plan.creates)-1]
		u := old.DeepCopy()
		u.Labels, u.OwnerReferences, u.Ports, u.Endpoints = c.Labels, c.OwnerReferences, c.Ports, c.Endpoints
		plan.creates = plan.creates[:len(plan.creates)-1]
		plan.updates = append(plan.updates, u)
		plan.deletes = slices.Delete(plan.deletes, i, i+1)
	}
}

func epNewSlice(svc *corev1.Service, labels map[string]string, ports []discoveryv1.EndpointPort, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: maps.Clone(labels),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, epServiceKind)}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: slices.Clone(ports), Endpoints: slices.Clone(eps)}
}

func epIsPlaceholder(s *discoveryv1.EndpointSlice, svc *corev1.Service, labels map[string]string) bool {
	return s.AddressType == discoveryv1.AddressTypeIPv4 && len(s.Endpoints) == 0 && len(s.Ports) == 0 &&
		epOwnedBy(s, svc) && maps.Equal(s.Labels, labels)
}

// epSliceLabels is the labels of a Service's slices: the Service's own, minus the reserved ones, plus the
// service name, the manager and, for a Service without a cluster IP, the headless label.
func epSliceLabels(svc *corev1.Service) map[string]string {
	out := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			out[k] = v
		}
	}
	if !epServiceIPSet(svc) {
		out[corev1.IsHeadlessService] = ""
	}
	out[discoveryv1.LabelServiceName] = svc.Name
	out[discoveryv1.LabelManagedBy] = epSliceManager
	return out
}

func epOwnedBy(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	return slices.ContainsFunc(s.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.UID == svc.UID && r.Kind == "Service" && r.APIVersion == "v1"
	})
}

// epEndpointEqual compares two endpoints field by field (the reflective semantic comparison was most of the
// cost of a reconcile that writes nothing). TestEndpointSliceEndpointEqual notices new fields.
func epEndpointEqual(a, b discoveryv1.Endpoint) bool {
	return slices.Equal(a.Addresses, b.Addresses) && epPtrEqual(a.Conditions.Ready, b.Conditions.Ready) &&
		epPtrEqual(a.Conditions.Serving, b.Conditions.Serving) &&
		epPtrEqual(a.Conditions.Terminating, b.Conditions.Terminating) && epPtrEqual(a.Hostname, b.Hostname) &&
		epPtrEqual(a.TargetRef, b.TargetRef) && maps.Equal(a.DeprecatedTopology, b.DeprecatedTopology) &&
		epPtrEqual(a.NodeName, b.NodeName) && epPtrEqual(a.Zone, b.Zone) &&
		(a.Hints == nil && b.Hints == nil || apiequality.Semantic.DeepEqual(a.Hints, b.Hints))
}

func epPtrEqual[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// epEndpointKey identifies an endpoint by its pod.
func epEndpointKey(ep discoveryv1.Endpoint) string {
	if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
		return ""
	}
	return ep.TargetRef.Name
}

func epDeref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// epCompare orders two slices' worth of strings: used to sort addresses and ports deterministically.
func epCompare(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
