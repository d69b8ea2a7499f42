package controllers

import (
	"context"
	"math"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
)

// Scaling a Deployment as upstream's controller does. Every ReplicaSet the controller sizes carries the
// Deployment's spec.replicas (desired-replicas) and spec.replicas+maxSurge (max-replicas) it was sized for. When
// an active ReplicaSet's desired-replicas differs from spec.replicas, the Deployment was scaled: rather than let
// the rollout absorb the difference (which would hasten a rollout that may be failing), the difference is spread
// over the active ReplicaSets in proportion to their sizes, each scaled by (spec.replicas+maxSurge) over the
// max-replicas it was sized for. A paused Deployment is scaled the same way.

const (
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	maxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
)

// replicasAnnotation reads one of the two sizing annotations; false when absent or not a non-negative int32.
func replicasAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// activeSets are the ReplicaSets asked for at least one replica, the new one (if any) last.
func activeSets(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range append(slices.Clone(old), newRS) {
		if rs != nil && ptrOr(rs.Spec.Replicas, 1) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// scalingEvent tells whether spec.replicas changed since an active ReplicaSet was last sized (upstream's
// isScalingEvent); ReplicaSets without the annotation do not count.
func scalingEvent(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) bool {
	for _, rs := range activeSets(newRS, old) {
		if desired, ok := replicasAnnotation(rs, desiredReplicasAnnotation); ok && desired != want {
			return true
		}
	}
	return false
}

// activeOrLatest is the ReplicaSet that takes every replica when at most one is active: the active one, else
// the new one, else the newest old one; nil when several are active (old is sorted oldest first).
func activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	switch active := activeSets(newRS, old); {
	case len(active) == 1:
		return active[0]
	case len(active) > 1:
		return nil
	case newRS != nil:
		return newRS
	case len(old) > 0:
		return old[len(old)-1]
	}
	return nil
}

// saturated tells whether the new ReplicaSet holds the whole Deployment: sized for it, asked for all of it and
// all of it available.
func saturated(rs *appsv1.ReplicaSet, want int32) bool {
	if rs == nil {
		return false
	}
	desired, ok := replicasAnnotation(rs, desiredReplicasAnnotation)
	return ok && desired == want && ptrOr(rs.Spec.Replicas, 1) == want && rs.Status.AvailableReplicas == want
}

// scaleProportionally is upstream's scale(): one active (or no active) ReplicaSet takes spec.replicas; with a
// saturated new ReplicaSet the old ones go to zero; otherwise, for a rolling update, spec.replicas+maxSurge is
// spread over the active ReplicaSets in proportion (Recreate leaves them to the rollout).
func (r *deploymentSync) scaleProportionally(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) error {
	if only := activeOrLatest(newRS, old); only != nil {
		// Upstream scales it only when its size differs; its annotations are rewritten too when only they are
		// stale, or the stale desired-replicas would make every sync a scaling event again.
		return r.scale(ctx, only, want, !r.sizedFor(only))
	}
	if saturated(newRS, want) {
		for _, rs := range activeSets(nil, old) {
			if err := r.scale(ctx, rs, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	if r.dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return nil
	}
	active := activeSets(newRS, old)
	shares := make([]rsShare, len(active))
	for i, rs := range active {
		maxBefore, _ := replicasAnnotation(rs, maxReplicasAnnotation)
		shares[i] = rsShare{Spec: ptrOr(rs.Spec.Replicas, 1), MaxBefore: maxBefore, rs: rs}
	}
	sizes := proportionalSizes(want, maxSurge(r.dep), r.dep.Status.Replicas, shares)
	for i, rs := range active {
		if err := r.scale(ctx, rs, sizes[i], true); err != nil {
			return err
		}
	}
	return nil
}

// sizedFor tells whether a ReplicaSet's sizing annotations are the Deployment's current ones.
func (r *deploymentSync) sizedFor(rs *appsv1.ReplicaSet) bool {
	want := ptrOr(r.dep.Spec.Replicas, 1)
	desired, ok1 := replicasAnnotation(rs, desiredReplicasAnnotation)
	maxR, ok2 := replicasAnnotation(rs, maxReplicasAnnotation)
	return ok1 && ok2 && desired == want && maxR == want+maxSurge(r.dep)
}

// rsShare is what proportional scaling knows of an active ReplicaSet: its size, the max-replicas it was sized
// for (0: unknown), and the ReplicaSet itself for the order of ties.
type rsShare struct {
	Spec, MaxBefore int32
	rs              *appsv1.ReplicaSet
}

// proportionalSizes spreads the difference between spec.replicas+maxSurge (0 when scaling to zero) and the
// active ReplicaSets' total over them, largest first (ties: newest first when growing, oldest first when
// shrinking): each moves by round(size × (want+surge) / its max-replicas) − size, never past what is left to
// move, and the largest takes the remainder (never below zero). A ReplicaSet without max-replicas is scaled
// against status.replicas; with neither it does not move. The result is in the order of shares.
func proportionalSizes(want, surge, statusReplicas int32, shares []rsShare) []int32 {
	total := int32(0)
	for _, s := range shares {
		total += s.Spec
	}
	allowed := int32(0)
	if want > 0 {
		allowed = want + surge
	}
	toAdd := allowed - total
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := shares[a], shares[b]
		if x.Spec != y.Spec {
			return int(y.Spec - x.Spec)
		}
		older := byCreation(x.rs, y.rs)
		if toAdd > 0 {
			return -older
		}
		return older
	})
	sizes := make([]int32, len(shares))
	added := int32(0)
	for _, i := range order {
		s := shares[i]
		sizes[i] = s.Spec
		if toAdd == 0 || s.Spec == 0 || added == toAdd {
			continue
		}
		p := fraction(s, want, allowed, statusReplicas)
		if toAdd > 0 {
			p = min(p, toAdd-added)
		} else {
			p = max(p, toAdd-added)
		}
		sizes[i] += p
		added += p
	}
	if len(order) > 0 && toAdd != 0 {
		first := order[0]
		sizes[first] = max(sizes[first]+toAdd-added, 0)
	}
	return sizes
}

// fraction is how many replicas one ReplicaSet gains (or loses, negative) when the Deployment's maximum goes
// from the max-replicas it was sized for to allowed.
func fraction(s rsShare, want, allowed, statusReplicas int32) int32 {
	if want == 0 {
		return -s.Spec
	}
	before := s.MaxBefore
	if before == 0 {
		if before = statusReplicas; before == 0 {
			return 0
		}
	}
	return int32(math.Round(float64(s.Spec)*float64(allowed)/float64(before))) - s.Spec
}

// byCreation orders ReplicaSets oldest first, by name when created at the same second (upstream's
// ReplicaSetsByCreationTimestamp); nil ones compare equal.
func byCreation(a, b *appsv1.ReplicaSet) int {
	switch {
	case a == nil || b == nil:
		return 0
	case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
