package shim

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
	"unsafe"

	"golang.org/x/sys/unix"
)

// A container's confinement, applied by init and exec on the thread that then executes the command (namespaces,
// capabilities, no_new_privs and seccomp filters all belong to a thread until execve makes it the process):
//
//  1. mounts, in init only (exec joins the mount namespace init prepared): masked paths, read-only paths, then
//     with ReadonlyRootfs every other mount read-only;
//  2. the bounding set drops every capability the container does not keep, while the thread still has
//     CAP_SETPCAP;
//  3. no_new_privs, then the seccomp filter, while the thread still has CAP_SYS_ADMIN (a filter needs it or
//     no_new_privs);
//  4. the user switch (setThreadUser): a non-root user loses its permitted and effective capabilities there;
//  5. root keeps, as permitted and effective, only what the container keeps; nobody keeps inheritable or
//     ambient capabilities, so that after execve root has the kept capabilities and any other user none
//     (setuid binaries and file capabilities are bounded by the bounding set, or by no_new_privs).

// confineMounts applies step 1 in the calling thread's mount namespace; keep are the container's own mount
// targets, which ReadonlyRootfs leaves as their Mount says.
func confineMounts(sec Security, keep []string) error {
	for _, p := range sec.MaskedPaths {
		if err := maskPath(p); err != nil {
			return err
		}
	}
	for _, p := range sec.ReadonlyPaths {
		if err := readonlyPath(p); err != nil {
			return err
		}
	}
	if sec.ReadonlyRootfs {
		return readonlyRootfs(keep)
	}
	return nil
}

// maskPath hides p: an empty read-only tmpfs over a directory, /dev/null over anything else. A path the node
// does not have is left alone.
func maskPath(p string) error {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	if st.IsDir() {
		err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY, "size=0k")
	} else {
		err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	return nil
}

// readonlyPath makes p, and whatever is mounted below it, read-only in this mount namespace.
func readonlyPath(p string) error {
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s read-only: %w", p, err)
	}
	return makeReadOnly(p, true)
}

// readonlyRootfs makes every mount of this mount namespace read-only but those of the API filesystems (/proc,
// /dev, /sys, which containers keep writable where their own rules allow) and those at or below keep.
func readonlyRootfs(keep []string) error {
	points, err := mountPoints()
	if err != nil {
		return err
	}
	skip := append([]string{"/proc", "/dev", "/sys"}, keep...)
	for _, mp := range points {
		if slices.ContainsFunc(skip, func(k string) bool { return within(mp, k) }) {
			continue
		}
		// A mount point that went away, or that this thread cannot reach, holds nothing to write to.
		if err := makeReadOnly(mp, false); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("read-only root filesystem: %w", err)
		}
	}
	return nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// mountPoints are the mount points of the calling thread's mount namespace, parents first.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the fifth field, octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountPoint(fields[4]))
	}
	return out, sc.Err()
}

// unescapeMountPoint undoes the kernel's \ooo escapes of spaces, tabs, newlines and backslashes.
func unescapeMountPoint(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

// makeReadOnly makes the mount at p read-only (with the mounts below it when recursive); without
// mount_setattr (Linux before 5.12) only the mount at p is.
func makeReadOnly(p string, recursive bool) error {
	flags := uint(unix.AT_SYMLINK_NOFOLLOW)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(unix.AT_FDCWD, p, flags, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		return remountReadOnly(p)
	}
	if err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	return nil
}

// remountReadOnly remounts the bind mount at p read-only, keeping its nosuid, nodev and noexec.
func remountReadOnly(p string) error {
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	var sfs unix.Statfs_t
	if unix.Statfs(p, &sfs) == nil {
		flags |= uintptr(sfs.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	}
	if err := unix.Mount("", p, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", p, err)
	}
	return nil
}

// confineThread applies steps 2 to 5 to the calling thread, switching it to u (nil: it stays root).
func confineThread(sec Security, u *User) error {
	if sec.Capabilities != nil {
		if err := dropBoundingSet(*sec.Capabilities); err != nil {
			return err
		}
	}
	if sec.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("set no_new_privs: %w", err)
		}
	}
	if sec.Seccomp != nil {
		if err := loadSeccomp(sec.Seccomp, sec.SeccompArch); err != nil {
			return err
		}
	}
	if u != nil {
		if err := setThreadUser(*u); err != nil {
			return err
		}
	}
	if sec.Capabilities != nil {
		return setCapabilities(*sec.Capabilities)
	}
	return nil
}

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}

// dropBoundingSet removes from the calling thread's bounding set every capability not in keep.
func dropBoundingSet(keep []int) error {
	kept := map[int]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := 0; c <= lastCap(); c++ {
		if kept[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// setCapabilities leaves the calling thread, as permitted and effective, the capabilities of keep it still
// has (none after a switch to a non-root user), and no inheritable or ambient ones.
func setCapabilities(keep []int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	var want [2]uint32
	for _, c := range keep {
		if c >= 0 && c < 64 {
			want[c/32] |= 1 << (c % 32)
		}
	}
	for i := range data {
		data[i].Permitted &= want[i]
		data[i].Effective = data[i].Permitted
		data[i].Inheritable = 0
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// loadSeccomp installs on the calling thread a filter that refuses the system calls deny with EPERM, and any
// call of another architecture (or, on x86-64, of the x32 ABI) too, since its numbers mean other calls.
func loadSeccomp(deny []uint32, arch uint32) error {
	const (
		offNR   = 0 // seccomp_data.nr
		offArch = 4 // seccomp_data.arch
		x32Bit  = 0x40000000
		errPerm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	if len(deny) > 250 {
		return fmt.Errorf("seccomp: %d denied calls, more than a filter of short jumps holds", len(deny))
	}
	n := uint8(len(deny))
	// Layout: arch check, load nr, x32 check, one comparison per denied call, allow, deny.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: arch, Jt: 0, Jf: n + 3},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offNR},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32Bit, Jt: n + 1, Jf: 0},
	}
	for i, nr := range deny {
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nr, Jt: n - uint8(i), Jf: 0})
	}
	prog = append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: errPerm})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("load seccomp filter: %w", e)
	}
	return nil
}
