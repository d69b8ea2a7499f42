package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The ReplicaSet controller: as many active pods as spec.replicas, made from the template and owned by the
// ReplicaSet (controller reference); matching orphans adopted, owned pods that no longer match released; when
// there are too many, unscheduled pods go first, then not-ready ones, then the newest. It never creates twice:
// after writing it waits until the pods collection shows its writes (the cache's revision is the expectation).

var (
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	replicaSetKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// burstReplicas is how many pods one sync creates at most (kube-controller-manager's default).
const burstReplicas = 500

// createParallelism bounds the calls of one slow-start batch in flight at once. Upstream runs a whole batch
// at once and relies on the client's QPS limit and the API server's in-flight limit; in-process calls have
// neither, and 500 writes at once would take every database connection (and the controller lease's renewal
// with them).
const createParallelism = 16

// slowStartBatch calls fn count times, in batches of 1, 2, 4, ... (at most createParallelism calls at once),
// stopping after the first batch with an error; it returns how many calls succeeded and the first error.
func slowStartBatch(ctx context.Context, count int, fn func(context.Context) error) (int, error) {
	done := 0
	sem := make(chan struct{}, createParallelism)
	for batch := 1; done < count; batch *= 2 {
		n := min(batch, count-done)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := fn(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		failed := len(errs)
		done += n - failed
		if failed > 0 {
			return done, <-errs
		}
	}
	return done, nil
}

// RunReplicaSets runs the controller until ctx ends. Keys are ReplicaSets.
func RunReplicaSets(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "replicasets")
	q := newQueue("replicasets")
	cl := newClients(d.API, serviceAccountUser("replicaset-controller"))
	rsCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, replicaSetsGVR) }
	podCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, podsGVR) }
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, rsCol, func(ev watchcache.Event) {
			if ev.Type != store.Deleted {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ev.Object.Name})
			}
		}, log)
	})
	wg.Go(func() {
		follow(ctx, podCol, func(ev watchcache.Event) {
			pod := ev.Object.Object.(*corev1.Pod)
			if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
				if ref.Kind == "ReplicaSet" {
					q.Add(Key{Cluster: ev.Object.Cluster, Namespace: pod.Namespace, Name: ref.Name})
				}
				return
			}
			if ev.Type == store.Deleted {
				return
			}
			// An orphan: any ReplicaSet of its namespace whose selector matches may adopt it.
			if sets, err := rsCol(ctx); err == nil {
				rss, _ := sets.ListIn(ev.Object.Cluster, pod.Namespace)
				for _, e := range rss {
					rs := e.Object.(*appsv1.ReplicaSet)
					if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
						q.Add(Key{Cluster: ev.Object.Cluster, Namespace: pod.Namespace, Name: rs.Name})
					}
				}
			}
		}, log)
	})
	work(ctx, q, 4, d.clock(), func(ctx context.Context, k Key) error {
		return reconcileReplicaSet(ctx, k, rsCol, podCol, cl, d.clock(), d.recorder(k.Cluster, "replicaset-controller"))
	}, log)
	wg.Wait()
}

func reconcileReplicaSet(ctx context.Context, k Key, rsCol, podCol func(context.Context) (*watchcache.Collection, error), cl *clients, clk clock.PassiveClock, ev record.EventRecorder) error {
	sets, err := rsCol(ctx)
	if err != nil {
		return err
	}
	e, ok, _ := sets.GetIn(k.Cluster, k.Namespace, k.Name)
	if !ok {
		return nil
	}
	rs := e.Object.(*appsv1.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		return nil // the garbage collector takes it from here
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil // validation refuses these; nothing sensible to do
	}
	pods, err := podCol(ctx)
	if err != nil {
		return err
	}
	cs, err := cl.For(k.Cluster)
	if err != nil {
		return err
	}
	podClient := cs.CoreV1().Pods(k.Namespace)
	entries, _ := pods.ListIn(k.Cluster, k.Namespace)
	var owned []*corev1.Pod
	var lastRev int64
	for _, pe := range entries {
		pod := pe.Object.(*corev1.Pod)
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref != nil && ref.UID != rs.UID {
			continue // another controller's
		}
		matches := sel.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID == rs.UID && matches:
			owned = append(owned, pod)
		case ref != nil && ref.UID == rs.UID: // no longer matches: release it
			rev, err := patchOwners(ctx, podClient, pod, slices.DeleteFunc(slices.Clone(pod.OwnerReferences),
				func(r metav1.OwnerReference) bool { return r.UID == rs.UID }))
			if err != nil {
				return err
			}
			lastRev = max(lastRev, rev)
		case ref == nil && matches && pod.DeletionTimestamp == nil: // a matching orphan: adopt it
			rev, err := patchOwners(ctx, podClient, pod, append(slices.Clone(pod.OwnerReferences), *controllerRef(rs)))
			if err != nil {
				return err
			}
			lastRev = max(lastRev, rev)
			owned = append(owned, pod)
		}
	}
	active := slices.DeleteFunc(slices.Clone(owned), func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	want := int(ptrOr(rs.Spec.Replicas, 1))
	switch diff := want - len(active); {
	case diff > 0:
		// As upstream: at most burstReplicas a sync, in slow-start batches (1, 2, 4, ...) run in parallel, so
		// a template the API refuses fails once, not a thousand times, and a large scale-up is not one
		// round trip after another.
		var mu sync.Mutex // guards lastRev
		_, err := slowStartBatch(ctx, min(diff, burstReplicas), func(ctx context.Context) error {
			created, err := podClient.Create(ctx, podFromTemplate(rs), metav1.CreateOptions{})
			if err != nil {
				ev.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				return err
			}
			ev.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
			mu.Lock()
			lastRev = max(lastRev, revOf(created.ResourceVersion))
			mu.Unlock()
			return nil
		})
		if err != nil {
			if lastRev > 0 {
				_ = pods.WaitFor(ctx, lastRev) // what was created counts before the retry
			}
			return fmt.Errorf("create pods of %s: %w", k, err)
		}
		// Beyond burstReplicas, the events of the pods just created bring the ReplicaSet back for the rest.
	case diff < 0:
		sort.SliceStable(active, func(i, j int) bool { return deleteFirst(active[i], active[j]) })
		for _, pod := range active[:-diff] {
			err := podClient.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				ev.Eventf(rs, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				return fmt.Errorf("delete pod %s of %s: %w", pod.Name, k, err)
			}
			if err == nil {
				ev.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
			}
		}
		// Deletions return no revision: wait until the collection has everything committed, so the next
		// reconcile sees these pods terminating or gone and does not delete others in their place.
		if err := pods.Fresh(ctx); err != nil {
			return err
		}
	}
	// Expectations: the next reconcile of this ReplicaSet must see what was just written.
	if lastRev > 0 {
		if err := pods.WaitFor(ctx, lastRev); err != nil {
			return err
		}
	}
	recheck, err := updateReplicaSetStatus(ctx, cs.AppsV1().ReplicaSets(k.Namespace), rs, owned, clk.Now())
	if err == nil && recheck > 0 {
		return requeueAfter(recheck)
	}
	return err
}

func controllerRef(rs *appsv1.ReplicaSet) *metav1.OwnerReference {
	return metav1.NewControllerRef(rs, replicaSetKind)
}

func podFromTemplate(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: rs.Name + "-", Namespace: rs.Namespace,
		Labels: t.Labels, Annotations: t.Annotations, OwnerReferences: []metav1.OwnerReference{*controllerRef(rs)}},
		Spec: t.Spec}
}

// deleteFirst orders pods for scale-down as upstream: unscheduled, then pending, then not ready, then newest.
func deleteFirst(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if (a.Status.Phase == corev1.PodPending) != (b.Status.Phase == corev1.PodPending) {
		return a.Status.Phase == corev1.PodPending
	}
	if podReady(a) != podReady(b) {
		return !podReady(a)
	}
	return a.CreationTimestamp.After(b.CreationTimestamp.Time)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podAvailable tells whether a pod has been ready for minReady at now; if it is ready but not yet available,
// wait is how long until it will be.
func podAvailable(p *corev1.Pod, minReady int32, now time.Time) (available bool, wait time.Duration) {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue {
			continue
		}
		if minReady <= 0 {
			return true, 0
		}
		at := c.LastTransitionTime.Add(time.Duration(minReady) * time.Second)
		if !now.Before(at) {
			return true, 0
		}
		return false, at.Sub(now)
	}
	return false, 0
}

// patchOwners sets a pod's ownerReferences (a merge patch replaces the list) and returns the write's revision.
func patchOwners(ctx context.Context, pods podPatcher, pod *corev1.Pod, refs []metav1.OwnerReference) (int64, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	if err != nil {
		return 0, err
	}
	out, err := pods.Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return revOf(out.ResourceVersion), nil
}

type podPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

type rsStatusWriter interface {
	UpdateStatus(ctx context.Context, rs *appsv1.ReplicaSet, opts metav1.UpdateOptions) (*appsv1.ReplicaSet, error)
}

// updateReplicaSetStatus writes the counts the ReplicaSet's pods show, when they changed. A pod is available
// once it has been ready for minReadySeconds; recheck is when the next ready pod becomes available (0: none).
func updateReplicaSetStatus(ctx context.Context, c rsStatusWriter, rs *appsv1.ReplicaSet, owned []*corev1.Pod, now time.Time) (recheck time.Duration, err error) {
	st := appsv1.ReplicaSetStatus{ObservedGeneration: rs.Generation, Conditions: rs.Status.Conditions}
	templateLabels := labels.SelectorFromSet(rs.Spec.Template.Labels)
	for _, p := range owned {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		st.Replicas++
		if templateLabels.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if podReady(p) {
			st.ReadyReplicas++
		}
		if ok, wait := podAvailable(p, rs.Spec.MinReadySeconds, now); ok {
			st.AvailableReplicas++
		} else {
			recheck = soonest(recheck, wait)
		}
	}
	if st.Replicas == rs.Status.Replicas && st.ReadyReplicas == rs.Status.ReadyReplicas &&
		st.AvailableReplicas == rs.Status.AvailableReplicas && st.FullyLabeledReplicas == rs.Status.FullyLabeledReplicas &&
		st.ObservedGeneration == rs.Status.ObservedGeneration {
		return recheck, nil
	}
	next := rs.DeepCopy()
	next.Status = st
	_, err = c.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return 0, nil // gone, or changed: its next event brings it back
	}
	return recheck, err
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func revOf(rv string) int64 {
	var n int64
	_, _ = fmt.Sscan(rv, &n)
	return n
}
