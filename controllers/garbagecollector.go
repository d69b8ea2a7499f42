package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The garbage collector (upstream's generic-garbage-collector) keeps ownerReferences true in every cluster:
//   - orphan deletion: the owner carries the "orphan" finalizer; its dependents lose their reference to it,
//     then the finalizer goes and the owner with it;
//   - foreground deletion: the owner carries "foregroundDeletion"; its dependents are deleted (in the
//     foreground too) and, once none is left, the finalizer goes and the owner with it;
//   - background deletion and dangling references: an object whose owners are all gone is deleted; references
//     to owners that are gone are removed while another owner lives.
// It follows every kind's cross-cluster collection (events excepted) and keeps a graph of owner UID →
// dependents. Owners missing from the graph are checked with a live read before anything is deleted.

// gcRecheck is how soon an owner waiting for its dependents is looked at again.
const gcRecheck = time.Second

// node is one object of the graph.
type node struct {
	cluster, namespace, name string
	res                      *resources.Resource
	uid                      types.UID
	owners                   []metav1.OwnerReference
	finalizers               []string
	deleting                 bool
}

type graph struct {
	mu         sync.Mutex
	byUID      map[types.UID]*node
	dependents map[types.UID]map[types.UID]bool
}

func (g *graph) set(n *node) (old *node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old = g.byUID[n.uid]
	if old != nil {
		for _, o := range old.owners {
			delete(g.dependents[o.UID], n.uid)
		}
	}
	g.byUID[n.uid] = n
	for _, o := range n.owners {
		if g.dependents[o.UID] == nil {
			g.dependents[o.UID] = map[types.UID]bool{}
		}
		g.dependents[o.UID][n.uid] = true
	}
	return old
}

func (g *graph) remove(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.byUID[uid]; n != nil {
		for _, o := range n.owners {
			delete(g.dependents[o.UID], uid)
		}
	}
	delete(g.byUID, uid)
}

func (g *graph) get(uid types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byUID[uid]
}

func (g *graph) dependentsOf(uid types.UID) []*node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*node
	for d := range g.dependents[uid] {
		if n := g.byUID[d]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// RunGarbageCollector runs the collector until ctx ends. Keys are objects: (cluster, "", uid).
func RunGarbageCollector(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "garbage-collector")
	q := newQueue("garbage-collector")
	g := &graph{byUID: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]bool{}}
	user := serviceAccountUser("generic-garbage-collector")
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
	var wg sync.WaitGroup
	for _, res := range d.Registry.All() {
		if res.Virtual || res.Convert != nil || res.Storage == "events" {
			continue
		}
		get := func(ctx context.Context) (*watchcache.Collection, error) { return d.API.Collection(ctx, "", res) }
		wg.Go(func() {
			follow(ctx, get, func(ev watchcache.Event) {
				m, err := meta.Accessor(ev.Object.Object)
				if err != nil {
					return
				}
				key := Key{Cluster: ev.Object.Cluster, Name: string(m.GetUID())}
				if ev.Type == store.Deleted {
					g.remove(m.GetUID())
					for _, dep := range g.dependentsOf(m.GetUID()) {
						q.Add(Key{Cluster: dep.cluster, Name: string(dep.uid)}) // may dangle now
					}
					return
				}
				n := &node{cluster: ev.Object.Cluster, namespace: m.GetNamespace(), name: m.GetName(), res: res,
					uid: m.GetUID(), owners: m.GetOwnerReferences(), finalizers: m.GetFinalizers(),
					deleting: m.GetDeletionTimestamp() != nil}
				g.set(n)
				if len(n.owners) > 0 || n.deleting {
					q.Add(key)
				}
			}, log)
		})
	}
	gc := &collector{d: d, g: g, dyn: dynFor, log: log}
	work(ctx, q, 4, d.clock(), func(ctx context.Context, k Key) error {
		again, err := gc.reconcile(ctx, types.UID(k.Name))
		if err == nil && again {
			q.AddAfter(k, gcRecheck)
		}
		return err
	}, log)
	wg.Wait()
}

type collector struct {
	d   Deps
	g   *graph
	dyn func(cluster string) (dynamic.Interface, error)
	log *slog.Logger
}

// reconcile handles one object; true asks to come back later (dependents still going).
func (c *collector) reconcile(ctx context.Context, uid types.UID) (bool, error) {
	n := c.g.get(uid)
	if n == nil {
		return false, nil
	}
	if n.deleting && slices.Contains(n.finalizers, metav1.FinalizerOrphanDependents) {
		for _, dep := range c.g.dependentsOf(uid) {
			if err := c.dropOwner(ctx, dep, uid); err != nil {
				return false, err
			}
		}
		return false, c.dropFinalizer(ctx, n, metav1.FinalizerOrphanDependents)
	}
	if n.deleting && slices.Contains(n.finalizers, metav1.FinalizerDeleteDependents) {
		// As upstream's: the owner waits for the dependents that block its deletion (blockOwnerDeletion); the
		// others are deleted too, but collected after it like any object whose owners are gone.
		blocking := 0
		fg := metav1.DeletePropagationForeground
		for _, dep := range c.g.dependentsOf(uid) {
			if blocks(dep, uid) {
				if c.inDeletionCycle(dep) {
					// dep waits for a dependent of its own that waits for its dependents in turn: a cycle of
					// foreground deletions that would wait forever. Upstream breaks it the same way: dep's
					// references stop blocking, so its owners go, then the rest of the cycle.
					if err := c.unblockOwners(ctx, dep); err != nil {
						return false, err
					}
				} else {
					blocking++
				}
			}
			if !dep.deleting {
				if err := c.delete(ctx, dep, &fg); err != nil {
					return false, err
				}
			}
		}
		if blocking == 0 {
			return false, c.dropFinalizer(ctx, n, metav1.FinalizerDeleteDependents)
		}
		return true, nil
	}
	if len(n.owners) == 0 || n.deleting {
		return false, nil
	}
	var gone []types.UID
	for _, o := range n.owners {
		exists, err := c.ownerExists(ctx, n, o)
		if err != nil {
			return false, err
		}
		if !exists {
			gone = append(gone, o.UID)
		}
	}
	switch {
	case len(gone) == 0:
		return false, nil
	case len(gone) == len(n.owners):
		bg := metav1.DeletePropagationBackground
		return false, c.delete(ctx, n, &bg)
	default:
		for _, u := range gone {
			if err := c.dropOwner(ctx, n, u); err != nil {
				return false, err
			}
		}
		return false, nil
	}
}

// ownerExists checks an owner reference: in the graph (same cluster, same UID), else with a live read.
func (c *collector) ownerExists(ctx context.Context, dep *node, ref metav1.OwnerReference) (bool, error) {
	if o := c.g.get(ref.UID); o != nil && o.cluster == dep.cluster {
		return true, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, nil // a reference that names no kind: its owner cannot exist
	}
	res := c.resourceFor(gv.WithKind(ref.Kind))
	if res == nil {
		return true, nil // a kind this server does not serve: leave it be
	}
	ns := dep.namespace
	if !res.Namespaced {
		ns = ""
	}
	dyn, err := c.dyn(dep.cluster)
	if err != nil {
		return false, err
	}
	obj, err := dyn.Resource(res.GroupVersionResource()).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return obj.GetUID() == ref.UID, nil
}

func (c *collector) resourceFor(gvk schema.GroupVersionKind) *resources.Resource {
	for _, r := range c.d.Registry.All() {
		if r.GVK == gvk && !r.Virtual {
			return r
		}
	}
	return nil
}

func (c *collector) client(ctx context.Context, n *node) (dynamic.ResourceInterface, error) {
	dyn, err := c.dyn(n.cluster)
	if err != nil {
		return nil, err
	}
	return dyn.Resource(n.res.GroupVersionResource()).Namespace(n.namespace), nil
}

// delete deletes n (only the version the graph knows, by UID precondition).
func (c *collector) delete(ctx context.Context, n *node, policy *metav1.DeletionPropagation) error {
	ri, err := c.client(ctx, n)
	if err != nil {
		return err
	}
	err = ri.Delete(ctx, n.name, metav1.DeleteOptions{PropagationPolicy: policy, Preconditions: &metav1.Preconditions{UID: &n.uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another object now has the name
	}
	if err == nil {
		c.log.Info("garbage-collected", "cluster", n.cluster, "resource", n.res.Plural, "namespace", n.namespace, "name", n.name)
	}
	return err
}

// blocks says whether dep's reference to owner blocks the owner's foreground deletion.
func blocks(dep *node, owner types.UID) bool {
	for _, r := range dep.owners {
		if r.UID == owner && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

// inDeletionCycle says whether one of n's dependents is itself waiting for its dependents (foreground).
func (c *collector) inDeletionCycle(n *node) bool {
	for _, d := range c.g.dependentsOf(n.uid) {
		if d.deleting && slices.Contains(d.finalizers, metav1.FinalizerDeleteDependents) {
			return true
		}
	}
	return false
}

// unblockOwners sets blockOwnerDeletion false on every reference of n.
func (c *collector) unblockOwners(ctx context.Context, n *node) error {
	return c.update(ctx, n, func(m metav1.Object) bool {
		refs := slices.Clone(m.GetOwnerReferences())
		changed := false
		for i := range refs {
			if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
				f := false
				refs[i].BlockOwnerDeletion, changed = &f, true
			}
		}
		if changed {
			m.SetOwnerReferences(refs)
		}
		return changed
	})
}

// dropOwner removes the reference to owner from n's ownerReferences.
func (c *collector) dropOwner(ctx context.Context, n *node, owner types.UID) error {
	return c.update(ctx, n, func(m metav1.Object) bool {
		refs := m.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.UID == owner })
		if len(kept) == len(refs) {
			return false
		}
		m.SetOwnerReferences(kept)
		return true
	})
}

// dropFinalizer removes a finalizer from n (the API then removes n when none is left).
func (c *collector) dropFinalizer(ctx context.Context, n *node, finalizer string) error {
	return c.update(ctx, n, func(m metav1.Object) bool {
		fs := m.GetFinalizers()
		kept := slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == finalizer })
		if len(kept) == len(fs) {
			return false
		}
		m.SetFinalizers(kept)
		return true
	})
}

// update reads n live and writes mutate's change, retrying conflicts; a changed UID or a missing object ends it.
func (c *collector) update(ctx context.Context, n *node, mutate func(metav1.Object) bool) error {
	ri, err := c.client(ctx, n)
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 10; attempt++ {
		obj, err := ri.Get(ctx, n.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if obj.GetUID() != n.uid || !mutate(obj) {
			return nil
		}
		_, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return fmt.Errorf("update %s/%s: too many conflicts", n.namespace, n.name)
}
