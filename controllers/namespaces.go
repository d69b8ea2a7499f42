package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The namespace controller (upstream's namespace-controller): a namespace being deleted (Terminating) is
// emptied — every namespaced resource deleted with deletecollection — and, once nothing is left, finalized
// (its "kubernetes" finalizer removed through /finalize), which removes it.

// namespaceRecheck is how soon a namespace that still holds objects (pods terminating, finalizers) is looked
// at again.
const namespaceRecheck = 2 * time.Second

// RunNamespaces runs the controller until ctx ends. Keys are namespaces: (cluster, namespace, "").
func RunNamespaces(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "namespaces")
	q := newQueue("namespaces")
	user := serviceAccountUser("namespace-controller")
	typed := newClients(d.API, user)
	var dynMu sync.Mutex
	dyns := map[string]dynamic.Interface{}
	dynFor := func(cluster string) (dynamic.Interface, error) {
		dynMu.Lock()
		defer dynMu.Unlock()
		if c, ok := dyns[cluster]; ok {
			return c, nil
		}
		c, err := dynamic.NewForConfig(d.API.LocalConfig(cluster, user))
		if err == nil {
			dyns[cluster] = c
		}
		return c, err
	}
	nsCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, namespacesGVR) }
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, nsCol, func(ev watchcache.Event) {
			if ns, ok := ev.Object.Object.(*corev1.Namespace); ok && ev.Type != store.Deleted && ns.DeletionTimestamp != nil {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ns.Name})
			}
		}, log)
	})
	work(ctx, q, 2, d.clock(), func(ctx context.Context, k Key) error {
		namespaces, err := nsCol(ctx)
		if err != nil {
			return err
		}
		e, ok, _ := namespaces.GetIn(k.Cluster, "", k.Namespace)
		if !ok || e.Object.(*corev1.Namespace).DeletionTimestamp == nil {
			return nil
		}
		dyn, err := dynFor(k.Cluster)
		if err != nil {
			return err
		}
		left := 0
		for _, res := range d.Registry.All() {
			if !res.Namespaced || res.Virtual || !res.HasVerb("deletecollection") || res.Convert != nil {
				continue // events.k8s.io events are core events: deleted once, as those
			}
			ri := dyn.Resource(res.GroupVersionResource()).Namespace(k.Namespace)
			if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s in %s: %w", res.Plural, k, err)
			}
			l, err := ri.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil {
				left += len(l.Items)
			}
		}
		if left > 0 {
			q.AddAfter(k, namespaceRecheck)
			return nil
		}
		cs, err := typed.For(k.Cluster)
		if err != nil {
			return err
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, k.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var keep []corev1.FinalizerName
		for _, f := range ns.Spec.Finalizers {
			if f != corev1.FinalizerKubernetes {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(ns.Spec.Finalizers) {
			return nil // someone else's finalizer remains: not ours to remove
		}
		ns.Spec.Finalizers = keep
		if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		log.Info("namespace emptied and finalized", "cluster", k.Cluster, "namespace", k.Namespace)
		return nil
	}, log)
	wg.Wait()
}
