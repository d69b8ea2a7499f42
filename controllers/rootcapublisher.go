package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The root CA publisher (upstream's root-ca-cert-publisher): every active namespace of every cluster holds the
// ConfigMap kube-root-ca.crt with the CAs of the cluster's API in ca.crt — the cluster's own, which signs its
// nodes' in-cluster endpoints, and the server's — which the ServiceAccount admission's projected volume hands to
// every pod (client-go's in-cluster configuration reads it). A changed or deleted ConfigMap is put back.

const rootCAConfigMap = "kube-root-ca.crt"

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// RunRootCAPublisher runs the controller until ctx ends. Keys are namespaces: (cluster, namespace, "").
func RunRootCAPublisher(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "root-ca-cert-publisher")
	q := newQueue("root-ca-cert-publisher")
	cl := newClients(d.API, serviceAccountUser("root-ca-cert-publisher"))
	nsCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, namespacesGVR) }
	cmCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, configMapsGVR) }
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, nsCol, func(ev watchcache.Event) {
			if ev.Type != store.Deleted {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Name})
			}
		}, log)
	})
	wg.Go(func() {
		follow(ctx, cmCol, func(ev watchcache.Event) {
			if ev.Object.Name == rootCAConfigMap {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace})
			}
		}, log)
	})
	work(ctx, q, 2, d.clock(), func(ctx context.Context, k Key) error {
		if active, err := d.activeNamespace(ctx, k); err != nil || !active {
			return err
		}
		maps, err := cmCol(ctx)
		if err != nil {
			return err
		}
		bundle, err := d.rootCABundle(ctx, k.Cluster)
		if err != nil {
			return err
		}
		want := map[string]string{"ca.crt": bundle}
		cs, err := cl.For(k.Cluster)
		if err != nil {
			return err
		}
		if e, ok, _ := maps.GetIn(k.Cluster, k.Namespace, rootCAConfigMap); ok {
			cm := e.Object.(*corev1.ConfigMap)
			if len(cm.Data) == 1 && cm.Data["ca.crt"] == want["ca.crt"] && len(cm.BinaryData) == 0 {
				return nil
			}
			cm = cm.DeepCopy()
			cm.Data, cm.BinaryData = want, nil
			// Changed or deleted meanwhile (or the whole cluster deleted): the error retries the key with the
			// queue's back-off, never at once, so a key the cache is late about cannot spin.
			_, err = cs.CoreV1().ConfigMaps(k.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
		_, err = cs.CoreV1().ConfigMaps(k.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: rootCAConfigMap, Annotations: map[string]string{
				"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
			Data: want}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || terminating(err) {
			return nil
		}
		return err
	}, log)
	wg.Wait()
}
