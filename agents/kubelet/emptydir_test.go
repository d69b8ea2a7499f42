package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// TestTmpfsSize: a memory-backed emptyDir is sized by upstream's rule — the node's allocatable memory, lowered to
// the pod's memory limit when its cgroup gets one, lowered to the volume's sizeLimit; a bound above the current
// size or zero does not count.
func TestTmpfsSize(t *testing.T) {
	limited := func(mem string) corev1.Container {
		return corev1.Container{Name: "c" + mem, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}}
	}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name        string
		init, main  []corev1.Container
		podLimit    string
		sizeLimit   *resource.Quantity
		allocatable string
		want        string
	}{
		{name: "allocatable without limits", main: []corev1.Container{{Name: "a"}}, allocatable: "8Gi", want: "8Gi"},
		{name: "sizeLimit below allocatable", main: []corev1.Container{{Name: "a"}}, sizeLimit: q("10Mi"), allocatable: "8Gi", want: "10Mi"},
		{name: "sizeLimit above allocatable", main: []corev1.Container{{Name: "a"}}, sizeLimit: q("16Gi"), allocatable: "8Gi", want: "8Gi"},
		{name: "every container limited: their sum", main: []corev1.Container{limited("64Mi"), limited("32Mi")}, allocatable: "8Gi", want: "96Mi"},
		{name: "an init container above the sum", init: []corev1.Container{limited("256Mi")}, main: []corev1.Container{limited("64Mi")},
			allocatable: "8Gi", want: "256Mi"},
		{name: "one container without a limit: no pod limit", main: []corev1.Container{limited("64Mi"), {Name: "free"}}, allocatable: "8Gi", want: "8Gi"},
		{name: "pod-level limit", main: []corev1.Container{{Name: "a"}}, podLimit: "128Mi", allocatable: "8Gi", want: "128Mi"},
		{name: "sizeLimit above the pod's limit", main: []corev1.Container{limited("64Mi")}, sizeLimit: q("1Gi"), allocatable: "8Gi", want: "64Mi"},
		{name: "sizeLimit below the pod's limit", main: []corev1.Container{limited("64Mi")}, sizeLimit: q("10Mi"), allocatable: "8Gi", want: "10Mi"},
		{name: "no allocatable memory: tmpfs's default", main: []corev1.Container{{Name: "a"}}, sizeLimit: q("10Mi"), allocatable: "0", want: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.main}}
			if tc.podLimit != "" {
				pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(tc.podLimit)}}
			}
			got := tmpfsSize(pod, &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tc.sizeLimit}, q(tc.allocatable))
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
				t.Errorf("size %s, want %s", got.String(), want.String())
			}
		})
	}
}

// TestEmptyDirVolumes: an emptyDir is a directory of mode 0777 whatever the umask (upstream's; the conformance
// suite's "volume on default medium should have the correct mode" and every non-root writer need it); with
// medium Memory it is a tmpfs mounted on that directory, sized by the sizeLimit or the pod's memory limit. An agent
// restart neither resets what the pod did to its volumes nor mounts a second tmpfs; deleting the pod unmounts the
// tmpfs and removes the pod's directory.
func TestEmptyDirVolumes(t *testing.T) {
	defer unix.Umask(unix.Umask(0o022))
	e := newPodEnv(t)
	ctx := t.Context()
	if _, err := e.admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenMi := resource.MustParse("10Mi")
	mount := func(name string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: "/v/" + name} }
	pod := simple("ed", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		VolumeMounts: []corev1.VolumeMount{mount("disk"), mount("mem"), mount("podsized"), mount("marker")}})
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tenMi}}},
		{Name: "podsized", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		// Set up last: once it shows a new version after the restart, the emptyDirs have been set up again.
		{Name: "marker", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "marker"}}}},
	}
	e.create(pod)
	apitest.Eventually(t, "ed running", func() bool { return e.running("app") != "" })
	mounts := map[string]string{}
	for _, m := range e.rt.config("app").Mounts {
		mounts[m.ContainerPath] = m.HostPath
	}
	disk, mem, podsized := mounts["/v/disk"], mounts["/v/mem"], mounts["/v/podsized"]

	if got := ownerOf(t, disk); got.mode != 0o777 {
		t.Errorf("the default-medium emptyDir has mode %v, want 0777", got.mode)
	}
	if tmpfs, err := isTmpfsMount(disk); err != nil || tmpfs {
		t.Errorf("the default-medium emptyDir is a tmpfs mount (%v)", err)
	}
	for dir, want := range map[string]int64{mem: 10 << 20, podsized: 64 << 20} {
		if tmpfs, err := isTmpfsMount(dir); err != nil || !tmpfs {
			t.Fatalf("%s is not a tmpfs mount (%v)", dir, err)
		}
		if got := tmpfsBytes(t, dir); got != want {
			t.Errorf("%s: tmpfs of %d bytes, want %d", filepath.Base(dir), got, want)
		}
		if got := ownerOf(t, dir); got.mode.Perm() != 0o777 {
			t.Errorf("%s: the tmpfs's root has mode %v, want rwxrwxrwx", filepath.Base(dir), got.mode)
		}
	}

	// What the pod does to its volumes survives an agent restart, which mounts no second tmpfs.
	if err := os.Chmod(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, "kept"), []byte("in memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.stop()
	cm, err := e.admin.CoreV1().ConfigMaps("default").Get(ctx, "marker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := e.admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start()
	apitest.Eventually(t, "the volumes set up by the new agent", func() bool {
		b, _ := os.ReadFile(filepath.Join(mounts["/v/marker"], "v"))
		return string(b) == "2"
	})
	if got := ownerOf(t, disk); got.mode != 0o700 {
		t.Errorf("the restarted agent reset the emptyDir's mode to %v", got.mode)
	}
	if b, err := os.ReadFile(filepath.Join(mem, "kept")); err != nil || string(b) != "in memory" {
		t.Errorf("the tmpfs's file after the restart: %q, %v", b, err)
	}
	if got := must(mountsBelow(realPath(t, e.dir)))(t); len(got) != 2 {
		t.Errorf("mounts below the data dir after the restart: %q, want the two tmpfs once each", got)
	}

	// Deleting the pod unmounts its tmpfs and removes its directory.
	podDir := filepath.Join(e.dir, "pods", string(e.pod("ed").UID))
	if err := e.admin.CoreV1().Pods("default").Delete(ctx, "ed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "the pod removed", func() bool {
		_, err := e.admin.CoreV1().Pods("default").Get(ctx, "ed", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	apitest.Eventually(t, "its directory removed", func() bool {
		_, err := os.Lstat(podDir)
		return os.IsNotExist(err)
	})
	if got := must(mountsBelow(realPath(t, e.dir)))(t); len(got) != 0 {
		t.Errorf("still mounted after the pod's deletion: %q", got)
	}
}

// TestEmptyDirHugePages: a hugepages medium is not supported; the pod's containers wait with
// CreateContainerConfigError saying so.
func TestEmptyDirHugePages(t *testing.T) {
	e := newPodEnv(t)
	pod := simple("huge", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		VolumeMounts: []corev1.VolumeMount{{Name: "pages", MountPath: "/pages"}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "pages", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}}}
	e.create(pod)
	e.until("CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
			strings.Contains(cs[0].State.Waiting.Message, `emptyDir medium "HugePages" is not supported on this node`)
	}, "huge")
}

// tmpfsBytes is the size of the filesystem at dir.
func tmpfsBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize
}

// realPath is path with its symlinks resolved, as mountinfo names it.
func realPath(t *testing.T, path string) string {
	t.Helper()
	return must(filepath.EvalSymlinks(path))(t)
}
