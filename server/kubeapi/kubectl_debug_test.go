package kubeapi

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubectltest"
)

// TestKubectlDebug: a real `kubectl debug` adds an ephemeral container to a pod through
// pods/ephemeralcontainers, targeting one of its containers (--attach=false: no kubelet here to run it).
func TestKubectlDebug(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubectl sends credentials over TLS only.
	tlsSrv := httptest.NewUnstartedServer(env.srv.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: c1, context: {cluster: c1, user: admin, namespace: default}}]
current-context: c1
`, tlsSrv.URL+Prefix("c1"), adminToken)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectltest.Binary(t), "--kubeconfig", kubeconfig, "debug", "target", "--image=busybox",
		"--container=debugger", "--target=app", "--attach=false", "--stdin", "--tty")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl debug: %v\n%s", err, out.String())
	}
	pod, err := pods.Get(t.Context(), "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.EphemeralContainers) != 1 || pod.Generation != 2 {
		t.Fatalf("after kubectl debug: ephemeral containers %+v, generation %d\n%s", pod.Spec.EphemeralContainers, pod.Generation, out.String())
	}
	ec := pod.Spec.EphemeralContainers[0]
	if ec.Name != "debugger" || ec.Image != "busybox" || ec.TargetContainerName != "app" || !ec.Stdin || !ec.TTY {
		t.Errorf("the ephemeral container %+v", ec)
	}
}
