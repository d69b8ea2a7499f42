package kubeapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// phaseAdmission adds a toleration to every pod written (as DefaultTolerationSeconds does) and records which
// pods each phase saw.
type phaseAdmission struct {
	mu                sync.Mutex
	admitted, checked []string
}

var admittedToleration = corev1.Toleration{Key: "example.com/admitted", Operator: corev1.TolerationOpExists,
	Effect: corev1.TaintEffectNoExecute}

// seen records a write of a pod (not of a subresource) in list and returns the pod.
func (a *phaseAdmission) seen(list *[]string, req AdmissionRequest) (*corev1.Pod, bool) {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok || req.Subresource != "" {
		return nil, false
	}
	a.mu.Lock()
	*list = append(*list, req.Operation+" "+pod.Name)
	a.mu.Unlock()
	return pod, true
}

func (a *phaseAdmission) Admit(_ context.Context, req AdmissionRequest) error {
	pod, ok := a.seen(&a.admitted, req)
	if !ok || slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == admittedToleration.Key }) {
		return nil
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, admittedToleration)
	return nil
}

func (a *phaseAdmission) Validate(_ context.Context, req AdmissionRequest) error {
	if pod, ok := a.seen(&a.checked, req); ok && pod.Labels["deny"] == "yes" {
		return apierrors.NewForbidden(podsGR, pod.Name, errDenied)
	}
	return nil
}

var (
	podsGR    = corev1.SchemeGroupVersion.WithResource("pods").GroupResource()
	errDenied = errors.New("labelled deny")
)

// TestAdmissionPhases: mutating admission runs before validation — what it adds is validated with the rest, and
// an update that drops it (pod tolerations may only be added to) gets it back instead of being refused, as
// upstream's DefaultTolerationSeconds makes the conformance suite's pod updates pass — and before the generation
// is decided; validating admission runs only on objects validation accepted.
func TestAdmissionPhases(t *testing.T) {
	adm := &phaseAdmission{}
	env := newTestEnv(t, func(c *Config) { c.Admission = adm })
	pods := env.client(t, "c1").CoreV1().Pods("default")
	ctx := t.Context()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Spec.Tolerations) != 1 || created.Generation != 1 {
		t.Fatalf("created: tolerations %v generation %d, want the admitted one and 1", created.Spec.Tolerations, created.Generation)
	}

	// Replacing the tolerations with a new one: the admitted one comes back, so this only adds one.
	created.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	updated, err := pods.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update dropping the admitted toleration: %v", err)
	}
	if len(updated.Spec.Tolerations) != 2 || updated.Generation != 2 {
		t.Fatalf("updated: tolerations %v generation %d, want gpu + admitted and 2", updated.Spec.Tolerations, updated.Generation)
	}

	// Dropping only the admitted toleration changes nothing once admission is done: no new generation.
	updated.Spec.Tolerations = updated.Spec.Tolerations[:1]
	again, err := pods.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Spec.Tolerations) != 2 || again.Generation != 2 {
		t.Fatalf("after a no-op update: tolerations %v generation %d, want 2 and 2", again.Spec.Tolerations, again.Generation)
	}

	// An invalid pod reaches mutating admission, never validating admission.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}
	if _, err := pods.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("pod without containers: %v, want Invalid", err)
	}
	// Validating admission refuses, and nothing is stored.
	denied := pod.DeepCopy()
	denied.Name, denied.Labels = "denied", map[string]string{"deny": "yes"}
	if _, err := pods.Create(ctx, denied, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("denied pod: %v, want Forbidden", err)
	}
	if _, err := pods.Get(ctx, "denied", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("denied pod stored: %v", err)
	}
	adm.mu.Lock()
	defer adm.mu.Unlock()
	wantAdmitted := []string{"CREATE p", "UPDATE p", "UPDATE p", "CREATE bad", "CREATE denied"}
	wantChecked := []string{"CREATE p", "UPDATE p", "UPDATE p", "CREATE denied"}
	if !slices.Equal(adm.admitted, wantAdmitted) || !slices.Equal(adm.checked, wantChecked) {
		t.Fatalf("admitted %v checked %v, want %v and %v", adm.admitted, adm.checked, wantAdmitted, wantChecked)
	}
}
