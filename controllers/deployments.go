package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The Deployment controller: a ReplicaSet per pod template (named <deployment>-<template hash>, labelled
// pod-template-hash), revisions in the deployment.kubernetes.io/revision annotation, RollingUpdate bounded by
// maxSurge and maxUnavailable (availability as the ReplicaSets report it) or Recreate, proportional scaling
// (deployment_scale.go), pause, history trimmed to revisionHistoryLimit, and the status and conditions `kubectl
// rollout status` reads (deployment_status.go). Rollback (`kubectl rollout undo`) is the client writing an old
// template back: a new rollout to an existing ReplicaSet.

const (
	revisionAnnotation = "deployment.kubernetes.io/revision"
	templateHashLabel  = appsv1.DefaultDeploymentUniqueLabelKey
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// RunDeployments runs the controller until ctx ends. Keys are Deployments.
func RunDeployments(ctx context.Context, d Deps) {
	log := d.Logger.With("controller", "deployments")
	q := newQueue("deployments")
	cl := newClients(d.API, serviceAccountUser("deployment-controller"))
	depCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, deploymentsGVR) }
	rsCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, replicaSetsGVR) }
	podCol := func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, podsGVR) }
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(ctx, depCol, func(ev watchcache.Event) {
			if ev.Type != store.Deleted {
				q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ev.Object.Name})
			}
		}, log)
	})
	wg.Go(func() {
		follow(ctx, rsCol, func(ev watchcache.Event) {
			rs := ev.Object.Object.(*appsv1.ReplicaSet)
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
				if ref.Kind == "Deployment" {
					q.Add(Key{Cluster: ev.Object.Cluster, Namespace: ev.Object.Namespace, Name: ref.Name})
				}
				return
			}
			if ev.Type == store.Deleted {
				return
			}
			// An orphan: any Deployment of its namespace whose selector matches may adopt it.
			if deps, err := depCol(ctx); err == nil {
				list, _ := deps.ListIn(ev.Object.Cluster, rs.Namespace)
				for _, e := range list {
					dep := e.Object.(*appsv1.Deployment)
					if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
						q.Add(Key{Cluster: ev.Object.Cluster, Namespace: rs.Namespace, Name: dep.Name})
					}
				}
			}
		}, log)
	})
	// A Recreate rollout waits until the old pods are gone, terminating ones included; their final deletion
	// changes no ReplicaSet, so it brings the Deployment back itself (upstream's deletePod).
	wg.Go(func() {
		follow(ctx, podCol, func(ev watchcache.Event) {
			if ev.Type != store.Deleted {
				return
			}
			if k, ok := recreateDeploymentOf(ctx, ev.Object.Cluster, ev.Object.Object.(*corev1.Pod), rsCol, depCol); ok {
				q.Add(k)
			}
		}, log)
	})
	work(ctx, q, 4, d.clock(), func(ctx context.Context, k Key) error {
		deps, err := depCol(ctx)
		if err != nil {
			return err
		}
		e, ok, _ := deps.GetIn(k.Cluster, k.Namespace, k.Name)
		if !ok {
			return nil
		}
		dep := e.Object.(*appsv1.Deployment)
		if dep.DeletionTimestamp != nil {
			return nil
		}
		sets, err := rsCol(ctx)
		if err != nil {
			return err
		}
		cs, err := cl.For(k.Cluster)
		if err != nil {
			return err
		}
		sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		if err != nil {
			return nil // invalid selectors are refused by validation; nothing to do for one that slipped through
		}
		owned, claimRev, err := claimReplicaSets(ctx, cs.AppsV1().ReplicaSets(k.Namespace), dep, sel, sets, k.Cluster)
		if err != nil {
			return err
		}
		r := &deploymentSync{dep: dep, owned: owned, rsc: cs.AppsV1().ReplicaSets(k.Namespace),
			dc: cs.AppsV1().Deployments(k.Namespace), now: d.clock().Now(), ev: d.recorder(k.Cluster, "deployment-controller")}
		if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			pods, err := podCol(ctx)
			if err != nil {
				return err
			}
			r.livePods = livePodsOf(pods, k.Cluster, dep, sel, owned)
		}
		recheck, err := r.sync(ctx)
		if err != nil {
			return err
		}
		if last := max(r.lastRev, claimRev); last > 0 {
			if err := sets.WaitFor(ctx, last); err != nil { // the next reconcile sees its own writes
				return err
			}
		}
		if recheck > 0 {
			return requeueAfter(recheck)
		}
		return nil
	}, log)
	wg.Wait()
}

// claimReplicaSets finds a Deployment's ReplicaSets as upstream's ClaimReplicaSets does: its own that still
// match its selector, and matching orphans, which it adopts (a ReplicaSet created beside the Deployment, or left
// by one deleted with orphan propagation); its own that no longer match are released. It returns copies (the
// sync updates them as it writes; the cache's are shared) and the revision of its last write.
func claimReplicaSets(ctx context.Context, rsc rsPatcher, dep *appsv1.Deployment, sel labels.Selector, sets *watchcache.Collection, cluster string) (owned []*appsv1.ReplicaSet, lastRev int64, err error) {
	entries, _ := sets.ListIn(cluster, dep.Namespace)
	for _, re := range entries {
		rs := re.Object.(*appsv1.ReplicaSet)
		ref := metav1.GetControllerOfNoCopy(rs)
		matches := !sel.Empty() && sel.Matches(labels.Set(rs.Labels))
		switch {
		case ref != nil && ref.UID == dep.UID && matches:
			if rs.DeletionTimestamp == nil {
				owned = append(owned, rs.DeepCopy())
			}
		case ref != nil && ref.UID == dep.UID: // no longer matches: release it
			_, rev, err := patchReplicaSetOwners(ctx, rsc, rs,
				slices.DeleteFunc(slices.Clone(rs.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == dep.UID }))
			if err != nil {
				return nil, 0, err
			}
			lastRev = max(lastRev, rev)
		case ref == nil && matches && rs.DeletionTimestamp == nil:
			adopted, rev, err := patchReplicaSetOwners(ctx, rsc, rs,
				append(slices.Clone(rs.OwnerReferences), *metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))))
			if err != nil {
				return nil, 0, err
			}
			lastRev = max(lastRev, rev)
			if adopted != nil {
				owned = append(owned, adopted)
			}
		}
	}
	return owned, lastRev, nil
}

// livePodsOf counts, per ReplicaSet of the Deployment, its pods not yet Succeeded or Failed, terminating ones
// included (upstream's getPodMapForDeployment, as Recreate reads it).
func livePodsOf(pods *watchcache.Collection, cluster string, dep *appsv1.Deployment, sel labels.Selector, owned []*appsv1.ReplicaSet) map[types.UID]int {
	mine := map[types.UID]bool{}
	for _, rs := range owned {
		mine[rs.UID] = true
	}
	out := map[types.UID]int{}
	entries, _ := pods.ListIn(cluster, dep.Namespace)
	for _, e := range entries {
		pod := e.Object.(*corev1.Pod)
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || !mine[ref.UID] || !sel.Matches(labels.Set(pod.Labels)) ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		out[ref.UID]++
	}
	return out
}

// recreateDeploymentOf is the Recreate Deployment whose ReplicaSet controlled a pod, if any.
func recreateDeploymentOf(ctx context.Context, cluster string, pod *corev1.Pod, rsCol, depCol func(context.Context) (*watchcache.Collection, error)) (Key, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return Key{}, false
	}
	sets, err := rsCol(ctx)
	if err != nil {
		return Key{}, false
	}
	e, ok, _ := sets.GetIn(cluster, pod.Namespace, ref.Name)
	if !ok || e.Object.(*appsv1.ReplicaSet).UID != ref.UID {
		return Key{}, false
	}
	dref := metav1.GetControllerOfNoCopy(e.Object.(*appsv1.ReplicaSet))
	if dref == nil || dref.Kind != "Deployment" {
		return Key{}, false
	}
	deps, err := depCol(ctx)
	if err != nil {
		return Key{}, false
	}
	de, ok, _ := deps.GetIn(cluster, pod.Namespace, dref.Name)
	if !ok || de.Object.(*appsv1.Deployment).Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return Key{}, false
	}
	return Key{Cluster: cluster, Namespace: pod.Namespace, Name: dref.Name}, true
}

// patchReplicaSetOwners sets a ReplicaSet's ownerReferences (a merge patch replaces the list, with the UID as a
// precondition) and returns it as written with the write's revision; nil, 0 when it is gone or was replaced.
func patchReplicaSetOwners(ctx context.Context, rsc rsPatcher, rs *appsv1.ReplicaSet, refs []metav1.OwnerReference) (*appsv1.ReplicaSet, int64, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": rs.UID}})
	if err != nil {
		return nil, 0, err
	}
	out, err := rsc.Patch(ctx, rs.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return out, revOf(out.ResourceVersion), nil
}

type rsPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*appsv1.ReplicaSet, error)
}

type deploymentSync struct {
	dep   *appsv1.Deployment
	owned []*appsv1.ReplicaSet
	rsc   appsclient.ReplicaSetInterface
	dc    appsclient.DeploymentInterface
	now   time.Time
	ev    record.EventRecorder
	// livePods counts each owned ReplicaSet's pods not yet finished (Recreate only).
	livePods map[types.UID]int
	created  bool  // this sync made the new ReplicaSet
	lastRev  int64 // the newest revision this sync wrote
}

// templateHash names a pod template: the FNV-1a of its JSON (labels and spec), as a short decimal-free string.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// withoutHash is a template minus the pod-template-hash label (how ReplicaSet templates compare to the
// Deployment's).
func withoutHash(t corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	t = *t.DeepCopy()
	delete(t.Labels, templateHashLabel)
	if len(t.Labels) == 0 {
		t.Labels = nil
	}
	return &t
}

// sync is one pass of upstream's syncDeployment over the Deployment's ReplicaSets: the new one's annotations
// brought up to date; then, paused, only proportional scaling and history; on a scaling event, only proportional
// scaling; otherwise one step of the rollout, and the history trimmed once it is complete. The status last.
func (r *deploymentSync) sync(ctx context.Context) (recheck time.Duration, err error) {
	dep := r.dep
	want := ptrOr(dep.Spec.Replicas, 1)
	hash := templateHash(withoutHash(dep.Spec.Template))
	// Oldest first: the new ReplicaSet is the oldest whose template is the Deployment's (upstream's
	// FindNewReplicaSet), and old ones shrink oldest first.
	slices.SortStableFunc(r.owned, byCreation)
	var newRS *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	for _, rs := range r.owned {
		if newRS == nil && templateHash(withoutHash(rs.Spec.Template)) == hash {
			newRS = rs
		} else {
			old = append(old, rs)
		}
	}
	maxOld := int64(0)
	for _, rs := range old {
		if v, err := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64); err == nil && v > maxOld {
			maxOld = v
		}
	}
	if newRS != nil {
		if err := r.syncNew(ctx, newRS, maxOld+1); err != nil {
			return 0, err
		}
	}
	switch {
	case dep.Spec.Paused:
		if err := r.scaleProportionally(ctx, newRS, old, want); err != nil {
			return 0, err
		}
		if err := r.trimHistory(ctx, old); err != nil {
			return 0, err
		}
	case scalingEvent(newRS, old, want):
		// A scaling event is only scaled: a template changed at the same time rolls out on the next sync.
		if err := r.scaleProportionally(ctx, newRS, old, want); err != nil {
			return 0, err
		}
	default:
		step := r.rolling
		if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			step = r.recreate
		}
		var moved bool
		if newRS, moved, err = step(ctx, newRS, old, want, maxOld+1); err != nil {
			return 0, err
		}
		if !moved && rolloutComplete(dep) {
			if err := r.trimHistory(ctx, old); err != nil {
				return 0, err
			}
		}
	}
	return r.status(ctx, newRS, old, want)
}

// rolloutComplete tells whether the Deployment's status (as last written) shows its rollout done.
func rolloutComplete(dep *appsv1.Deployment) bool {
	want := ptrOr(dep.Spec.Replicas, 1)
	st := dep.Status
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && st.ObservedGeneration >= dep.Generation
}

// createNew creates the ReplicaSet of the Deployment's template at a revision and size, sized for the
// Deployment (desired- and max-replicas).
func (r *deploymentSync) createNew(ctx context.Context, revision int64, replicas int32) (*appsv1.ReplicaSet, error) {
	dep := r.dep
	hash := templateHash(withoutHash(dep.Spec.Template))
	tmpl := dep.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[templateHashLabel] = hash
	sel := dep.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[templateHashLabel] = hash
	want := ptrOr(dep.Spec.Replicas, 1)
	ann := copiedAnnotations(dep)
	ann[revisionAnnotation] = strconv.FormatInt(revision, 10)
	ann[desiredReplicasAnnotation] = strconv.Itoa(int(want))
	ann[maxReplicasAnnotation] = strconv.Itoa(int(want + maxSurge(dep)))
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: dep.Name + "-" + hash, Namespace: dep.Namespace,
		Labels: tmpl.Labels, Annotations: ann,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: *tmpl, MinReadySeconds: dep.Spec.MinReadySeconds}}
	created, err := r.rsc.Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return r.rsc.Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create ReplicaSet %s: %w", rs.Name, err)
	}
	r.note(created.ResourceVersion)
	r.created = true
	if n := ptrOr(created.Spec.Replicas, 1); n > 0 {
		r.ev.Eventf(dep, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	return created, nil
}

func (r *deploymentSync) note(rv string) { r.lastRev = max(r.lastRev, revOf(rv)) }

// copiedAnnotations are the Deployment's annotations its new ReplicaSet carries (kubernetes.io/change-cause
// among them, which `kubectl rollout history` shows), without the ones that belong to the Deployment alone or
// that the controller writes on each ReplicaSet itself.
func copiedAnnotations(dep *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	for k, v := range dep.Annotations {
		switch k {
		case revisionAnnotation, revisionHistoryAnnotation, desiredReplicasAnnotation, maxReplicasAnnotation,
			appsv1.DeprecatedRollbackTo, corev1.LastAppliedConfigAnnotation:
		default:
			out[k] = v
		}
	}
	return out
}

// revisionHistoryAnnotation lists the revisions a ReplicaSet had before a rollback made it new again.
const revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"

// maxRevisionHistory bounds revision-history, in characters (upstream's, about 100 revisions); the oldest
// entries go first.
const maxRevisionHistory = 2000

// syncNew brings an existing new ReplicaSet up to date, as upstream's SetNewReplicaSetAnnotations: the
// Deployment's annotations; revision raised to next when below it (a rollback made an old ReplicaSet new once
// more: its replaced revision is appended to revision-history); and its minReadySeconds.
func (r *deploymentSync) syncNew(ctx context.Context, rs *appsv1.ReplicaSet, next int64) error {
	patch := map[string]any{}
	ann := map[string]any{}
	for k, v := range copiedAnnotations(r.dep) {
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			ann[k] = v
		}
	}
	cur := rs.Annotations[revisionAnnotation]
	have, err := strconv.ParseInt(cur, 10, 64)
	if cur == "" {
		have, err = 0, nil
	}
	if err == nil && have < next {
		ann[revisionAnnotation] = strconv.FormatInt(next, 10)
		if cur != "" {
			ann[revisionHistoryAnnotation] = appendHistory(rs.Annotations[revisionHistoryAnnotation], cur)
		}
	}
	if len(ann) > 0 {
		patch["metadata"] = map[string]any{"annotations": ann}
	}
	if rs.Spec.MinReadySeconds != r.dep.Spec.MinReadySeconds {
		patch["spec"] = map[string]any{"minReadySeconds": r.dep.Spec.MinReadySeconds}
	}
	if len(patch) == 0 {
		return nil
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	out, err := r.rsc.Patch(ctx, rs.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("update ReplicaSet %s: %w", rs.Name, err)
	}
	r.note(out.ResourceVersion)
	rs.Annotations, rs.Spec.MinReadySeconds = out.Annotations, out.Spec.MinReadySeconds
	return nil
}

// appendHistory adds a revision to a revision-history list, dropping the oldest entries beyond
// maxRevisionHistory characters.
func appendHistory(hist, rev string) string {
	if hist == "" {
		return rev
	}
	revs := strings.Split(hist, ",")
	total := len(hist) + 1 + len(rev)
	for total > maxRevisionHistory && len(revs) > 0 {
		total -= len(revs[0]) + 1
		revs = revs[1:]
	}
	return strings.Join(append(revs, rev), ",")
}

// scale sets a ReplicaSet's replicas and sizes it for the Deployment (desired- and max-replicas), when its size
// differs or, with force, when only its annotations do (upstream's scaleReplicaSet).
func (r *deploymentSync) scale(ctx context.Context, rs *appsv1.ReplicaSet, n int32, force bool) error {
	from := ptrOr(rs.Spec.Replicas, 1)
	if from == n && (!force || r.sizedFor(rs)) {
		return nil
	}
	want := ptrOr(r.dep.Spec.Replicas, 1)
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{
			desiredReplicasAnnotation: strconv.Itoa(int(want)),
			maxReplicasAnnotation:     strconv.Itoa(int(want + maxSurge(r.dep))),
		}},
		"spec": map[string]any{"replicas": n},
	})
	if err != nil {
		return err
	}
	out, err := r.rsc.Patch(ctx, rs.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", rs.Name, n, err)
	}
	r.note(out.ResourceVersion)
	rs.Spec.Replicas, rs.Annotations = out.Spec.Replicas, out.Annotations
	if from == n {
		return nil
	}
	dir := "up"
	if n < from {
		dir = "down"
	}
	r.ev.Eventf(r.dep, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, n)
	return nil
}

// trimHistory deletes the oldest old ReplicaSets (by revision) beyond revisionHistoryLimit, as upstream's
// cleanupDeployment: of the len(old)−limit oldest, those that are empty and whose status has caught up.
func (r *deploymentSync) trimHistory(ctx context.Context, old []*appsv1.ReplicaSet) error {
	limit := int(ptrOr(r.dep.Spec.RevisionHistoryLimit, 10))
	if len(old) <= limit {
		return nil
	}
	byRevision := slices.Clone(old)
	slices.SortStableFunc(byRevision, func(a, b *appsv1.ReplicaSet) int {
		ra, errA := strconv.ParseInt(a.Annotations[revisionAnnotation], 10, 64)
		rb, errB := strconv.ParseInt(b.Annotations[revisionAnnotation], 10, 64)
		if errA != nil || errB != nil || ra == rb {
			return byCreation(a, b)
		}
		return cmp.Compare(ra, rb)
	})
	for _, rs := range byRevision[:len(old)-limit] {
		if ptrOr(rs.Spec.Replicas, 1) != 0 || rs.Status.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		if err := r.rsc.Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
