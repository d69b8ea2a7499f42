package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestVolumesOnProcessRuntime runs the conformance suite's non-root volume checks end to end, through the API and
// the process runtime: a container running as user 1001 with fsGroup 123 sees its memory-backed emptyDir as a
// tmpfs of mode rwxrwsrwt and group 123, writes into it, and reads a secret of defaultMode 0440 as -r--r----- of
// group 123 (the EmptyDir "(non-root,0644,tmpfs)" and Secrets "as non-root with defaultMode and fsGroup set"
// tests). The container reports what it saw in its termination message.
func TestVolumesOnProcessRuntime(t *testing.T) {
	rt := processRuntime(t)
	e := newPodEnvConfigured(t, func(_ *podEnv, c *PodsConfig) { c.Runtime, c.Images, c.RuntimeName = rt, nil, "process" })
	ctx := t.Context()
	if _, err := e.admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data: map[string][]byte{"data-1": []byte("value-1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The process runtime mounts volumes at their paths on the node's filesystem: user 1001 must reach them.
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	vol, sec := filepath.Join(base, "test-volume"), filepath.Join(base, "etc-secret-volume")
	script := `set -e
stat -f -c '%T' "$VOL"
stat -c '%A %g' "$VOL"
echo mount-tester new file > "$VOL/test-file"
stat -c '%A %g' "$VOL/test-file"
stat -L -c '%A %g' "$SEC/data-1"
cat "$SEC/data-1"`
	sizeLimit := resource.MustParse("10Mi")
	pod := simple("nonroot", corev1.RestartPolicyNever, corev1.Container{Name: "app", Image: "busybox",
		Command:                []string{"sh", "-c", "(" + script + ") >" + filepath.Join(base, "termination-log") + " 2>&1"},
		Env:                    []corev1.EnvVar{{Name: "PATH", Value: "/usr/sbin:/usr/bin:/sbin:/bin"}, {Name: "VOL", Value: vol}, {Name: "SEC", Value: sec}},
		TerminationMessagePath: filepath.Join(base, "termination-log"),
		VolumeMounts:           []corev1.VolumeMount{{Name: "test-volume", MountPath: vol}, {Name: "secret-volume", MountPath: sec}}})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1001), FSGroup: ptr.To[int64](123)}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "test-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &sizeLimit}}},
		{Name: "secret-volume", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o440)}}},
	}
	e.create(pod)
	p := e.until("finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}, "nonroot")
	got := p.Status.ContainerStatuses[0].State.Terminated
	want := "tmpfs\ndrwxrwsrwt 123\n-rw-r--r-- 123\n-r--r----- 123\nvalue-1"
	if p.Status.Phase != corev1.PodSucceeded || got.Message != want {
		t.Fatalf("the container (exit %d) saw:\n%s\nwant:\n%s", got.ExitCode, got.Message, want)
	}
}
