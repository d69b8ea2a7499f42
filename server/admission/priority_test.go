package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// classes is an in-memory set of PriorityClasses (the lookup is the watch cache in the server; this test is
// about the decision).
type classes map[string]*schedulingv1.PriorityClass

func (c classes) PriorityClass(_ context.Context, _, name string) (*schedulingv1.PriorityClass, bool, error) {
	pc, ok := c[name]
	return pc, ok, nil
}

func (c classes) GlobalDefault(context.Context, string) (*schedulingv1.PriorityClass, error) {
	var best *schedulingv1.PriorityClass
	for _, pc := range c {
		if pc.GlobalDefault && (best == nil || pc.Value < best.Value) {
			best = pc
		}
	}
	return best, nil
}

func TestPriority(t *testing.T) {
	never := corev1.PreemptNever
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	batch := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 5, PreemptionPolicy: &never}
	dflt := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "dflt"}, Value: 7, GlobalDefault: true}
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name      string
		classes   classes
		pod       corev1.PodSpec
		op        string
		wantPrio  int32
		wantClass string
		wantPol   corev1.PreemptionPolicy
		wantErr   string
	}{
		{name: "named class", classes: classes{"high": high}, pod: corev1.PodSpec{PriorityClassName: "high"}, wantPrio: 1000, wantClass: "high", wantPol: corev1.PreemptLowerPriority},
		{name: "class with Never", classes: classes{"batch": batch}, pod: corev1.PodSpec{PriorityClassName: "batch"}, wantPrio: 5, wantClass: "batch", wantPol: corev1.PreemptNever},
		{name: "no class, no default", classes: classes{}, wantPrio: 0, wantPol: corev1.PreemptLowerPriority},
		{name: "global default", classes: classes{"dflt": dflt, "high": high}, wantPrio: 7, wantClass: "dflt", wantPol: corev1.PreemptLowerPriority},
		{name: "unknown class", classes: classes{}, pod: corev1.PodSpec{PriorityClassName: "nope"}, wantErr: "no PriorityClass with name nope was found"},
		{name: "explicit priority disagrees", classes: classes{"high": high}, pod: corev1.PodSpec{PriorityClassName: "high", Priority: i32(5)},
			wantErr: "the integer value of priority (5) must not be provided in pod spec"},
		{name: "explicit priority agrees", classes: classes{"high": high}, pod: corev1.PodSpec{PriorityClassName: "high", Priority: i32(1000)}, wantPrio: 1000, wantClass: "high", wantPol: corev1.PreemptLowerPriority},
		{name: "updates untouched", classes: classes{}, op: "UPDATE", pod: corev1.PodSpec{PriorityClassName: "nope"}, wantClass: "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: tc.pod}
			op := tc.op
			if op == "" {
				op = "CREATE"
			}
			err := Priority{Classes: tc.classes}.Admit(context.Background(), kubeapi.AdmissionRequest{Operation: op, Cluster: "c1", Object: pod})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !apierrors.IsForbidden(err) {
					t.Fatalf("err %v, want Forbidden containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if op == "UPDATE" {
				if pod.Spec.Priority != nil || pod.Spec.PriorityClassName != tc.wantClass {
					t.Fatalf("an update was changed: %+v", pod.Spec)
				}
				return
			}
			if pod.Spec.Priority == nil || *pod.Spec.Priority != tc.wantPrio || pod.Spec.PriorityClassName != tc.wantClass ||
				pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != tc.wantPol {
				t.Fatalf("spec after admission: priority %v class %q policy %v", pod.Spec.Priority, pod.Spec.PriorityClassName, pod.Spec.PreemptionPolicy)
			}
		})
	}
}
