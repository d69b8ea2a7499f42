package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// TestOrphanedPodDirs: a pod deleted while the agent was down, and a pod directory no pod or sandbox owns, are
// removed by the restarted agent — their tmpfs unmounted, anything else mounted in them unmounted rather than
// emptied, symlinks removed rather than followed: what lies outside the pod's directory stays untouched.
func TestOrphanedPodDirs(t *testing.T) {
	e := newPodEnv(t)
	ctx := t.Context()
	pod := simple("gone", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		VolumeMounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/disk"}, {Name: "mem", MountPath: "/mem"}}})
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	e.create(pod)
	apitest.Eventually(t, "gone running", func() bool { return e.running("app") != "" })
	uid := e.pod("gone").UID
	podDir := filepath.Join(e.dir, "pods", string(uid))
	e.stop()

	// What the pod's directory leads to outside it: a file a symlink names, a directory bind-mounted into it.
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious")
	writeMode(t, precious, 0o644)
	if err := os.Symlink(precious, filepath.Join(podDir, "volumes", "disk", "link")); err != nil {
		t.Fatal(err)
	}
	bound := filepath.Join(podDir, "volumes", "disk", "bound")
	if err := os.Mkdir(bound, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(outside, bound, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	// A directory of a pod no one knows, with a tmpfs in it.
	stale := filepath.Join(e.dir, "pods", "stale-uid")
	staleVol := filepath.Join(stale, "volumes", "v")
	if err := os.MkdirAll(staleVol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", staleVol, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}

	if err := e.admin.CoreV1().Pods("default").Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Pods("default").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod is still in the API: %v", err)
	}
	e.start()
	apitest.Eventually(t, "both directories removed", func() bool {
		_, err1 := os.Lstat(podDir)
		_, err2 := os.Lstat(stale)
		return os.IsNotExist(err1) && os.IsNotExist(err2)
	})
	if got := must(mountsBelow(realPath(t, e.dir)))(t); len(got) != 0 {
		t.Errorf("still mounted: %q", got)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("a file outside the pod's directory went with it: %v", err)
	}
}

// TestRemovePodDirStaysInside: removal never enters another filesystem (a mount that appeared below the directory
// after its mounts were unmounted is an error, its files kept), and a UID that is not a plain name is refused.
func TestRemovePodDirStaysInside(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "pod", "volumes", "m")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	writeMode(t, filepath.Join(mnt, "kept"), 0o644)
	if err := removeOneFilesystem(filepath.Join(dir, "pod")); err == nil || !strings.Contains(err.Error(), "another filesystem") {
		t.Fatalf("removal across a mount: %v, want an error", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "kept")); err != nil {
		t.Fatalf("the other filesystem's file is gone: %v", err)
	}

	v := volumes{podsDir: filepath.Join(dir, "pods")}
	for _, uid := range []string{"../pod", "a/b", "..", ""} {
		if err := v.removePodDir(types.UID(uid)); err == nil {
			t.Errorf("UID %q: no error", uid)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "kept")); err != nil {
		t.Fatalf("a refused UID removed something: %v", err)
	}
}

// TestMountsBelowEscapedPath: mountinfo's escapes (a space is \040) are undone, so a tmpfs below a directory whose
// name has a space is found and unmounted.
func TestMountsBelowEscapedPath(t *testing.T) {
	dir := filepath.Join(realPath(t, t.TempDir()), "with space")
	mnt := filepath.Join(dir, "m\tx")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if got := must(mountsBelow(dir))(t); len(got) != 1 || got[0] != mnt {
		t.Fatalf("mounts below %q: %q, want %q", dir, got, mnt)
	}
	if err := unmountBelow(dir); err != nil {
		t.Fatal(err)
	}
	if got := must(mountsBelow(dir))(t); len(got) != 0 {
		t.Fatalf("still mounted: %q", got)
	}
}
