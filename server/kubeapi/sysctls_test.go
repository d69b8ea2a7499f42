package kubeapi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInvalidSysctlsAreRefused is the conformance suite's "Sysctls should reject invalid sysctls" against the
// API: a pod with two invalid sysctl names among valid ones is refused with a 422 Invalid Status naming each
// invalid one (field spec.securityContext.sysctls[i].name) and none of the valid ones; nothing is stored.
func TestInvalidSysctlsAreRefused(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sysctl-test"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "test-container", Image: "busybox"}},
			SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
				{Name: "foo-", Value: "bar"}, {Name: "kernel.shmmax", Value: "100000000"},
				{Name: "safe-and-unsafe", Value: "100000000"}, {Name: "bar..", Value: "42"}}}}}
	_, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create: %v, want Invalid", err)
	}
	msg := err.Error()
	for _, want := range []string{`Invalid value: "foo-"`, `Invalid value: "bar.."`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %s", msg, want)
		}
	}
	for _, valid := range []string{"safe-and-unsafe", "kernel.shmmax"} {
		if strings.Contains(msg, valid) {
			t.Errorf("error %q names the valid sysctl %s", msg, valid)
		}
	}
	st := err.(apierrors.APIStatus).Status()
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, string(c.Type)+" "+c.Field)
	}
	if got, want := strings.Join(fields, ", "), "FieldValueInvalid spec.securityContext.sysctls[0].name, FieldValueInvalid spec.securityContext.sysctls[3].name"; got != want || st.Code != 422 {
		t.Errorf("status %d with causes %s, want 422 with %s", st.Code, got, want)
	}
	if _, err := cs.CoreV1().Pods("default").Get(t.Context(), "sysctl-test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod was stored: %v", err)
	}
}
