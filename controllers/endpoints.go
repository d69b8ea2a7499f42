package controllers

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served, and read by older clients.

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The Endpoints controller (upstream's endpoint-controller): the legacy v1 Endpoints of every Service with a
// selector (and not of type ExternalName), named like the Service: the selected pods' addresses, ready ones in
// addresses and the others in notReadyAddresses (all in addresses when the Service publishes not-ready
// addresses), grouped in subsets by the ports they resolve to. Terminating pods are left out unless the
// Service publishes not-ready addresses. At most epMaxAddresses addresses are kept (ready ones first), marked
// with the over-capacity annotation, as upstream. The object carries the Service's labels and
// endpoints.kubernetes.io/managed-by=endpoint-controller; it is deleted with the Service, and (unlike upstream,
// to match the EndpointSlice controller) when the Service loses its selector while the object is still the
// controller's. The Endpoints of a Service without a selector are otherwise left to their users.

const (
	// epMaxAddresses is upstream's maxCapacity of an Endpoints object.
	epMaxAddresses = 1000
	// epEndpointsManagedBy and epEndpointsManager mark the Endpoints this controller writes.
	epEndpointsManagedBy = "endpoints.kubernetes.io/managed-by"
	epEndpointsManager   = "endpoint-controller"
)

var epEndpointsGVR = schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}

type epEndpointsController struct {
	cl                        *clients
	services, pods, endpoints epCollectionFunc
	d                         Deps
}

// RunEndpoints runs the controller until ctx ends. Keys are Services (and their Endpoints, of the same name).
func RunEndpoints(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "endpoints")
	q := newQueue("endpoints")
	c := &epEndpointsController{d: d, cl: newClients(d.API, serviceAccountUser("endpoint-controller")),
		services: epCollection(d, epServicesGVR), pods: epCollection(d, podsGVR), endpoints: epCollection(d, epEndpointsGVR)}
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, c.services, func(ev watchcache.Event) {
			q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ev.Object.Name})
		}, log)
	})
	wg.Go(func() { follow(ctx, c.pods, epPodHandler(ctx, c.services, q.Add), log) })
	// A deleted Endpoints comes back; one of ours whose Service is gone (seen at start, or created just as the
	// Service went) is deleted.
	wg.Go(func() {
		follow(ctx, c.endpoints, func(ev watchcache.Event) {
			ep := ev.Object.Object.(*corev1.Endpoints)
			if ev.Type == store.Deleted || ev.Type == store.Added && ep.Labels[epEndpointsManagedBy] == epEndpointsManager {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ev.Object.Name})
			}
		}, log)
	})
	work(ctx, q, 4, d.clock(), c.reconcile, log)
	wg.Wait()
}

func (c *epEndpointsController) reconcile(ctx context.Context, k Key) error {
	col, err := c.endpoints(ctx)
	if err != nil {
		return err
	}
	var cur *corev1.Endpoints
	if e, ok, _ := col.GetIn(k.Cluster, k.Namespace, k.Name); ok {
		cur = e.Object.(*corev1.Endpoints)
	}
	svc, ok, err := epService(ctx, c.services, k)
	switch {
	case err != nil:
		return err
	case !ok && cur != nil: // the Service is gone: so is its Endpoints
		return c.delete(ctx, col, k, cur)
	case !ok:
		return nil
	case !epSelects(svc):
		if cur != nil && cur.Labels[epEndpointsManagedBy] == epEndpointsManager {
			return c.delete(ctx, col, k, cur)
		}
		return nil // users manage the Endpoints of a Service without a selector
	}
	pods, err := epSelectedPods(ctx, c.pods, k.Cluster, svc)
	if err != nil {
		return err
	}
	next := epDesiredLegacy(svc, pods, cur)
	if next == nil {
		return nil
	}
	err = c.write(ctx, col, k, next, cur == nil)
	if err != nil && ctx.Err() == nil {
		reason := "FailedToUpdateEndpoint"
		if cur == nil {
			reason = "FailedToCreateEndpoint"
		}
		c.d.recorder(k.Cluster, "endpoint-controller").Eventf(svc, corev1.EventTypeWarning, reason,
			"Failed to update endpoint %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return err
}

func (c *epEndpointsController) write(ctx context.Context, col *watchcache.Collection, k Key, next *corev1.Endpoints, create bool) error {
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return err
	}
	var out *corev1.Endpoints
	if create {
		out, err = cs.CoreV1().Endpoints(k.Namespace).Create(ctx, next, metav1.CreateOptions{})
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
	} else {
		out, err = cs.CoreV1().Endpoints(k.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write the Endpoints of service %s: %w", k, err)
	}
	return col.WaitFor(ctx, revOf(out.ResourceVersion)) // the next reconcile compares with this write
}

func (c *epEndpointsController) delete(ctx context.Context, col *watchcache.Collection, k Key, cur *corev1.Endpoints) error {
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return err
	}
	err = cs.CoreV1().Endpoints(k.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the Endpoints of service %s: %w", k, err)
	}
	return col.Fresh(ctx)
}

// epDesiredLegacy is the Endpoints a Service should have given its selected pods and the current object (nil:
// none), or nil when cur already is that.
func epDesiredLegacy(svc *corev1.Service, pods []*corev1.Pod, cur *corev1.Endpoints) *corev1.Endpoints {
	subsets := epSubsets(svc, pods)
	truncated := epTruncate(subsets, epMaxAddresses)
	next := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace}}
	if cur != nil {
		next = cur.DeepCopy()
	}
	next.Subsets, next.Labels = subsets, epEndpointsLabels(svc)
	if truncated {
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[corev1.EndpointsOverCapacity] = "truncated"
	} else {
		delete(next.Annotations, corev1.EndpointsOverCapacity)
	}
	if cur != nil && apiequality.Semantic.DeepEqual(cur.Subsets, next.Subsets) && maps.Equal(cur.Labels, next.Labels) &&
		maps.Equal(cur.Annotations, next.Annotations) {
		return nil
	}
	return next
}

func epEndpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	if epServiceIPSet(svc) {
		delete(out, corev1.IsHeadlessService)
	} else {
		out[corev1.IsHeadlessService] = ""
	}
	out[epEndpointsManagedBy] = epEndpointsManager
	return out
}

// epSubsets is a Service's subsets: one per set of resolved ports, each with its ready and not-ready
// addresses, all sorted (subsets by ports, addresses by IP and pod UID). A pod that resolves none of the
// Service's ports is left out; a headless Service without ports has one subset without ports.
func epSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	by := map[string]*corev1.EndpointSubset{}
	for _, pod := range pods {
		ips := epPodIPv4s(pod)
		if !epPodServes(pod, svc.Spec.PublishNotReadyAddresses) || len(ips) == 0 {
			continue
		}
		if len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			continue
		}
		ports := epLegacyPorts(svc, pod)
		if len(ports) == 0 && len(svc.Spec.Ports) > 0 {
			continue
		}
		addr := corev1.EndpointAddress{IP: ips[0],
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pod.Spec.NodeName != "" {
			addr.NodeName = new(pod.Spec.NodeName)
		}
		if epSetsHostname(pod, svc) {
			addr.Hostname = pod.Spec.Hostname
		}
		key := epLegacyPortsKey(ports)
		ss := by[key]
		if ss == nil {
			ss = &corev1.EndpointSubset{Ports: ports}
			by[key] = ss
		}
		if svc.Spec.PublishNotReadyAddresses || podReady(pod) {
			ss.Addresses = append(ss.Addresses, addr)
		} else {
			ss.NotReadyAddresses = append(ss.NotReadyAddresses, addr)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(by))
	for _, key := range slices.Sorted(maps.Keys(by)) {
		ss := by[key]
		slices.SortFunc(ss.Addresses, epCompareAddresses)
		slices.SortFunc(ss.NotReadyAddresses, epCompareAddresses)
		out = append(out, *ss)
	}
	return out
}

// epLegacyPorts is the Service's ports as a pod serves them, sorted by name, port and protocol.
func epLegacyPorts(svc *corev1.Service, pod *corev1.Pod) []corev1.EndpointPort {
	var ports []corev1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if n, ok := epFindPort(pod, sp); ok {
			ports = append(ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: epProtocol(sp.Protocol),
				AppProtocol: sp.AppProtocol})
		}
	}
	slices.SortFunc(ports, func(a, b corev1.EndpointPort) int {
		return epCompare([]string{a.Name, fmt.Sprintf("%05d", a.Port), string(a.Protocol)},
			[]string{b.Name, fmt.Sprintf("%05d", b.Port), string(b.Protocol)})
	})
	return ports
}

func epLegacyPortsKey(ports []corev1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%s/%05d/%s;", p.Name, p.Protocol, p.Port, epDeref(p.AppProtocol))
	}
	return b.String()
}

func epCompareAddresses(a, b corev1.EndpointAddress) int {
	var ua, ub string
	if a.TargetRef != nil {
		ua = string(a.TargetRef.UID)
	}
	if b.TargetRef != nil {
		ub = string(b.TargetRef.UID)
	}
	return epCompare([]string{a.IP, ua}, []string{b.IP, ub})
}

// epTruncate keeps at most capacity addresses over the subsets, as upstream: ready addresses first; the kind
// being cut is shared out in proportion to each subset's count (rounded up, the last subsets getting what is
// left), and when the ready ones alone are too many, every not-ready address goes. It reports whether it cut.
func epTruncate(subsets []corev1.EndpointSubset, capacity int) bool {
	ready, notReady := 0, 0
	for _, ss := range subsets {
		ready += len(ss.Addresses)
		notReady += len(ss.NotReadyAddresses)
	}
	if ready+notReady <= capacity {
		return false
	}
	cutReady := ready > capacity
	budget, total := capacity-ready, notReady
	if cutReady {
		budget, total = capacity, ready
	}
	left := budget
	for i := range subsets {
		ss := &subsets[i]
		list := &ss.NotReadyAddresses
		if cutReady {
			list = &ss.Addresses
			ss.NotReadyAddresses = nil
		}
		share := min((len(*list)*budget+total-1)/total, left, len(*list))
		*list = (*list)[:share]
		left -= share
	}
	return true
}

// Shared by the EndpointSlice and Endpoints controllers.

// epPodHandler enqueues, for a pod event, the Services of the pod's cluster and namespace whose selector
// matches the pod's labels before or after the event. Updates that cannot change an endpoint are ignored.
func epPodHandler(ctx context.Context, services epCollectionFunc, enqueue func(Key)) func(watchcache.Event) {
	return func(ev watchcache.Event) {
		pod := ev.Object.Object.(*corev1.Pod)
		var old *corev1.Pod
		if ev.Prev != nil {
			old = ev.Prev.Object.(*corev1.Pod)
		}
		if ev.Type == store.Modified && old != nil && !epPodChanged(old, pod) {
			return
		}
		col, err := services(ctx)
		if err != nil {
			return
		}
		entries, _ := col.ListIn(ev.Object.Cluster, pod.Namespace)
		for _, e := range entries {
			svc := e.Object.(*corev1.Service)
			if len(svc.Spec.Selector) == 0 {
				continue
			}
			sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
			if sel.Matches(labels.Set(pod.Labels)) || old != nil && sel.Matches(labels.Set(old.Labels)) {
				enqueue(Key{Cluster: e.Cluster, Namespace: e.Namespace, Name: e.Name})
			}
		}
	}
}

// epPodChanged tells whether a pod update can change its endpoints.
func epPodChanged(old, cur *corev1.Pod) bool {
	return !maps.Equal(old.Labels, cur.Labels) || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		podReady(old) != podReady(cur) || old.Status.Phase != cur.Status.Phase || old.Status.PodIP != cur.Status.PodIP ||
		!slices.Equal(old.Status.PodIPs, cur.Status.PodIPs) || old.Spec.NodeName != cur.Spec.NodeName ||
		old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain
}

func epService(ctx context.Context, services epCollectionFunc, k Key) (*corev1.Service, bool, error) {
	col, err := services(ctx)
	if err != nil {
		return nil, false, err
	}
	e, ok, _ := col.GetIn(k.Cluster, k.Namespace, k.Name)
	if !ok {
		return nil, false, nil
	}
	return e.Object.(*corev1.Service), true, nil
}

// epSelects tells whether a Service gets its endpoints from pods.
func epSelects(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && len(svc.Spec.Selector) > 0
}

// epSelectedPods lists the pods of a Service's cluster and namespace that its selector matches.
func epSelectedPods(ctx context.Context, pods epCollectionFunc, cluster string, svc *corev1.Service) ([]*corev1.Pod, error) {
	col, err := pods(ctx)
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
	entries, _ := col.ListIn(cluster, svc.Namespace)
	var out []*corev1.Pod
	for _, e := range entries {
		if pod := e.Object.(*corev1.Pod); sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// epPodServes tells whether a pod may be an endpoint: it has an address and is not finished (succeeded or
// failed); a terminating pod only when includeTerminating.
func epPodServes(pod *corev1.Pod, includeTerminating bool) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || pod.DeletionTimestamp == nil
}

// epPodIPv4s is a pod's IPv4 addresses (status.podIPs, or status.podIP when the list is empty).
func epPodIPv4s(pod *corev1.Pod) []string {
	ips := make([]string, 0, 1)
	if len(pod.Status.PodIPs) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return slices.DeleteFunc(ips, func(s string) bool {
		a, err := netip.ParseAddr(s)
		return err != nil || !a.Is4()
	})
}

// epFindPort resolves a service port's target port on a pod: a number as is, a name by the pod's containers'
// (and restartable init containers') ports of that name and the service port's protocol.
func epFindPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	}
	name, proto := sp.TargetPort.StrVal, epProtocol(sp.Protocol)
	for _, c := range pod.Spec.Containers {
		if n, ok := epNamedPort(&c, name, proto); ok {
			return n, true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if n, ok := epNamedPort(&c, name, proto); ok {
				return n, true
			}
		}
	}
	return 0, false
}

func epNamedPort(c *corev1.Container, name string, proto corev1.Protocol) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name && epProtocol(p.Protocol) == proto {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func epProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// epSetsHostname: a pod's hostname is published when its subdomain names the Service.
func epSetsHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace
}

func epServiceIPSet(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}
