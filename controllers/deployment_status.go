package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// status writes replicas, updated, ready, available and unavailable counts, the revision and the Available and
// Progressing conditions: ReplicaSetUpdated (its update time refreshed whenever the rollout moves),
// NewReplicaSetAvailable once complete, ProgressDeadlineExceeded (False) when it has not moved for
// progressDeadlineSeconds, DeploymentPaused while paused. recheck is when the deadline falls.
func (r *deploymentSync) status(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, want int32) (recheck time.Duration, err error) {
	dep := r.dep
	st := appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, CollisionCount: dep.Status.CollisionCount}
	all := append(slices.Clone(old), newRS)
	asked := int32(0) // the replicas the ReplicaSets ask for
	for _, rs := range all {
		if rs == nil {
			continue
		}
		asked += ptrOr(rs.Spec.Replicas, 1)
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	// As upstream: unavailable is what the ReplicaSets ask for but do not have available (surge included).
	st.UnavailableReplicas = max(asked-st.AvailableReplicas, 0)
	now := metav1.NewTime(r.now)
	avail := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse,
		Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."}
	if st.AvailableReplicas >= want-maxUnavailable(dep) {
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
