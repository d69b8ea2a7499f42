package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The Deployment controller: a ReplicaSet per pod template (named <deployment>-<template hash>, labelled
// pod-template-hash), revisions in the deployment.kubernetes.io/revision annotation, RollingUpdate bounded by
// maxSurge and maxUnavailable (availability as the ReplicaSets report it) or Recreate, pause, history trimmed to
// revisionHistoryLimit, and the status and conditions `kubectl rollout status` reads. Rollback (`kubectl
// rollout undo`) is the client writing an old template back: a new rollout to an existing ReplicaSet.

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
		// The Deployment's ReplicaSets, as upstream's ClaimReplicaSets finds them: its own that still match its
		// selector, and matching orphans, which it adopts (a ReplicaSet created beside the Deployment, or left by
		// one deleted with orphan propagation); its own that no longer match are released.
		var owned []*appsv1.ReplicaSet
		var claimRev int64
		entries, _ := sets.ListIn(k.Cluster, k.Namespace)
		for _, re := range entries {
			rs := re.Object.(*appsv1.ReplicaSet)
			ref := metav1.GetControllerOfNoCopy(rs)
			matches := !sel.Empty() && sel.Matches(labels.Set(rs.Labels))
			switch {
			case ref != nil && ref.UID == dep.UID && matches:
				if rs.DeletionTimestamp == nil {
					owned = append(owned, rs.DeepCopy()) // the sync updates its copies as it writes; the cache's are shared
				}
			case ref != nil && ref.UID == dep.UID: // no longer matches: release it
				_, rev, err := patchReplicaSetOwners(ctx, cs.AppsV1().ReplicaSets(k.Namespace), rs,
					slices.DeleteFunc(slices.Clone(rs.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == dep.UID }))
				if err != nil {
					return err
				}
				claimRev = max(claimRev, rev)
			case ref == nil && matches && rs.DeletionTimestamp == nil:
				adopted, rev, err := patchReplicaSetOwners(ctx, cs.AppsV1().ReplicaSets(k.Namespace), rs,
					append(slices.Clone(rs.OwnerReferences), *metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))))
				if err != nil {
					return err
				}
				claimRev = max(claimRev, rev)
				if adopted != nil {
					owned = append(owned, adopted)
				}
			}
		}
		r := &deploymentSync{dep: dep, owned: owned, rsc: cs.AppsV1().ReplicaSets(k.Namespace),
			dc: cs.AppsV1().Deployments(k.Namespace), now: d.clock().Now(), ev: d.recorder(k.Cluster, "deployment-controller")}
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
	dep     *appsv1.Deployment
	owned   []*appsv1.ReplicaSet
	rsc     appsclient.ReplicaSetInterface
	dc      appsclient.DeploymentInterface
	now     time.Time
	ev      record.EventRecorder
	created bool  // this sync made the new ReplicaSet
	lastRev int64 // the newest revision this sync wrote
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

func (r *deploymentSync) sync(ctx context.Context) (recheck time.Duration, err error) {
	dep := r.dep
	want := ptrOr(dep.Spec.Replicas, 1)
	hash := templateHash(withoutHash(dep.Spec.Template))
	var newRS *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	maxRevision := 0
	for _, rs := range r.owned {
		if v, err := strconv.Atoi(rs.Annotations[revisionAnnotation]); err == nil && v > maxRevision {
			maxRevision = v
		}
		if templateHash(withoutHash(rs.Spec.Template)) == hash {
			newRS = rs
		} else {
			old = append(old, rs)
		}
	}
	if dep.Spec.Paused {
		return r.status(ctx, newRS, old, want)
	}
	if newRS == nil {
		if newRS, err = r.createNew(ctx, hash, maxRevision+1); err != nil {
			return 0, err
		}
		r.created = true
	} else if err := r.syncNew(ctx, newRS, maxRevision, len(old) > 0); err != nil {
		return 0, err
	}
	if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		if err := r.recreate(ctx, newRS, old, want); err != nil {
			return 0, err
		}
	} else if err := r.rolling(ctx, newRS, old, want); err != nil {
		return 0, err
	}
	if err := r.trimHistory(ctx, old); err != nil {
		return 0, err
	}
	return r.status(ctx, newRS, old, want)
}

func (r *deploymentSync) createNew(ctx context.Context, hash string, revision int) (*appsv1.ReplicaSet, error) {
	dep := r.dep
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
	zero := int32(0)
	ann := copiedAnnotations(dep)
	ann[revisionAnnotation] = strconv.Itoa(revision)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: dep.Name + "-" + hash, Namespace: dep.Namespace,
		Labels: tmpl.Labels, Annotations: ann,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel, Template: *tmpl, MinReadySeconds: dep.Spec.MinReadySeconds}}
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType && len(r.owned) == 0 {
		rs.Spec.Replicas = dep.Spec.Replicas // a first rollout starts at full size
	}
	created, err := r.rsc.Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return r.rsc.Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create ReplicaSet %s: %w", rs.Name, err)
	}
	r.note(created.ResourceVersion)
	if n := ptrOr(created.Spec.Replicas, 1); n > 0 {
		r.ev.Eventf(dep, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	return created, nil
}

func (r *deploymentSync) note(rv string) { r.lastRev = max(r.lastRev, revOf(rv)) }

// copiedAnnotations are the Deployment's annotations its new ReplicaSet carries (kubernetes.io/change-cause
// among them, which `kubectl rollout history` shows), without the ones that belong to the Deployment alone.
func copiedAnnotations(dep *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	for k, v := range dep.Annotations {
		switch k {
		case revisionAnnotation, "deployment.kubernetes.io/revision-history", corev1.LastAppliedConfigAnnotation:
		default:
			out[k] = v
		}
	}
	return out
}

// syncNew brings an existing new ReplicaSet up to date: the newest revision again when a rollback made it new
// once more (the replaced revision listed in revision-history), the Deployment's annotations, and its
// minReadySeconds.
func (r *deploymentSync) syncNew(ctx context.Context, rs *appsv1.ReplicaSet, maxRevision int, hasOld bool) error {
	patch := map[string]any{}
	ann := map[string]any{}
	for k, v := range copiedAnnotations(r.dep) {
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			ann[k] = v
		}
	}
	if cur := rs.Annotations[revisionAnnotation]; cur != strconv.Itoa(maxRevision) && hasOld {
		ann[revisionAnnotation] = strconv.Itoa(maxRevision + 1)
		if cur != "" {
			hist := cur
			if h := rs.Annotations["deployment.kubernetes.io/revision-history"]; h != "" {
				hist = h + "," + cur
			}
			ann["deployment.kubernetes.io/revision-history"] = hist
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

// scale sets a ReplicaSet's replicas (through /scale-free merge patch) unless already there.
func (r *deploymentSync) scale(ctx context.Context, rs *appsv1.ReplicaSet, n int32) error {
	from := ptrOr(rs.Spec.Replicas, 1)
	if from == n {
		return nil
	}
	out, err := r.rsc.Patch(ctx, rs.Name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", rs.Name, n, err)
	}
	r.note(out.ResourceVersion)
	rs.Spec.Replicas = out.Spec.Replicas
	dir := "up"
	if n < from {
		dir = "down"
	}
	r.ev.Eventf(r.dep, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, n)
	return nil
}

// recreate: every old pod gone before the new ReplicaSet grows.
func (r *deploymentSync) recreate(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) error {
	running := int32(0)
	for _, rs := range old {
		if err := r.scale(ctx, rs, 0); err != nil {
			return err
		}
		running += rs.Status.Replicas
	}
	if running > 0 {
		return nil // the old pods' deletions show up as ReplicaSet events and bring us back
	}
	return r.scale(ctx, newRS, want)
}

// rolling moves replicas from the old ReplicaSets to the new one within maxSurge and maxUnavailable.
func (r *deploymentSync) rolling(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) error {
	surge, unavailable := rollingBounds(r.dep, want)
	sort.Slice(old, func(i, j int) bool { return old[i].CreationTimestamp.Before(&old[j].CreationTimestamp) })
	olds := make([]rsCounts, len(old))
	for i, rs := range old {
		olds[i] = rsCounts{Spec: ptrOr(rs.Spec.Replicas, 1), Available: rs.Status.AvailableReplicas}
	}
	newSpec, oldSpecs := planRolling(want, surge, unavailable,
		rsCounts{Spec: ptrOr(newRS.Spec.Replicas, 1), Available: newRS.Status.AvailableReplicas}, olds)
	if err := r.scale(ctx, newRS, newSpec); err != nil {
		return err
	}
	for i, rs := range old {
		if err := r.scale(ctx, rs, oldSpecs[i]); err != nil {
			return err
		}
	}
	return nil
}

// rsCounts is what one rolling-update step knows of a ReplicaSet: its desired replicas and how many are
// available.
type rsCounts struct{ Spec, Available int32 }

// planRolling is one step of a rolling update: the new ReplicaSet grows towards want with the total never above
// want+surge, and the old ones (oldest first) shrink by their unavailable replicas plus however many available
// ones can go while want-unavailable stay available.
func planRolling(want, surge, unavailable int32, newRS rsCounts, old []rsCounts) (newSpec int32, oldSpecs []int32) {
	total, available := newRS.Spec, newRS.Available
	for _, o := range old {
		total += o.Spec
		available += min(o.Available, o.Spec)
	}
	newSpec = newRS.Spec
	switch {
	case newSpec < want:
		if grow := min(want-newSpec, want+surge-total); grow > 0 {
			newSpec += grow
		}
	case newSpec > want:
		newSpec = want
	}
	canRemove := available - (want - unavailable)
	oldSpecs = make([]int32, len(old))
	for i, o := range old {
		oldSpecs[i] = o.Spec
		if o.Spec == 0 {
			continue
		}
		notAvailable := max(o.Spec-o.Available, 0)
		cut := min(o.Spec, notAvailable+max(canRemove, 0))
		if cut <= 0 {
			continue
		}
		oldSpecs[i] = o.Spec - cut
		canRemove -= max(cut-notAvailable, 0)
	}
	return newSpec, oldSpecs
}

// rollingBounds resolves maxSurge (rounded up) and maxUnavailable (rounded down), never both zero.
func rollingBounds(dep *appsv1.Deployment, want int32) (surge, unavailable int32) {
	ru := dep.Spec.Strategy.RollingUpdate
	s, u := intstr.FromString("25%"), intstr.FromString("25%")
	if ru != nil && ru.MaxSurge != nil {
		s = *ru.MaxSurge
	}
	if ru != nil && ru.MaxUnavailable != nil {
		u = *ru.MaxUnavailable
	}
	sv, _ := intstr.GetScaledValueFromIntOrPercent(&s, int(want), true)
	uv, _ := intstr.GetScaledValueFromIntOrPercent(&u, int(want), false)
	if sv == 0 && uv == 0 {
		uv = 1
	}
	return int32(sv), int32(uv)
}

// trimHistory deletes the oldest empty old ReplicaSets beyond revisionHistoryLimit.
func (r *deploymentSync) trimHistory(ctx context.Context, old []*appsv1.ReplicaSet) error {
	limit := int(ptrOr(r.dep.Spec.RevisionHistoryLimit, 10))
	var empty []*appsv1.ReplicaSet
	for _, rs := range old {
		if ptrOr(rs.Spec.Replicas, 1) == 0 && rs.Status.Replicas == 0 {
			empty = append(empty, rs)
		}
	}
	if len(empty) <= limit {
		return nil
	}
	slices.SortFunc(empty, func(a, b *appsv1.ReplicaSet) int {
		ra, _ := strconv.Atoi(a.Annotations[revisionAnnotation])
		rb, _ := strconv.Atoi(b.Annotations[revisionAnnotation])
		return ra - rb
	})
	for _, rs := range empty[:len(empty)-limit] {
		if err := r.rsc.Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// status writes replicas, updated, ready, available and unavailable counts, the revision and the Available and
// Progressing conditions: ReplicaSetUpdated (its update time refreshed whenever the rollout moves),
// NewReplicaSetAvailable once complete, ProgressDeadlineExceeded (False) when it has not moved for
// progressDeadlineSeconds, DeploymentPaused while paused. recheck is when the deadline falls.
func (r *deploymentSync) status(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) (recheck time.Duration, err error) {
	dep := r.dep
	st := appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, CollisionCount: dep.Status.CollisionCount}
	all := append(slices.Clone(old), newRS)
	for _, rs := range all {
		if rs == nil {
			continue
		}
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(want-st.AvailableReplicas, 0)
	now := metav1.NewTime(r.now)
	unavailable := int32(0)
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		_, unavailable = rollingBounds(dep, want)
	}
	avail := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse,
		Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."}
	if st.AvailableReplicas >= want-unavailable {
		avail.Status, avail.Reason, avail.Message = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
	}
	st.Conditions = setCondition(dep.Status.Conditions, avail, now, false)
	prev := findCondition(dep.Status.Conditions, appsv1.DeploymentProgressing)
	deadline := dep.Spec.ProgressDeadlineSeconds
	switch {
	case dep.Spec.Paused:
		st.Conditions = setCondition(st.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
			Status: corev1.ConditionUnknown, Reason: "DeploymentPaused", Message: "Deployment is paused"}, now, false)
	case newRS == nil:
	case st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && ptrOr(newRS.Spec.Replicas, 1) == want:
		st.Conditions = setCondition(st.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
			Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
			Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)}, now, false)
	case prev == nil || prev.Reason == "DeploymentPaused" || prev.Reason == "NewReplicaSetAvailable" ||
		r.created || progressed(dep.Status, st):
		st.Conditions = setCondition(st.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
			Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
			Message: fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)}, now, true)
		if deadline != nil {
			recheck = time.Duration(*deadline) * time.Second
		}
	case prev.Reason == "ProgressDeadlineExceeded":
	case deadline != nil:
		if due := prev.LastUpdateTime.Add(time.Duration(*deadline) * time.Second); !r.now.Before(due) {
			st.Conditions = setCondition(st.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
				Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
				Message: fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)}, now, false)
		} else {
			recheck = due.Sub(r.now)
		}
	}
	if statusEqual(dep.Status, st) {
		return recheck, nil
	}
	next := dep.DeepCopy()
	next.Status = st
	if newRS != nil && dep.Annotations[revisionAnnotation] != newRS.Annotations[revisionAnnotation] {
		// The revision annotation lives in metadata: an update of the main resource (the controller's role
		// has update, not patch, as upstream's), then the status.
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[revisionAnnotation] = newRS.Annotations[revisionAnnotation]
		out, err := r.dc.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil // its next event brings it back
		}
		if err != nil {
			return 0, err
		}
		next.ResourceVersion = out.ResourceVersion
	}
	_, err = r.dc.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return 0, nil
	}
	return recheck, err
}

// progressed tells whether a rollout moved between two statuses (upstream's test: more updated, ready or
// available replicas, or fewer old ones).
func progressed(a, b appsv1.DeploymentStatus) bool {
	return b.UpdatedReplicas != a.UpdatedReplicas || b.ReadyReplicas > a.ReadyReplicas ||
		b.AvailableReplicas > a.AvailableReplicas || b.Replicas-b.UpdatedReplicas < a.Replicas-a.UpdatedReplicas
}

func findCondition(conds []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition replaces the condition of c's type, keeping its transition time when the status stays and its
// update time unless something changed or touch says the condition was re-asserted.
func setCondition(conds []appsv1.DeploymentCondition, c appsv1.DeploymentCondition, now metav1.Time, touch bool) []appsv1.DeploymentCondition {
	out := slices.Clone(conds)
	for i, old := range out {
		if old.Type == c.Type {
			c.LastUpdateTime, c.LastTransitionTime = old.LastUpdateTime, old.LastTransitionTime
			if old.Status != c.Status {
				c.LastTransitionTime = now
			}
			if touch || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
				c.LastUpdateTime = now
			}
			out[i] = c
			return out
		}
	}
	c.LastUpdateTime, c.LastTransitionTime = now, now
	return append(out, c)
}

func statusEqual(a, b appsv1.DeploymentStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas || a.UpdatedReplicas != b.UpdatedReplicas ||
		a.ReadyReplicas != b.ReadyReplicas || a.AvailableReplicas != b.AvailableReplicas ||
		a.UnavailableReplicas != b.UnavailableReplicas || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			!x.LastUpdateTime.Equal(&y.LastUpdateTime) || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return true
}
