package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The two rollout strategies, as upstream's rolloutRolling and rolloutRecreate: each sync takes one step and the
// ReplicaSets' events bring the Deployment back for the next.

// rolling is one step of a rolling update: create the new ReplicaSet if missing (as large as maxSurge allows),
// else grow it, else shrink the old ones within maxUnavailable. moved tells whether a ReplicaSet was resized.
func (r *deploymentSync) rolling(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32, revision int64) (_ *appsv1.ReplicaSet, moved bool, err error) {
	surge, unavailable := maxSurge(r.dep), maxUnavailable(r.dep)
	olds := make([]rsCounts, len(old))
	oldTotal := int32(0)
	for i, rs := range old {
		olds[i] = rsCounts{Spec: ptrOr(rs.Spec.Replicas, 1), Available: rs.Status.AvailableReplicas}
		oldTotal += olds[i].Spec
	}
	if newRS == nil {
		size := max(min(want+surge-oldTotal, want), 0)
		if newRS, err = r.createNew(ctx, revision, size); err != nil {
			return nil, false, err
		}
	}
	cur := rsCounts{Spec: ptrOr(newRS.Spec.Replicas, 1), Available: newRS.Status.AvailableReplicas}
	newSpec, oldSpecs := planRolling(want, surge, unavailable, cur, olds)
	if newSpec != cur.Spec {
		return newRS, true, r.scale(ctx, newRS, newSpec, false)
	}
	for i, rs := range old {
		if oldSpecs[i] == olds[i].Spec {
			continue
		}
		if err := r.scale(ctx, rs, oldSpecs[i], false); err != nil {
			return newRS, true, err
		}
		moved = true
	}
	return newRS, moved, nil
}

// rsCounts is what one rolling-update step knows of a ReplicaSet: its desired replicas and how many are
// available.
type rsCounts struct{ Spec, Available int32 }

// planRolling is one step of a rolling update (old is ordered oldest first). If the new ReplicaSet can move it
// alone does: down to want, or up towards want with the total never above want+surge. Otherwise the old ones
// shrink, by at most total − (want−unavailable) − the new ReplicaSet's unavailable replicas: first their own
// unavailable replicas, oldest first, then available ones while more than want−unavailable stay available.
// Availability is counted at most up to each ReplicaSet's size, so a status that has not caught up with a
// scale-down is not taken for spare replicas.
func planRolling(want, surge, unavailable int32, newRS rsCounts, old []rsCounts) (newSpec int32, oldSpecs []int32) {
	total, oldTotal := newRS.Spec, int32(0)
	available := min(newRS.Available, newRS.Spec)
	oldSpecs = make([]int32, len(old))
	for i, o := range old {
		oldSpecs[i] = o.Spec
		total += o.Spec
		oldTotal += o.Spec
		available += min(o.Available, o.Spec)
	}
	switch {
	case newRS.Spec > want:
		return want, oldSpecs
	case newRS.Spec < want:
		if grow := min(want+surge-total, want-newRS.Spec); grow > 0 {
			return newRS.Spec + grow, oldSpecs
		}
	}
	newSpec = newRS.Spec
	minAvailable := want - unavailable
	maxScaledDown := total - minAvailable - (newRS.Spec - min(newRS.Available, newRS.Spec))
	if oldTotal == 0 || maxScaledDown <= 0 {
		return newSpec, oldSpecs
	}
	cleaned := int32(0)
	for i, o := range old {
		if cleaned >= maxScaledDown {
			break
		}
		if bad := o.Spec - min(o.Available, o.Spec); bad > 0 {
			n := min(maxScaledDown-cleaned, bad)
			oldSpecs[i] -= n
			cleaned += n
		}
	}
	spare := available - minAvailable
	for i := range old {
		if spare <= 0 {
			break
		}
		n := min(oldSpecs[i], spare)
		oldSpecs[i] -= n
		spare -= n
	}
	return newSpec, oldSpecs
}

// recreate is one step of a Recreate rollout: every old ReplicaSet to zero, then, once none of their pods is
// left (terminating ones included), the new ReplicaSet created or grown to want. moved tells whether the step
// is still under way (old ReplicaSets resized or their pods still there).
func (r *deploymentSync) recreate(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32, revision int64) (_ *appsv1.ReplicaSet, moved bool, err error) {
	for _, rs := range old {
		if ptrOr(rs.Spec.Replicas, 1) == 0 {
			continue
		}
		if err := r.scale(ctx, rs, 0, false); err != nil {
			return newRS, true, err
		}
		moved = true
	}
	if moved {
		return newRS, true, nil
	}
	for _, rs := range old {
		if rs.Status.Replicas > 0 || r.livePods[rs.UID] > 0 {
			return newRS, true, nil // the old pods' deletions bring us back
		}
	}
	if newRS == nil {
		newRS, err = r.createNew(ctx, revision, want)
		return newRS, false, err
	}
	return newRS, false, r.scale(ctx, newRS, want, false)
}

// rollingBounds resolves maxSurge (rounded up) and maxUnavailable (rounded down) against want, never both zero
// (upstream's ResolveFenceposts).
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

// maxSurge is how many replicas above spec.replicas a rolling update may run (0 for Recreate).
func maxSurge(dep *appsv1.Deployment) int32 {
	if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0
	}
	s, _ := rollingBounds(dep, ptrOr(dep.Spec.Replicas, 1))
	return s
}

// maxUnavailable is how many of spec.replicas a rolling update may leave unavailable, at most all of them (0
// for Recreate).
func maxUnavailable(dep *appsv1.Deployment) int32 {
	want := ptrOr(dep.Spec.Replicas, 1)
	if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType || want == 0 {
		return 0
	}
	_, u := rollingBounds(dep, want)
	return min(u, want)
}
