package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrPipeFD is the descriptor on which init and exec report a setup failure
// to their parent; it is close-on-exec, so EOF without data means the
// command was executed.
const ErrPipeFD = 3

// runInit sets up the container process and execs its command; it returns
// only on failure (after reporting it on the error pipe).
func runInit(dir string) error {
	runtime.LockOSThread()
	errPipe := os.NewFile(ErrPipeFD, "errpipe")
	unix.CloseOnExec(ErrPipeFD)
	err := initContainer(dir)
	fmt.Fprint(errPipe, err.Error())
	return err
}

func initContainer(dir string) error {
	var spec Spec
	if err := ReadJSON(filepath.Join(dir, SpecFile), &spec); err != nil {
		return err
	}
	if err := joinCgroups(spec.CgroupProcs); err != nil {
		return err
	}
	if spec.NetNS != "" {
		if err := setnsPath(spec.NetNS, unix.CLONE_NEWNET); err != nil {
			return err
		}
	}
	if spec.IPCNS != "" {
		if err := setnsPath(spec.IPCNS, unix.CLONE_NEWIPC); err != nil {
			return err
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	// Slave: the host's unmounts (of sandbox namespaces, say) still reach
	// us, our mounts never reach the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if spec.CgroupNS {
		// Before the container's own mounts, so that one of its own at /sys/fs/cgroup (a hostPath) wins.
		_ = ownCgroupView(cgroupMountPoint)
	}
	var targets []string
	for _, m := range spec.Mounts {
		if err := bindMount(m); err != nil {
			return err
		}
		targets = append(targets, m.Target)
	}
	if err := confineMounts(spec.Security, targets); err != nil {
		return err
	}
	return execCommand(spec, spec.Args)
}

// runExec enters the namespaces of the running container process pid and
// execs args; it returns only on failure.
func runExec(dir, pid string, args []string) error {
	runtime.LockOSThread()
	errPipe := os.NewFile(ErrPipeFD, "errpipe")
	unix.CloseOnExec(ErrPipeFD)
	err := execInContainer(dir, pid, args)
	fmt.Fprint(errPipe, err.Error())
	return err
}

func execInContainer(dir, pid string, args []string) error {
	var spec Spec
	if err := ReadJSON(filepath.Join(dir, SpecFile), &spec); err != nil {
		return err
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return fmt.Errorf("bad pid %q", pid)
	}
	if err := joinCgroups(spec.CgroupProcs); err != nil {
		return err
	}
	// Joining a mount namespace needs a private fs_struct; Go threads share one.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	netns, ipcns, mntns := "/proc/"+pid+"/ns/net", "/proc/"+pid+"/ns/ipc", "/proc/"+pid+"/ns/mnt"
	mntFD, err := unix.Open(mntns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", mntns, err)
	}
	if err := setnsPath(netns, unix.CLONE_NEWNET); err != nil {
		return err
	}
	if err := setnsPath(ipcns, unix.CLONE_NEWIPC); err != nil {
		return err
	}
	if err := unix.Setns(mntFD, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("setns mnt: %w", err)
	}
	if spec.CgroupNS {
		// The container's cgroup namespace too (/proc/self/cgroup as the container sees it); best effort, as
		// ownCgroupView: the files under /sys/fs/cgroup are the container's anyway, through its mount.
		_ = setnsPath("/proc/"+pid+"/ns/cgroup", unix.CLONE_NEWCGROUP)
	}
	return execCommand(spec, args)
}

// execCommand changes directory, confines the thread and switches its user (confineThread) and execs args with
// spec's env.
func execCommand(spec Spec, args []string) error {
	if spec.Cwd != "" {
		if err := os.Chdir(spec.Cwd); err != nil {
			return fmt.Errorf("chdir: %w", err)
		}
	}
	path, err := LookPath(args[0], spec.Env)
	if err != nil {
		return err
	}
	if err := confineThread(spec.Security, spec.User); err != nil {
		return err
	}
	err = unix.Exec(path, args, spec.Env)
	return fmt.Errorf("exec %s: %w", path, err)
}

// cgroupMountPoint is where a container looks for its cgroup.
const cgroupMountPoint = "/sys/fs/cgroup"

// ownCgroupView gives the calling thread (about to exec the container, in the container's mount namespace and
// cgroup) its own view of cgroup v2, as runc does with a private cgroup namespace: a new cgroup namespace rooted
// at the cgroup it joined, and cgroup2 mounted read-only at target, so that target/memory.max, cpu.max and
// cpu.weight are the container's own limits (what `kubectl exec ... cat /sys/fs/cgroup/cpu.max` expects).
// Callers treat failure as best effort: the container then sees the host's hierarchy, as it did before.
func ownCgroupView(target string) error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME | unix.MS_RDONLY)
	if err := unix.Mount("cgroup2", target, "cgroup2", flags, ""); err != nil {
		return fmt.Errorf("mount cgroup2 at %s: %w", target, err)
	}
	return nil
}

func joinCgroups(procsFiles []string) error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, f := range procsFiles {
		if err := os.WriteFile(f, pid, 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

func setnsPath(path string, nstype int) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, nstype); err != nil {
		return fmt.Errorf("setns %s: %w", path, err)
	}
	return nil
}

// bindMount bind-mounts m.Source at m.Target, creating the mount point (a
// directory or an empty file, like the source) if it is missing.
func bindMount(m Mount) error {
	st, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	if _, err := os.Lstat(m.Target); errors.Is(err, fs.ErrNotExist) {
		if err := makeMountPoint(m.Target, st.IsDir()); err != nil {
			return err
		}
	}
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := remountReadOnly(m.Target); err != nil {
			return err
		}
	}
	prop := uintptr(unix.MS_PRIVATE)
	switch m.Propagation {
	case "rslave":
		prop = unix.MS_SLAVE
	case "rshared":
		prop = unix.MS_SHARED
	}
	if err := unix.Mount("", m.Target, "", prop|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("set propagation of %s: %w", m.Target, err)
	}
	return nil
}

func makeMountPoint(target string, dir bool) error {
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// LookPath resolves file in the PATH of env, as the container sees it.
func LookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH %q", file, path)
}

// setThreadUser switches the calling thread (only: it execs next) to u.
func setThreadUser(u User) error {
	var groups unsafe.Pointer
	if len(u.Groups) > 0 {
		groups = unsafe.Pointer(&u.Groups[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(u.Groups)), uintptr(groups), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(u.GID), uintptr(u.GID), uintptr(u.GID)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(u.UID), uintptr(u.UID), uintptr(u.UID)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	return nil
}
