package cri

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultCgroupRoot is where pods' cgroups go: the kubelet names a pod's cgroup parent relative ("pod<uid>"),
// and the runtime (cgroupfs driver) needs an absolute path.
const DefaultCgroupRoot = "/wheelhouse"

// cgroupParentAnnotation records a sandbox's absolute cgroup parent on the sandbox, so that RemovePodSandbox —
// after an agent restart too — removes it: containerd removes its containers' cgroups, not the pod's.
const cgroupParentAnnotation = "wheelhouse.dev/cgroup-parent"

// RunPodSandbox runs the sandbox with its cgroup parent under the cgroup root.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	return r.RuntimeService.RunPodSandbox(ctx, r.rooted(config), runtimeHandler)
}

// RemovePodSandbox removes the sandbox and then its pod's cgroup (in every hierarchy).
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	st, err := r.RuntimeService.PodSandboxStatus(ctx, podSandboxID, false)
	parent := st.GetStatus().GetAnnotations()[cgroupParentAnnotation]
	if err := ignoreNotFound(r.RuntimeService.RemovePodSandbox(ctx, podSandboxID)); err != nil {
		return err
	}
	if err != nil || parent == "" {
		return nil // already gone (NotFound), or not ours
	}
	if err := removeCgroup(parent); err != nil {
		r.log.Warn("the pod's cgroup could not be removed", "sandbox", podSandboxID, "cgroup", parent, "err", err)
	}
	return nil
}

// rooted is config with a relative cgroup parent made absolute under the root, recorded in an annotation.
func (r *Runtime) rooted(config *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	parent := config.GetLinux().GetCgroupParent()
	if parent == "" || filepath.IsAbs(parent) {
		return config
	}
	c := proto.Clone(config).(*runtimeapi.PodSandboxConfig)
	c.Linux.CgroupParent = filepath.Join(r.cgroupRoot, parent)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[cgroupParentAnnotation] = c.Linux.CgroupParent
	return c
}

// removeCgroup removes the cgroup at the absolute path in every mounted hierarchy (v1's controllers and v2's),
// with what is left below it (empty cgroups: the runtime removed its containers'). A missing one is not an error.
func removeCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := removeTree(filepath.Join(m, filepath.Clean("/"+path))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree removes the cgroup directory dir, its children first (cgroup directories are removed with rmdir,
// their files go with them).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cri: remove cgroup %s: %w", dir, err)
	}
	return nil
}

// cgroupMounts are the mount points of the cgroup (v1) and cgroup2 filesystems of this mount namespace.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if fs := fields[sep+1]; fs == "cgroup" || fs == "cgroup2" {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// RemoveOwnSandboxes stops and removes every pod sandbox this package made (those with its cgroup-parent
// annotation), with their containers and cgroups; others' sandboxes on the same runtime are left alone. It is for
// uninstalling a node (`wheelhouse agent cleanup`) and returns how many it removed.
func (r *Runtime) RemoveOwnSandboxes(ctx context.Context) (int, error) {
	list, err := r.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, sb := range list {
		if _, ours := sb.GetAnnotations()[cgroupParentAnnotation]; !ours {
			continue
		}
		if err := r.StopPodSandbox(ctx, sb.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.GetId(), err))
			continue
		}
		if err := r.RemovePodSandbox(ctx, sb.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.GetId(), err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
