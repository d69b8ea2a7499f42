package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// emptyDir volumes, as upstream's plugin (pkg/volume/emptydir) makes them: a directory of mode 0777 whatever the
// agent's umask, so that a container running as any user can write into it; with medium Memory a tmpfs mounted
// on that directory (the agent runs as root), sized like upstream's — the volume's sizeLimit when it is below
// what the pod could use at most, else the pod's memory limit when every container declares one (or the pod
// does), else the node's allocatable memory. The tmpfs's root keeps tmpfs's own mode, 1777. The pod's fsGroup
// then owns the volume (volumeownership.go, read-write).
//
// A volume is set up once: a marker under the pod's plugins directory says it is ready, so that the refresh every
// volumeRefresh and an agent restart leave alone what the pod has done to it since (its modes, its files). A
// memory-backed volume whose tmpfs is gone (the node rebooted) is mounted again, as upstream's. Hugepages media
// are not supported: the pod waits with a FailedMount event saying so.
//
// The tmpfs is unmounted when the pod's directory is removed (poddir.go).

const emptyDirPerm = fs.FileMode(0o777)

// setUpEmptyDir makes the emptyDir volume vol of pod ready at dir.
func (v volumes) setUpEmptyDir(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) error {
	medium := vol.EmptyDir.Medium
	if medium != corev1.StorageMediumDefault && medium != corev1.StorageMediumMemory {
		return &envError{fmt.Sprintf("emptyDir medium %q is not supported on this node (the default medium and Memory are)", medium)}
	}
	ready := v.emptyDirReady(pod, vol.Name)
	if _, err := os.Stat(ready); err == nil {
		switch mounted, err := isTmpfsMount(dir); {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		case err == nil && (medium == corev1.StorageMediumDefault || mounted):
			return nil
		}
	}
	if err := os.MkdirAll(dir, emptyDirPerm); err != nil {
		return err
	}
	if err := os.Chmod(dir, emptyDirPerm); err != nil { // MkdirAll's mode is masked by the umask
		return err
	}
	if medium == corev1.StorageMediumMemory {
		if err := v.mountTmpfs(ctx, pod, vol, dir); err != nil {
			return err
		}
	}
	if g := fsGroupOf(pod); g != nil {
		if err := setVolumeOwnership(dir, *g, false); err != nil {
			return fmt.Errorf("applying fsGroup %d: %w", *g, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(ready), 0o750); err != nil {
		return err
	}
	return os.WriteFile(ready, nil, 0o600)
}

// emptyDirReady is the marker file of an emptyDir volume that has been set up.
func (v volumes) emptyDirReady(pod *corev1.Pod, name string) string {
	return filepath.Join(v.podsDir, string(pod.UID), "plugins", "empty-dir", name)
}

// mountTmpfs mounts a tmpfs sized for the pod on dir, unless one is there already.
func (v volumes) mountTmpfs(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) error {
	if mounted, err := isTmpfsMount(dir); err != nil || mounted {
		return err
	}
	alloc, err := v.o.allocatable(ctx)
	if err != nil {
		return err
	}
	size := tmpfsSize(pod, vol.EmptyDir, alloc.Memory())
	opts := ""
	if size.Sign() > 0 {
		opts = "size=" + strconv.FormatInt(size.Value(), 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mount a tmpfs at %s: %w", dir, err)
	}
	return nil
}

// tmpfsSize is the size of a memory-backed emptyDir as upstream's kubelet computes it: the node's allocatable
// memory, lowered to the pod's memory limit (the limit its cgroup gets, which exists only when every init and
// regular container declares one or the pod itself does), lowered to the volume's sizeLimit; a bound that is
// zero or above the current size does not count. Zero (a node without allocatable memory, as upstream's rule
// has it) means tmpfs's own default, half the machine's memory.
func tmpfsSize(pod *corev1.Pod, src *corev1.EmptyDirVolumeSource, allocatable *resource.Quantity) resource.Quantity {
	size := allocatable.DeepCopy()
	lower := func(q resource.Quantity) {
		if q.Sign() > 0 && q.Cmp(size) <= 0 {
			size = q
		}
	}
	if podMemoryLimited(pod) {
		lower(resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceMemory])
	}
	if src.SizeLimit != nil {
		lower(*src.SizeLimit)
	}
	return size
}

// podMemoryLimited reports whether the pod's cgroup gets a memory limit: every init and regular container has
// one, or the pod has a pod-level one.
func podMemoryLimited(pod *corev1.Pod) bool {
	if r := pod.Spec.Resources; r != nil && !r.Limits.Memory().IsZero() {
		return true
	}
	for _, c := range allContainers(pod) {
		if c.Resources.Limits.Memory().IsZero() {
			return false
		}
	}
	return true
}

// isTmpfsMount reports whether dir is the root of a tmpfs mount: a tmpfs that is not its parent's filesystem (a
// data directory that is itself on a tmpfs does not count).
func isTmpfsMount(dir string) (bool, error) {
	var fsst unix.Statfs_t
	if err := unix.Statfs(dir, &fsst); err != nil {
		return false, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if fsst.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: filepath.Dir(dir), Err: err}
	}
	return st.Dev != parent.Dev, nil
}
