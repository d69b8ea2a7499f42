//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served: default/kubernetes has them, as upstream.

package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// systemNamespaces exist in every cluster.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// EnsureCluster creates the objects every cluster starts with when they are missing: the system namespaces,
// priority classes, Config.ClusterObjects (the built-in RBAC objects) and the kubernetes Service. It is
// idempotent and safe to run from several replicas at once (create-if-absent); existing objects are left as
// they are, so an edited built-in role stays edited.
func (a *API) EnsureCluster(ctx context.Context, cluster string) error {
	var objs []runtime.Object
	for _, ns := range systemNamespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, pc := range resources.SystemPriorityClasses() {
		objs = append(objs, pc)
	}
	if a.cfg.ClusterObjects != nil {
		objs = append(objs, a.cfg.ClusterObjects()...)
	}
	// Concurrent creates share the store's write batches: a hundred objects cost a few commits, not a hundred.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, obj := range objs {
		g.Go(func() error { return a.ensureObject(gctx, cluster, obj) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := a.ensureKubernetesService(ctx, cluster); err != nil {
		return err
	}
	return a.ensureAPIEndpoints(ctx, cluster)
}

// DeleteClusterObjects removes every object of a deleted cluster from the store and drops what this process
// caches of it. Storage must be able to (as *store.Store is).
func (a *API) DeleteClusterObjects(ctx context.Context, cluster string) error {
	d, ok := a.cfg.Storage.(interface {
		DeleteCluster(ctx context.Context, cluster string) error
	})
	if !ok {
		return errors.New("kubeapi: the storage cannot delete a cluster")
	}
	if err := d.DeleteCluster(ctx, cluster); err != nil {
		return fmt.Errorf("kubeapi: delete the objects of cluster %s: %w", cluster, err)
	}
	if a.cache != nil {
		a.cache.DropCluster(cluster)
	}
	return nil
}

// ForgetCluster drops everything this process holds of a deleted cluster (the deletion learnt from any
// replica, docs/design/revocation.md): its long-running requests end, and its watch-cache collections and its
// objects in the cross-cluster ones (the controllers' and the scheduler's) are dropped.
func (a *API) ForgetCluster(cluster string) {
	a.EndCluster(cluster)
	if a.cache != nil {
		a.cache.DropCluster(cluster)
	}
}

// ensureKubernetesService creates default/kubernetes at the first address of the service range: the in-cluster
// name of the API (its endpoints follow the server in the agent issue).
func (a *API) ensureKubernetesService(ctx context.Context, id string) error {
	cl, err := a.cfg.Clusters.Cluster(ctx, id)
	if err != nil {
		return fmt.Errorf("kubeapi: cluster %s: %w", id, err)
	}
	addr, err := APIServiceIP(cl)
	if err != nil {
		return err
	}
	ip := addr.String()
	key := store.Key{Cluster: id, Resource: ipAllocations, Name: ip}
	if _, err := a.cfg.Storage.Create(ctx, key, []byte(`{}`)); err != nil && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("kubeapi: reserve %s: %w", key, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: []corev1.ServicePort{
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443)}}},
	}
	return a.ensureObject(ctx, id, svc)
}

// APIServiceIP is the cluster IP of cl's default/kubernetes Service: the first address of its service range.
func APIServiceIP(cl Cluster) (netip.Addr, error) {
	prefix, err := netip.ParsePrefix(cl.ServiceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kubeapi: cluster %s: service CIDR %q: %w", cl.ID, cl.ServiceCIDR, err)
	}
	return nthAddr(prefix, 1), nil
}

// ensureAPIEndpoints writes default/kubernetes's Endpoints and EndpointSlice, both named kubernetes, as
// kube-apiserver's endpoint reconciler does: Config.APIEndpoint, the address the API is advertised at. They are
// created when missing and corrected when a server started with another address (nothing is written without
// one). In-cluster clients do not go there: each node's proxy sends the Service to the node's own API proxy
// (agents/services.go ignores this slice, docs/design/incluster.md); these objects tell tools where the API
// is, as upstream's do. The Endpoints are marked skip-mirror: the slice is written here, not mirrored.
func (a *API) ensureAPIEndpoints(ctx context.Context, cluster string) error {
	ep := a.cfg.APIEndpoint
	if !ep.IsValid() {
		return nil
	}
	ip, port := ep.Addr().Unmap().String(), int32(ep.Port())
	eps := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip}},
			Ports: []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}}},
	}
	family := discoveryv1.AddressTypeIPv4
	if ep.Addr().Unmap().Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := a.reconcileObject(ctx, cluster, eps, func(stored runtime.Object) bool {
		s := stored.(*corev1.Endpoints)
		if equality.Semantic.DeepEqual(s.Subsets, eps.Subsets) {
			return false
		}
		s.Subsets = eps.Subsets
		return true
	}); err != nil {
		return err
	}
	return a.reconcileObject(ctx, cluster, slice, func(stored runtime.Object) bool {
		s := stored.(*discoveryv1.EndpointSlice)
		if s.AddressType == slice.AddressType && equality.Semantic.DeepEqual(s.Endpoints, slice.Endpoints) &&
			equality.Semantic.DeepEqual(s.Ports, slice.Ports) {
			return false
		}
		s.AddressType, s.Endpoints, s.Ports = slice.AddressType, slice.Endpoints, slice.Ports
		return true
	})
}

// reconcileObject creates obj (a system object) when it is missing; when it exists, fix is given the stored
// object to bring to obj's content and says whether it changed anything, and a change is written (a
// compare-and-swap: a concurrent writer wins, and the next start corrects it again).
func (a *API) reconcileObject(ctx context.Context, cluster string, obj runtime.Object, fix func(stored runtime.Object) bool) error {
	if err := a.ensureObject(ctx, cluster, obj); err != nil {
		return err
	}
	res, key, err := a.systemKey(cluster, obj)
	if err != nil {
		return err
	}
	so, err := a.cfg.Storage.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("kubeapi: read %s: %w", key, err)
	}
	stored, err := decodeStored(res, so)
	if err != nil {
		return fmt.Errorf("kubeapi: decode %s: %w", key, err)
	}
	if !fix(stored) {
		return nil
	}
	if err := validateCreate(res, stored); err != nil {
		return fmt.Errorf("kubeapi: system object %s is invalid: %w", key, err)
	}
	data, err := encodeStored(res, stored)
	if err != nil {
		return err
	}
	if _, err := a.cfg.Storage.Update(ctx, key, data, so.Revision); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("kubeapi: update %s: %w", key, err)
	}
	return nil
}

// systemKey is the resource serving a system object and the object's store key in cluster.
func (a *API) systemKey(cluster string, obj runtime.Object) (*resources.Resource, store.Key, error) {
	gvks, _, err := resources.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, store.Key{}, err
	}
	res, ok := a.resourceForKind(gvks[0])
	if !ok {
		return nil, store.Key{}, fmt.Errorf("kubeapi: no resource serves %v", gvks[0])
	}
	m := mustAccessor(obj)
	return res, store.Key{Cluster: cluster, Resource: res.Storage, Namespace: m.GetNamespace(), Name: m.GetName()}, nil
}

// ensureObject creates obj (a system object) unless it exists.
func (a *API) ensureObject(ctx context.Context, cluster string, obj runtime.Object) error {
	res, key, err := a.systemKey(cluster, obj)
	if err != nil {
		return err
	}
	prepareCreate(res, obj, a.cfg.Now())
	if res.Default != nil {
		res.Default(obj)
	}
	if err := validateCreate(res, obj); err != nil {
		return fmt.Errorf("kubeapi: system object %s is invalid: %w", key, err)
	}
	data, err := encodeStored(res, obj)
	if err != nil {
		return err
	}
	if _, err := a.cfg.Storage.Create(ctx, key, data); err != nil && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("kubeapi: create %s: %w", key, err)
	}
	return nil
}

func (a *API) resourceForKind(gvk schema.GroupVersionKind) (*resources.Resource, bool) {
	for _, r := range a.cfg.Registry.All() {
		if r.GVK == gvk {
			return r, true
		}
	}
	return nil, false
}
