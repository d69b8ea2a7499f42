package shim

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOwnCgroupView: after ownCgroupView a thread is in a cgroup namespace of its own — rooted at its cgroups, so
// that each reads as "/" in /proc/self/cgroup — and sees cgroup2 read-only at the target (in a mount namespace
// of its own, as the container's init has). Runs as root.
func TestOwnCgroupView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (namespaces and mounts), as the process runtime does")
	}
	target := t.TempDir()
	type result struct {
		before, after []string // the cgroup paths of /proc/thread-self/cgroup
		fsType        int64
		mkdir         error
		err           error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is left locked: it ends with the goroutine, taking its namespaces with it.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if r.err = unix.Unshare(unix.CLONE_NEWNS); r.err != nil {
			return
		}
		if r.err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); r.err != nil {
			return
		}
		if r.before, r.err = threadCgroups(); r.err != nil {
			return
		}
		if r.err = ownCgroupView(target); r.err != nil {
			return
		}
		if r.after, r.err = threadCgroups(); r.err != nil {
			return
		}
		var st unix.Statfs_t
		if r.err = unix.Statfs(target, &st); r.err != nil {
			return
		}
		r.fsType = int64(st.Type)
		r.mkdir = os.Mkdir(filepath.Join(target, "child"), 0o755)
		_ = unix.Unmount(target, unix.MNT_DETACH)
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, p := range r.after {
		if p != "/" {
			t.Errorf("cgroups in the new namespace %q, want each the namespace's root /", r.after)
			break
		}
	}
	if !slices.ContainsFunc(r.before, func(p string) bool { return p != "/" }) {
		t.Logf("this process is in root cgroups (%q): the namespace's rooting is not visible here", r.before)
	}
	if r.fsType != unix.CGROUP2_SUPER_MAGIC {
		t.Errorf("filesystem type at the target %#x, want cgroup2", r.fsType)
	}
	if !errors.Is(r.mkdir, unix.EROFS) {
		t.Errorf("mkdir in the view: %v, want EROFS (read-only)", r.mkdir)
	}
}

// threadCgroups are the cgroup paths of the calling thread, one per hierarchy.
func threadCgroups() ([]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			out = append(out, parts[2])
		}
	}
	return out, nil
}
