package kubelet

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

// TestVolumesOnContainerd: the volumes the kubelet sets up reach a real containerd's containers as they are on the
// node — a memory-backed emptyDir is a tmpfs that user 1001 with fsGroup 123 writes into, a secret of defaultMode
// 0440 is readable through the group and mounted read-only — and removing the pod's directory afterwards
// unmounts the tmpfs.
func TestVolumesOnContainerd(t *testing.T) {
	rt := containerdNode(t)
	ctx := t.Context()
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Data: map[string][]byte{"data-1": []byte("value-1")}})
	podsDir := filepath.Join(t.TempDir(), "pods")
	t.Cleanup(func() { _ = unmountBelow(podsDir) })
	v := volumes{o: objects{cs: cs, node: "n1"}, podsDir: podsDir, tokens: newTokenCache(time.Now)}
	mounts := []corev1.VolumeMount{{Name: "test-volume", MountPath: "/test-volume"}, {Name: "secret-volume", MountPath: "/etc/secret-volume"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "volumes", Namespace: "default", UID: "uid-volumes"},
		Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1001), FSGroup: ptr.To[int64](123)},
			Volumes: []corev1.Volume{
				{Name: "test-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "secret-volume", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o440)}}},
			},
			Containers: []corev1.Container{
				{Name: "writer", Image: containerdtest.ServerImage, VolumeMounts: mounts,
					Command: []string{"/podserver", "write", "/test-volume/test-file", "/etc/secret-volume/planted"}},
				{Name: "reader", Image: containerdtest.ServerImage, VolumeMounts: mounts,
					Command: []string{"/podserver", "read", "/test-volume/test-file", "/etc/secret-volume/data-1", "/proc/self/mountinfo"}},
			}}}
	if err := v.setUp(ctx, pod, "", "", map[string]string{}); err != nil {
		t.Fatal(err)
	}
	sbCfg := sandboxConfig(pod, 0, t.TempDir())
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		_ = rt.StopPodSandbox(context.Background(), sb)
		_ = rt.RemovePodSandbox(context.Background(), sb)
	})
	out := map[string]string{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		m, err := v.mounts(ctx, pod, c, nil, "", "")
		if err != nil {
			t.Fatal(err)
		}
		id, err := rt.CreateContainer(ctx, sb, containerConfig(pod, c, 0, nil, m), sbCfg)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", c.Name, err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer %s: %v", c.Name, err)
		}
		out[c.Name] = containerOutput(t, rt, id)
	}
	if want := "wrote /test-volume/test-file\n"; !strings.HasPrefix(out["writer"], want) {
		t.Errorf("the writer printed %q, want %q first", out["writer"], want)
	}
	if !strings.Contains(out["writer"], "read-only file system") {
		t.Errorf("the writer could write into the secret volume: %q", out["writer"])
	}
	if want := "written\nvalue-1"; !strings.HasPrefix(out["reader"], want) {
		t.Errorf("the reader printed %q, want %q first", out["reader"], want)
	}
	tmpfs := false
	for _, line := range strings.Split(out["reader"], "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/test-volume" {
			_, after, _ := strings.Cut(line, " - ")
			tmpfs = strings.HasPrefix(after, "tmpfs ")
		}
	}
	if !tmpfs {
		t.Errorf("/test-volume is not a tmpfs in the container:\n%s", out["reader"])
	}

	if err := rt.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := v.removePodDir(pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := must(mountsBelow(realPath(t, filepath.Dir(podsDir))))(t); len(got) != 0 {
		t.Errorf("still mounted after the pod's directory was removed: %q", got)
	}
}
