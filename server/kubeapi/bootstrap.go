package kubeapi

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// systemNamespaces exist in every cluster.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// systemPriorityClasses are upstream's two built-in classes.
var systemPriorityClasses = []*schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000,
		Description: "Used for system critical pods that must not be moved from their current node."},
	{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000,
		Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
}

// EnsureCluster creates the objects every cluster starts with when they are missing: the system namespaces and
// priority classes. It is idempotent and safe to run from several replicas at once (create-if-absent).
func (a *API) EnsureCluster(ctx context.Context, cluster string) error {
	var objs []runtime.Object
	for _, ns := range systemNamespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, pc := range systemPriorityClasses {
		objs = append(objs, pc.DeepCopy())
	}
	for _, obj := range objs {
		if err := a.ensureObject(ctx, cluster, obj); err != nil {
			return err
		}
	}
	return nil
}

// ensureObject creates obj (a system object) unless it exists.
func (a *API) ensureObject(ctx context.Context, cluster string, obj runtime.Object) error {
	gvks, _, err := resources.Scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	res, ok := a.resourceForKind(gvks[0])
	if !ok {
		return fmt.Errorf("kubeapi: no resource serves %v", gvks[0])
	}
	prepareCreate(res, obj, a.cfg.Now())
	if res.Default != nil {
		res.Default(obj)
	}
	if err := validateCreate(res, obj); err != nil {
		return fmt.Errorf("kubeapi: system object %v is invalid: %w", gvks[0], err)
	}
	data, err := encodeStored(res, obj)
	if err != nil {
		return err
	}
	m := mustAccessor(obj)
	key := store.Key{Cluster: cluster, Resource: res.Storage, Namespace: m.GetNamespace(), Name: m.GetName()}
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
