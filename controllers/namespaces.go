package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The namespace controller (upstream's namespace-controller): a namespace being deleted (Terminating) is
// emptied — every namespaced resource deleted with deletecollection — and, once nothing is left, finalized
// (its "kubernetes" finalizer removed through /finalize), which removes it. Pods are deleted first and the rest
// only once no pod is left. The namespace's status conditions say how far it got, as upstream's do: content
// remaining, finalizers remaining, content that could not be deleted.

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
		cs, err := typed.For(k.Cluster)
		if err != nil {
			return err
		}
		var c nsContent
		// Pods go first (upstream's ordered namespace deletion, KEP 5080): what they use — their Secrets,
		// ConfigMaps, ServiceAccounts, PVCs — stays until every pod is gone.
		c.deleteAll(ctx, dyn, corev1.SchemeGroupVersion.WithResource("pods"), k.Namespace)
		if c.remaining == 0 && len(c.errs) == 0 {
			for _, res := range d.Registry.All() {
				if !res.Namespaced || res.Virtual || !res.HasVerb("deletecollection") || res.Convert != nil {
					continue // events.k8s.io events are core events: deleted once, as those
				}
				if gvr := res.GroupVersionResource(); gvr.Group != "" || gvr.Resource != "pods" {
					c.deleteAll(ctx, dyn, gvr, k.Namespace)
				}
			}
		}
		if err := c.report(ctx, cs, k.Namespace); err != nil {
			log.Warn("writing the namespace's deletion conditions failed", "cluster", k.Cluster, "namespace", k.Namespace, "err", err)
		}
		if len(c.errs) > 0 {
			return errors.Join(c.errs...)
		}
		if c.remaining > 0 {
			q.AddAfter(k, namespaceRecheck)
			return nil
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

// nsContent is what one pass over a terminating namespace found.
type nsContent struct {
	remaining  int
	byResource map[string]int // "pods", "widgets.example.com": objects left
	finalizers map[string]int // finalizer: objects it holds
	errs       []error
}

// deleteAll deletes every object of one resource in the namespace, then counts what is left and the finalizers
// holding it. Errors are kept, not returned: the other resources are still deleted.
func (c *nsContent) deleteAll(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string) {
	ri := dyn.Resource(gvr).Namespace(namespace)
	if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.errs = append(c.errs, fmt.Errorf("delete %s: %w", gvrName(gvr), err))
		return
	}
	l, err := ri.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("list %s: %w", gvrName(gvr), err))
		return
	}
	if len(l.Items) == 0 {
		return
	}
	if c.byResource == nil {
		c.byResource, c.finalizers = map[string]int{}, map[string]int{}
	}
	c.remaining += len(l.Items)
	c.byResource[gvrName(gvr)] += len(l.Items)
	for _, o := range l.Items {
		for _, f := range o.GetFinalizers() {
			c.finalizers[f]++
		}
	}
}

func gvrName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

// nsConditionsOK are the conditions of a namespace whose deletion has nothing to report, with upstream's
// reasons and messages (clients and the conformance suite read them).
var nsConditionsOK = []corev1.NamespaceCondition{
	{Type: corev1.NamespaceDeletionDiscoveryFailure, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
	{Type: corev1.NamespaceDeletionGVParsingFailure, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed"},
	{Type: corev1.NamespaceDeletionContentFailure, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
	{Type: corev1.NamespaceContentRemaining, Reason: "ContentRemoved", Message: "All content successfully removed"},
	{Type: corev1.NamespaceFinalizersRemaining, Reason: "ContentHasNoFinalizers", Message: "All content-preserving finalizers finished"},
}

// conditions are the namespace's deletion conditions after this pass.
func (c *nsContent) conditions() []corev1.NamespaceCondition {
	out := make([]corev1.NamespaceCondition, len(nsConditionsOK))
	copy(out, nsConditionsOK)
	for i := range out {
		out[i].Status = corev1.ConditionFalse
	}
	set := func(t corev1.NamespaceConditionType, reason, msg string) {
		for i := range out {
			if out[i].Type == t {
				out[i].Status, out[i].Reason, out[i].Message = corev1.ConditionTrue, reason, msg
			}
		}
	}
	if len(c.errs) > 0 {
		msgs := make([]string, len(c.errs))
		for i, err := range c.errs {
			msgs[i] = err.Error()
		}
		slices.Sort(msgs)
		set(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(msgs), strings.Join(msgs, ", ")))
	}
	if len(c.byResource) > 0 {
		set(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+
			countList(c.byResource, "%s has %d resource instances"))
	}
	if len(c.finalizers) > 0 {
		set(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+
			countList(c.finalizers, "%s in %d resource instances"))
	}
	return out
}

func countList(m map[string]int, format string) string {
	out := make([]string, 0, len(m))
	for k, n := range m {
		out = append(out, fmt.Sprintf(format, k, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// report writes the pass's conditions into the namespace's status when they changed (a condition's transition
// time moves only when its status does).
func (c *nsContent) report(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	changed := false
	now := metav1.Now()
	for _, want := range c.conditions() {
		i := slices.IndexFunc(ns.Status.Conditions, func(have corev1.NamespaceCondition) bool { return have.Type == want.Type })
		if i < 0 {
			want.LastTransitionTime = now
			ns.Status.Conditions = append(ns.Status.Conditions, want)
			changed = true
			continue
		}
		have := &ns.Status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		if have.Status != want.Status {
			have.LastTransitionTime = now
		}
		have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	if !changed {
		return nil
	}
	_, err = cs.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed meanwhile: the next pass writes them
	}
	return err
}
