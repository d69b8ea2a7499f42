package controllers

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The service-account controller (upstream's serviceaccounts-controller): every active namespace of every
// cluster has a ServiceAccount named default; a new namespace gets one, a deleted one comes back.

const defaultServiceAccount = "default"

var (
	namespacesGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// RunServiceAccounts runs the controller until ctx ends. Keys are namespaces: (cluster, namespace, "").
func RunServiceAccounts(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "serviceaccounts")
	q := newQueue("serviceaccounts")
	cl := newClients(d.API, serviceAccountUser("service-account-controller"))
	nsCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, namespacesGVR) }
	saCol := func(ctx context.Context) (*watchcache.Collection, error) {
		return d.collection(ctx, serviceAccountsGVR)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, nsCol, func(ev watchcache.Event) {
			if ev.Type != store.Deleted {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Name})
			}
		}, log)
	})
	wg.Go(func() {
		follow(ctx, saCol, func(ev watchcache.Event) {
			if ev.Type == store.Deleted && ev.Object.Name == defaultServiceAccount {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace})
			}
		}, log)
	})
	work(ctx, q, 2, d.clock(), func(ctx context.Context, k Key) error {
		if active, err := d.activeNamespace(ctx, k); err != nil || !active {
			return err // gone or going: nothing to keep
		}
		accounts, err := saCol(ctx)
		if err != nil {
			return err
		}
		if _, ok, _ := accounts.GetIn(k.Cluster, k.Namespace, defaultServiceAccount); ok {
			return nil
		}
		cs, err := cl.For(k.Cluster)
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().ServiceAccounts(k.Namespace).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: defaultServiceAccount}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || terminating(err) {
			return nil // created a moment ago (the cache lags), or the namespace or cluster is going away
		}
		return err
	}, log)
	wg.Wait()
}

// activeNamespace reports whether the namespace of key k is in the cache and not terminating.
func (d Deps) activeNamespace(ctx context.Context, k Key) (bool, error) {
	namespaces, err := d.collection(ctx, namespacesGVR)
	if err != nil {
		return false, err
	}
	e, ok, _ := namespaces.GetIn(k.Cluster, "", k.Namespace)
	if !ok {
		return false, nil
	}
	ns := e.Object.(*corev1.Namespace)
	return ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating, nil
}

// terminating reports the API's refusal to create in a terminating namespace.
func terminating(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "being terminated")
}
