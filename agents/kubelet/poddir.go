package kubelet

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// A pod's directory, <pods dir>/<uid>, holds its volumes, its /etc/hosts, its containers' termination files and
// the volumes' ready markers. It goes when the pod does: when its worker has removed its sandboxes (worker.go's
// teardown), or, for a pod that went while the agent was down or whose teardown could not finish, when the
// periodic orphan collection finds neither a worker nor a sandbox for it (pods.go), as upstream's kubelet cleans
// up orphaned pod directories.
//
// Removal never reaches out of the directory: first every mount below it is unmounted (the tmpfs of a
// memory-backed emptyDir; anything else mounted there), deepest first, lazily when a plain unmount is refused;
// if a mount remains the directory stays, with an error. Then the directory is removed without following
// symlinks and without entering another filesystem: an entry on another device is an error, never descended.

// removePodDir unmounts everything below the directory of pod uid and removes it; a directory that is not there
// is no error.
func (v volumes) removePodDir(uid types.UID) error {
	name := string(uid)
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("pod UID %q is not a directory name", name)
	}
	dir := filepath.Join(v.podsDir, name)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := unmountBelow(dir); err != nil {
		return fmt.Errorf("pod directory %s: %w", dir, err)
	}
	return removeOneFilesystem(dir)
}

// unmountBelow unmounts every mount at or below dir in this mount namespace, deepest first.
func unmountBelow(dir string) error {
	real, err := filepath.EvalSymlinks(dir) // mountinfo names resolved paths
	if err != nil {
		return err
	}
	points, err := mountsBelow(real)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		// A plain unmount is refused while something holds the mount (EBUSY); detaching it still takes it out
		// of the directory at once, and the kernel frees it when the last user lets go.
		if err := unix.Unmount(p, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if left, err := mountsBelow(real); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("still mounted: %s", strings.Join(left, ", ")))
	}
	return nil
}

// mountsBelow lists the mount points at or below dir (a resolved path) in this mount namespace, deepest first;
// one mounted several times over is listed as often.
func mountsBelow(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /root /mount/point rw,noatime master:1 - ext3 /dev/root rw": the fifth field.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeOneFilesystem removes path and everything below it that is on path's filesystem, never following a
// symlink; an entry on another filesystem (a mount that appeared meanwhile) is left and makes it fail.
func removeOneFilesystem(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return removeOn(path, st, st.Sys().(*syscall.Stat_t).Dev)
}

func removeOn(path string, st fs.FileInfo, dev uint64) error {
	if st.Sys().(*syscall.Stat_t).Dev != dev {
		return fmt.Errorf("remove %s: on another filesystem, left alone", path)
	}
	if st.IsDir() {
		names, err := readNames(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, name := range names {
			child := filepath.Join(path, name)
			cst, err := os.Lstat(child)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if err := removeOn(child, cst, dev); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
