package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// Volume ownership, as upstream's SetVolumeOwnership (pkg/volume/volume_linux.go) gives a pod's fsGroup access to
// its volumes: every file and directory of the volume gets the group fsGroup (symlinks themselves, never what
// they point to), files gain g+rw (g+r in a read-only volume) and directories g+rwx (g+rx) and setgid, so that
// what the pod creates later inherits the group. The modes only gain bits: a file written 0400 becomes 0440
// (read-only) or 0660 (read-write).
//
// Upstream's read-only volumes, in this sense, are secret, configMap, downwardAPI and projected (their plugins'
// attributes say ReadOnly); emptyDir is read-write. Those five plugins pass no fsGroupChangePolicy
// (OnRootMismatch applies to persistent volumes only): each applies ownership whenever it writes — an emptyDir
// once when it is made, a file set at every new version before the version is switched in — and a file set
// skipped because its root already matched would leave the new version's files without the group.

const (
	ownershipRW   = fs.FileMode(0o660)
	ownershipRO   = fs.FileMode(0o440)
	ownershipExec = fs.FileMode(0o110)
)

// fsGroupOf is the pod's fsGroup, nil without one.
func fsGroupOf(pod *corev1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// setVolumeOwnership applies fsGroup to everything under dir (dir included), children before their directory.
// It never follows a symlink: a link is re-grouped itself and its target left alone, inside the volume or not.
// Every change that failed is in the error; the walk goes on past them.
func setVolumeOwnership(dir string, fsGroup int64, readOnly bool) error {
	mask := ownershipRW
	if readOnly {
		mask = ownershipRO
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return ownTree(dir, st, int(fsGroup), mask)
}

func ownTree(path string, st fs.FileInfo, gid int, mask fs.FileMode) error {
	var errs []error
	if st.IsDir() {
		names, err := readNames(path)
		if err != nil {
			return err
		}
		for _, name := range names {
			child := filepath.Join(path, name)
			cst, err := os.Lstat(child)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, ownTree(child, cst, gid, mask))
		}
	}
	return errors.Join(append(errs, ownOne(path, st, gid, mask))...)
}

// ownOne re-groups one entry and adds the mask's bits to its mode. A symlink keeps its mode: chmod would reach
// through it and change its target, which the volume's writer (a defaultMode, an item's mode) or the node owns.
func ownOne(path string, st fs.FileInfo, gid int, mask fs.FileMode) error {
	if err := os.Lchown(path, -1, gid); err != nil {
		return fmt.Errorf("set group %d: %w", gid, err)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if st.IsDir() {
		mask |= fs.ModeSetgid | ownershipExec
	}
	return os.Chmod(path, st.Mode()|mask)
}

// readNames lists a directory's entries unsorted (the walk's order does not matter and sorting costs).
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
