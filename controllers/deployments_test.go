package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
)

// runControllers starts every controller on d until the test ends.
func runControllers(t *testing.T, d Deps) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, d) }()
	t.Cleanup(func() { cancel(); <-done })
}

// fakeKubelet marks every pod carrying the label ready=yes Ready (as of the clock's now), until the test
// ends: the part of a kubelet a rollout needs.
func fakeKubelet(t *testing.T, cs kubernetes.Interface, clk *clocktesting.FakeClock) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "ready=yes"})
			if err == nil {
				for _, p := range pods.Items {
					if podReady(&p) || p.DeletionTimestamp != nil {
						continue
					}
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady,
						Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(clk.Now())})
					_, _ = cs.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func deployment(name string, replicas int32, image string, ready bool) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	if ready {
		labels["ready"] = "yes"
	}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
}

// replicaSetsOf lists a Deployment's ReplicaSets by revision.
func replicaSetsOf(t *testing.T, cs kubernetes.Interface, name string) map[string]appsv1.ReplicaSet {
	t.Helper()
	list, err := cs.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range list.Items {
		out[rs.Annotations[revisionAnnotation]] = rs
	}
	return out
}

// readyPods counts a Deployment's live, ready pods and all its live pods.
func readyPods(t *testing.T, cs kubernetes.Interface, name string) (ready, live int) {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if podReady(&p) {
			ready++
		}
	}
	return ready, live
}

func progressing(dep *appsv1.Deployment) appsv1.DeploymentCondition {
	if c := findCondition(dep.Status.Conditions, appsv1.DeploymentProgressing); c != nil {
		return *c
	}
	return appsv1.DeploymentCondition{}
}

func complete(t *testing.T, cs kubernetes.Interface, name string, want int32) func() bool {
	return func() bool {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && dep.Status.ObservedGeneration == dep.Generation && dep.Status.UpdatedReplicas == want &&
			dep.Status.Replicas == want && dep.Status.AvailableReplicas == want && progressing(dep).Reason == "NewReplicaSetAvailable"
	}
}

// startWithKubelet runs the controllers on a fake clock, with a fake kubelet that runs their pods, and returns
// cluster c1's admin client and the clock.
func startWithKubelet(t *testing.T) (kubernetes.Interface, *clocktesting.FakeClock) {
	d := newDeps(t)
	clk := clocktesting.NewFakeClock(time.Now())
	d.Clock = clk
	runControllers(t, d)
	cs := admin(t, d, "c1")
	fakeKubelet(t, cs, clk)
	return cs, clk
}

func setImage(t *testing.T, cs kubernetes.Interface, name, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":%q}]}}}}`, image)
	if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDeploymentRollingUpdateAndRollback(t *testing.T) {
	cs, _ := startWithKubelet(t)
	dep := deployment("web", 4, "nginx:1", true)
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	dep.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}
	dep.Annotations = map[string]string{"kubernetes.io/change-cause": "first"}
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first rollout complete", complete(t, cs, "web", 4))
	sets := replicaSetsOf(t, cs, "web")
	first, ok := sets["1"]
	if len(sets) != 1 || !ok {
		t.Fatalf("want one ReplicaSet at revision 1, have %v", slices.Collect(maps.Keys(sets)))
	}
	if h := first.Labels[templateHashLabel]; h == "" || first.Name != "web-"+h || first.Spec.Selector.MatchLabels[templateHashLabel] != h {
		t.Fatalf("ReplicaSet %s: want name, label and selector from the template hash, have labels %v", first.Name, first.Labels)
	}
	if first.Annotations["kubernetes.io/change-cause"] != "first" {
		t.Fatalf("change-cause not copied to the ReplicaSet: %v", first.Annotations)
	}
	got, _ := cs.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
	if got.Annotations[revisionAnnotation] != "1" {
		t.Fatalf("deployment revision annotation %q, want 1", got.Annotations[revisionAnnotation])
	}

	// A new image rolls out with maxUnavailable=0 and maxSurge=1: ready pods never drop below 4 and the
	// ReplicaSets never ask for more than 5. (Live pods may briefly number 6, as upstream: the new set's pod can
	// be created before the old set's deletion lands.)
	setImage(t, cs, "web", "nginx:2")
	eventually(t, "the second rollout complete", func() bool {
		ready, _ := readyPods(t, cs, "web")
		var asked int32
		for _, rs := range replicaSetsOf(t, cs, "web") {
			asked += *rs.Spec.Replicas
		}
		if ready < 4 || asked > 5 {
			t.Fatalf("during the rollout: %d ready pods, %d replicas asked for (want ≥4 ready, ≤5 asked)", ready, asked)
		}
		return complete(t, cs, "web", 4)()
	})
	sets = replicaSetsOf(t, cs, "web")
	if len(sets) != 2 || *sets["1"].Spec.Replicas != 0 || *sets["2"].Spec.Replicas != 4 ||
		sets["2"].Spec.Template.Spec.Containers[0].Image != "nginx:2" {
		t.Fatalf("after the update want revision 1 at 0 and revision 2 (nginx:2) at 4, have %d sets", len(sets))
	}

	// Rollback (what `kubectl rollout undo` writes: the old template) reuses the first ReplicaSet as revision 3.
	setImage(t, cs, "web", "nginx:1")
	eventually(t, "the rollback complete", complete(t, cs, "web", 4))
	sets = replicaSetsOf(t, cs, "web")
	back, ok := sets["3"]
	if len(sets) != 2 || !ok || back.Name != first.Name || *back.Spec.Replicas != 4 ||
		back.Annotations["deployment.kubernetes.io/revision-history"] != "1" {
		t.Fatalf("after the rollback want %s at revision 3 (history 1) with 4 replicas, have %v", first.Name, slices.Collect(maps.Keys(sets)))
	}

	// kubectl scale through the scale subresource.
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(t.Context(), "web",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scaled to 2", complete(t, cs, "web", 2))
}

func TestDeploymentRecreatePauseAndHistory(t *testing.T) {
	cs, _ := startWithKubelet(t)
	dep := deployment("db", 2, "pg:1", true)
	dep.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	one := int32(1)
	dep.Spec.RevisionHistoryLimit = &one
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first rollout complete", complete(t, cs, "db", 2))

	// Recreate: the old pods are all gone before any new one exists.
	setImage(t, cs, "db", "pg:2")
	eventually(t, "the recreate complete", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			t.Fatal(err)
		}
		images := map[string]bool{}
		for _, p := range pods.Items {
			images[p.Spec.Containers[0].Image] = true
		}
		if images["pg:1"] && images["pg:2"] {
			t.Fatal("old and new pods at once under Recreate")
		}
		return complete(t, cs, "db", 2)()
	})

	// Paused: a template change makes no ReplicaSet until resumed.
	if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), "db", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Progressing reports DeploymentPaused", func() bool {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "db", metav1.GetOptions{})
		return err == nil && progressing(dep).Reason == "DeploymentPaused" && dep.Status.ObservedGeneration == dep.Generation
	})
	setImage(t, cs, "db", "pg:3")
	eventually(t, "the paused deployment observed", func() bool {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "db", metav1.GetOptions{})
		return err == nil && dep.Status.ObservedGeneration == dep.Generation
	})
	// No ReplicaSet for the paused template (revision 1 may be trimmed meanwhile: paused, as upstream, history
	// is still cleaned up, and both earlier revisions are now old).
	for rev, rs := range replicaSetsOf(t, cs, "db") {
		if rev == "3" || rs.Spec.Template.Spec.Containers[0].Image == "pg:3" {
			t.Fatalf("a paused deployment made a ReplicaSet: revision %s (%s)", rev, rs.Name)
		}
	}
	if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), "db", types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed rollout complete", complete(t, cs, "db", 2))
	// revisionHistoryLimit=1: revision 1 was deleted, 2 kept (empty), 3 current.
	eventually(t, "history trimmed to one old ReplicaSet", func() bool {
		sets := replicaSetsOf(t, cs, "db")
		_, has2 := sets["2"]
		_, has3 := sets["3"]
		return len(sets) == 2 && has2 && has3
	})
}

func TestDeploymentMinReadySecondsAndProgressDeadline(t *testing.T) {
	cs, clk := startWithKubelet(t)

	// minReadySeconds: ready pods count as available only once the clock has moved on by that much.
	slow := deployment("slow", 2, "app:1", true)
	slow.Spec.MinReadySeconds = 30
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), slow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 ready, 0 available", func() bool {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "slow", metav1.GetOptions{})
		return err == nil && dep.Status.ReadyReplicas == 2 && dep.Status.AvailableReplicas == 0
	})
	clk.Step(31 * time.Second)
	eventually(t, "available after minReadySeconds", complete(t, cs, "slow", 2))

	// progressDeadlineSeconds: pods that never become ready stall the rollout, reported as
	// ProgressDeadlineExceeded once the deadline passes.
	stuck := deployment("stuck", 2, "app:1", false)
	deadline := int32(60)
	stuck.Spec.ProgressDeadlineSeconds = &deadline
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), stuck, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.Deployment {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "stuck", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return dep
	}
	eventually(t, "ReplicaSetUpdated", func() bool {
		dep := get()
		return progressing(dep).Reason == "ReplicaSetUpdated" && dep.Status.Replicas == 2
	})
	clk.Step(61 * time.Second)
	eventually(t, "ProgressDeadlineExceeded", func() bool {
		c := progressing(get())
		return c.Reason == "ProgressDeadlineExceeded" && c.Status == corev1.ConditionFalse
	})
}

// TestRollingPlanKeepsAvailability: with maxUnavailable=0 a rolling update never takes ready replicas below
// desired, never runs more than desired+maxSurge pods, and always finishes, however pods become ready.
func TestRollingPlanKeepsAvailability(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := rapid.Int32Range(1, 20).Draw(t, "want")
		surge := rapid.Int32Range(1, 5).Draw(t, "surge")
		nOld := rapid.IntRange(1, 3).Draw(t, "old")
		// A ReplicaSet scaled down loses its not-ready pods first; new pods start not ready.
		type set struct{ spec, pods, ready int32 }
		apply := func(s *set, spec int32) {
			s.spec = spec
			for s.pods > spec {
				if s.ready == s.pods {
					s.ready--
				}
				s.pods--
			}
			s.pods = spec
		}
		// Before the update everything runs, ready, in the old sets.
		old := make([]set, nOld)
		left := want
		for i := range old {
			n := left
			if i < nOld-1 {
				n = rapid.Int32Range(0, left).Draw(t, "oldSize")
			}
			old[i] = set{n, n, n}
			left -= n
		}
		cur := set{}
		for step := 0; ; step++ {
			if step > 500 {
				t.Fatalf("no progress after 500 steps: new %+v old %+v", cur, old)
			}
			counts := make([]rsCounts, len(old))
			for i, o := range old {
				counts[i] = rsCounts{Spec: o.spec, Available: o.ready}
			}
			newSpec, oldSpecs := planRolling(want, surge, 0, rsCounts{Spec: cur.spec, Available: cur.ready}, counts)
			apply(&cur, newSpec)
			pods, ready := cur.pods, cur.ready
			for i := range old {
				apply(&old[i], oldSpecs[i])
				pods += old[i].pods
				ready += old[i].ready
			}
			if ready < want {
				t.Fatalf("step %d: %d ready < %d desired", step, ready, want)
			}
			if pods > want+surge {
				t.Fatalf("step %d: %d pods > %d desired + %d surge", step, pods, want, surge)
			}
			if cur.ready == want && pods == want {
				return
			}
			// Some of the new pods become ready.
			cur.ready += rapid.Int32Range(0, cur.pods-cur.ready).Draw(t, "becomeReady")
		}
	})
}

// TestDeploymentAdoptsOrphanReplicaSets: a ReplicaSet created before its Deployment, matching its selector, is
// adopted (a controller reference to the Deployment) and counts in its revisions — the new ReplicaSet is one past
// the adopted one's revision, and the old one is scaled down — as the conformance suite's RollingUpdateDeployment
// test expects; a ReplicaSet of the Deployment whose labels stop matching is released.
func TestDeploymentAdoptsOrphanReplicaSets(t *testing.T) {
	cs, _ := startWithKubelet(t)
	old := deployment("web", 1, "httpd:1", true) // its template, as a bare ReplicaSet
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-orphan", Namespace: "default", Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{revisionAnnotation: "3546343826724305832"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(int32(1)), Selector: old.Spec.Selector, Template: old.Spec.Template}}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(t.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep, err := cs.AppsV1().Deployments("default").Create(t.Context(), deployment("web", 1, "nginx:1", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rollout over the adopted ReplicaSet complete", complete(t, cs, "web", 1))
	sets := replicaSetsOf(t, cs, "web")
	adopted, ok := sets["3546343826724305832"]
	if !ok || len(sets) != 2 {
		t.Fatalf("ReplicaSets by revision: %v, want the adopted one and revision 3546343826724305833", slices.Collect(maps.Keys(sets)))
	}
	if ref := metav1.GetControllerOf(&adopted); ref == nil || ref.UID != dep.UID {
		t.Fatalf("the orphan was not adopted: %v", adopted.OwnerReferences)
	}
	if _, ok := sets["3546343826724305833"]; !ok {
		t.Fatalf("the new ReplicaSet is not at the next revision: %v", slices.Collect(maps.Keys(sets)))
	}
	eventually(t, "the adopted ReplicaSet scaled down", func() bool {
		got, err := cs.AppsV1().ReplicaSets("default").Get(t.Context(), "web-orphan", metav1.GetOptions{})
		return err == nil && ptrOr(got.Spec.Replicas, 1) == 0
	})
	// Relabelled out of the selector, it is released.
	if _, err := cs.AppsV1().ReplicaSets("default").Patch(t.Context(), "web-orphan", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app":"elsewhere"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relabelled ReplicaSet released", func() bool {
		got, err := cs.AppsV1().ReplicaSets("default").Get(t.Context(), "web-orphan", metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(got) == nil
	})
}

// specOf is a ReplicaSet's spec.replicas, -1 for a missing ReplicaSet (a zero value from replicaSetsOf).
func specOf(rs appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return -1
	}
	return *rs.Spec.Replicas
}

func scaleDeployment(t *testing.T, cs kubernetes.Interface, name string, n int32) {
	t.Helper()
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(t.Context(), name,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: autoscalingv1.ScaleSpec{Replicas: n}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDeploymentProportionalScaling follows the conformance suite's proportional scaling test: scaled from 10 to
// 30 while its rollout is stuck (maxSurge 3, maxUnavailable 2; the new pods never become ready, so 8 old and 5
// new), a Deployment spreads the extra replicas over its ReplicaSets in proportion — 8 → 20 and 5 → 13 — instead
// of growing the new one, and they stay so; scaled back to 10, they shrink the same way to 8 and 5. Each
// ReplicaSet records the size it was scaled for (desired- and max-replicas), as upstream's.
func TestDeploymentProportionalScaling(t *testing.T) {
	cs, _ := startWithKubelet(t)
	dep := deployment("web", 10, "httpd:1", true)
	surge, unavailable := intstr.FromInt32(3), intstr.FromInt32(2)
	dep.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first rollout complete", complete(t, cs, "web", 10))
	if first := replicaSetsOf(t, cs, "web")["1"]; first.Annotations[desiredReplicasAnnotation] != "10" || first.Annotations[maxReplicasAnnotation] != "13" {
		t.Fatalf("first ReplicaSet's sizing annotations %v, want desired 10 and max 13", first.Annotations)
	}

	// A template whose pods never become ready (no ready=yes label).
	if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), "web", types.MergePatchType,
		[]byte(`{"spec":{"template":{"metadata":{"labels":{"ready":null}},"spec":{"containers":[{"name":"c","image":"httpd:404"}]}}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sizes := func() (first, second appsv1.ReplicaSet) {
		sets := replicaSetsOf(t, cs, "web")
		return sets["1"], sets["2"]
	}
	// settled waits until both ReplicaSets are asked for n1 and n2 replicas, run them, and the Deployment's
	// status shows that state (so the sync that saw it has run), then checks they were not moved further.
	settled := func(what string, n1, n2 int32) {
		t.Helper()
		eventually(t, what, func() bool {
			first, second := sizes()
			if specOf(first) != n1 || first.Status.AvailableReplicas != n1 || specOf(second) != n2 || second.Status.Replicas != n2 {
				return false
			}
			dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
			return err == nil && dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas == n1 &&
				dep.Status.Replicas == n1+n2 && dep.Status.UnavailableReplicas == n2 // upstream's: asked − available
		})
		if first, second := sizes(); specOf(first) != n1 || specOf(second) != n2 {
			t.Fatalf("%s: the ReplicaSets moved on to %d and %d", what, specOf(first), specOf(second))
		}
	}
	settled("the rollout stuck at 8 old and 5 new", 8, 5)

	scaleDeployment(t, cs, "web", 30)
	settled("scaled in proportion to 20 old and 13 new", 20, 13)
	for _, rs := range []appsv1.ReplicaSet{replicaSetsOf(t, cs, "web")["1"], replicaSetsOf(t, cs, "web")["2"]} {
		if rs.Annotations[desiredReplicasAnnotation] != "30" || rs.Annotations[maxReplicasAnnotation] != "33" {
			t.Fatalf("ReplicaSet %s sizing annotations %v, want desired 30 and max 33", rs.Name, rs.Annotations)
		}
	}

	scaleDeployment(t, cs, "web", 10)
	settled("scaled down in proportion to 8 old and 5 new", 8, 5)
	for _, rs := range []appsv1.ReplicaSet{replicaSetsOf(t, cs, "web")["1"], replicaSetsOf(t, cs, "web")["2"]} {
		if rs.Annotations[desiredReplicasAnnotation] != "10" || rs.Annotations[maxReplicasAnnotation] != "13" {
			t.Fatalf("ReplicaSet %s sizing annotations %v, want desired 10 and max 13", rs.Name, rs.Annotations)
		}
	}
}

// TestDeploymentRollover follows the conformance suite's rollover test: a Deployment (maxUnavailable 0, maxSurge
// 1, minReadySeconds 10) adopts a ready ReplicaSet made before it, starts a rollout that cannot finish (its pods
// never become ready), and is updated again before it does. The stuck ReplicaSet goes first (its pod is not
// available), the adopted one only once the newest one's pod has been ready for minReadySeconds: checked as the
// suite checks it, never more than 2 replicas asked for and, once the adopted ReplicaSet is scaled down, never
// fewer than 1 available. (The suite failed this way when orphans were not adopted: the Deployment did not count
// the adopted ReplicaSet's pod, so nothing was available.) Both old ReplicaSets end at zero.
func TestDeploymentRollover(t *testing.T) {
	cs, clk := startWithKubelet(t)
	rsLabels := map[string]string{"app": "roll", "pod": "orphan"}
	orphan := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "roll-controller", Namespace: "default", Labels: rsLabels},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "roll", "pod": "orphan", "ready": "yes"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agnhost:1"}}}}}}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(t.Context(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getRS := func(name string) *appsv1.ReplicaSet {
		rs, err := cs.AppsV1().ReplicaSets("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	eventually(t, "the orphan's pod ready", func() bool { return getRS("roll-controller").Status.ReadyReplicas == 1 })

	dep := deployment("roll", 1, "redis:nonexistent", false)
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	dep.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}
	dep.Spec.MinReadySeconds = 10
	created, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	getDep := func() *appsv1.Deployment {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "roll", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return dep
	}
	var stuck string
	eventually(t, "both ReplicaSets running 1 replica", func() bool {
		dep := getDep()
		first, ok := replicaSetsOf(t, cs, "roll")["1"]
		if !ok || dep.Status.UpdatedReplicas < 1 || dep.Annotations[revisionAnnotation] != "1" {
			return false
		}
		stuck = first.Name
		adopted := getRS("roll-controller")
		return specOf(first) == 1 && first.Status.Replicas == 1 && specOf(*adopted) == 1 && adopted.Status.Replicas == 1
	})
	if ref := metav1.GetControllerOf(getRS("roll-controller")); ref == nil || ref.UID != created.UID {
		t.Fatalf("the orphan was not adopted: %v", getRS("roll-controller").OwnerReferences)
	}

	// Roll over to a template whose pods become ready.
	if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), "roll", types.MergePatchType,
		[]byte(`{"spec":{"template":{"metadata":{"labels":{"ready":"yes"}},"spec":{"containers":[{"name":"c","image":"agnhost:1"}]}}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stepped := false
	eventually(t, "the rollover complete, never below 1 available", func() bool {
		dep := getDep()
		list, err := cs.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var newRS *appsv1.ReplicaSet
		var asked int32
		checkable := true
		for i, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != dep.UID {
				continue
			}
			if rs.Spec.Template.Spec.Containers[0].Image == "agnhost:1" && rs.Name != "roll-controller" {
				newRS = &list.Items[i]
			} else if specOf(rs) == 0 {
				continue
			}
			asked += specOf(rs)
			if rs.Spec.Selector.MatchLabels[templateHashLabel] == "" {
				checkable = false // as the suite: the rolling check waits for the ReplicaSets it can tell apart
			}
		}
		if newRS == nil || dep.Annotations[revisionAnnotation] != "2" {
			return false
		}
		if checkable && asked > 2 {
			t.Fatalf("%d replicas asked for, more than 1 + maxSurge 1", asked)
		}
		if checkable && dep.Status.AvailableReplicas < 1 {
			t.Fatalf("total pods available: %d, less than the min required: 1", dep.Status.AvailableReplicas)
		}
		if !stepped && newRS.Status.ReadyReplicas == 1 && newRS.Status.AvailableReplicas == 0 {
			clk.Step(11 * time.Second) // past minReadySeconds
			stepped = true
		}
		return complete(t, cs, "roll", 1)()
	})
	for _, name := range []string{"roll-controller", stuck} {
		if rs := getRS(name); specOf(*rs) != 0 || rs.Status.Replicas != 0 {
			t.Fatalf("old ReplicaSet %s: %d asked, %d running; want 0", name, specOf(*rs), rs.Status.Replicas)
		}
	}
}

// TestDeploymentRecreateWaitsForTerminatingPods: under Recreate the new ReplicaSet is made only once the old
// pods are gone, not merely asked to go (upstream's oldPodsRunning): pods on a node terminate gracefully, and
// while they do, though their ReplicaSet already counts none, no new ReplicaSet or pod exists.
func TestDeploymentRecreateWaitsForTerminatingPods(t *testing.T) {
	cs, _ := startWithKubelet(t)
	dep := deployment("db", 2, "pg:1", true)
	dep.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	dep.Spec.Template.Spec.NodeName = "n1" // bound pods: deleted gracefully, so they linger as terminating
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first rollout complete", complete(t, cs, "db", 2))
	setImage(t, cs, "db", "pg:2")
	pods := func() []corev1.Pod {
		list, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	// Wait until the old pods are terminating, their ReplicaSet counts none, and the Deployment has synced since
	// (its status counts no old replica either): the point where a new ReplicaSet would have been made.
	eventually(t, "the old pods terminating and the Deployment counting none of them", func() bool {
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "db", metav1.GetOptions{})
		if err != nil || dep.Status.ObservedGeneration != dep.Generation || dep.Status.Replicas != dep.Status.UpdatedReplicas ||
			replicaSetsOf(t, cs, "db")["1"].Status.Replicas != 0 {
			return false
		}
		for _, p := range pods() {
			if p.Spec.Containers[0].Image == "pg:1" && p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	if _, ok := replicaSetsOf(t, cs, "db")["2"]; ok {
		t.Fatal("a new ReplicaSet while the old pods are still terminating")
	}
	for _, p := range pods() {
		if p.Spec.Containers[0].Image != "pg:1" {
			t.Fatalf("pod %s (%s) beside terminating old pods", p.Name, p.Spec.Containers[0].Image)
		}
	}
	// The kubelet's part: the old pods finish and go.
	for _, p := range pods() {
		if err := cs.CoreV1().Pods("default").Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the recreate complete", complete(t, cs, "db", 2))
	if rs := replicaSetsOf(t, cs, "db")["2"]; specOf(rs) != 2 || rs.Spec.Template.Spec.Containers[0].Image != "pg:2" {
		t.Fatalf("revision 2: %d replicas of %v, want 2 of pg:2", specOf(rs), rs.Spec.Template.Spec.Containers)
	}
}

// TestDeploymentHistoryTrimmedOnceComplete: as upstream's cleanupDeployment, old ReplicaSets beyond
// revisionHistoryLimit are deleted only once the rollout is complete — an emptied ReplicaSet stays, for a
// rollback, while the rollout that emptied it is under way — and then all of them go (limit 0).
func TestDeploymentHistoryTrimmedOnceComplete(t *testing.T) {
	cs, clk := startWithKubelet(t)
	dep := deployment("hist", 1, "app:1", true)
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	dep.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}
	dep.Spec.RevisionHistoryLimit = ptrTo(int32(0))
	dep.Spec.MinReadySeconds = 10 // nothing becomes available until the clock moves
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first pod ready", func() bool { return replicaSetsOf(t, cs, "hist")["1"].Status.ReadyReplicas == 1 })
	clk.Step(11 * time.Second)
	eventually(t, "the first rollout complete", complete(t, cs, "hist", 1))

	// Revision 2 never becomes ready; revision 3 does, and empties revision 2 at once (its pod is not available).
	patchTemplate := func(body string) {
		t.Helper()
		if _, err := cs.AppsV1().Deployments("default").Patch(t.Context(), "hist", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchTemplate(`{"spec":{"template":{"metadata":{"labels":{"ready":null}},"spec":{"containers":[{"name":"c","image":"app:404"}]}}}}`)
	eventually(t, "revision 2 running", func() bool { return replicaSetsOf(t, cs, "hist")["2"].Status.Replicas == 1 })
	patchTemplate(`{"spec":{"template":{"metadata":{"labels":{"ready":"yes"}},"spec":{"containers":[{"name":"c","image":"app:3"}]}}}}`)
	eventually(t, "revision 2 emptied, revision 3 ready but not yet available", func() bool {
		sets := replicaSetsOf(t, cs, "hist")
		dep, err := cs.AppsV1().Deployments("default").Get(t.Context(), "hist", metav1.GetOptions{})
		if err != nil || dep.Status.ObservedGeneration != dep.Generation {
			return false
		}
		second, ok := sets["2"]
		if !ok {
			t.Fatal("revision 2 deleted while the rollout is under way")
		}
		return specOf(second) == 0 && second.Status.Replicas == 0 && sets["3"].Status.ReadyReplicas == 1 &&
			dep.Status.Replicas == 2 && dep.Status.UpdatedReplicas == 1 // the sync after revision 2 emptied ran
	})
	if _, ok := replicaSetsOf(t, cs, "hist")["2"]; !ok {
		t.Fatal("revision 2 deleted while the rollout is under way")
	}
	clk.Step(11 * time.Second)
	eventually(t, "the rollout complete and every old ReplicaSet deleted", func() bool {
		sets := replicaSetsOf(t, cs, "hist")
		_, has3 := sets["3"]
		return complete(t, cs, "hist", 1)() && len(sets) == 1 && has3
	})
}
