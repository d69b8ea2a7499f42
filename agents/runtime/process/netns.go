package process

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// ensureSharedDir makes dir a mount point with shared propagation (as
// `ip netns` does for /run/netns), so that unmounting a namespace here also
// unmounts it in the containers' mount namespaces (slaves of the host's):
// otherwise a running container would pin every sandbox's namespace.
func ensureSharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err == nil {
		return nil
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// onNewThread runs fn on a fresh locked OS thread and returns its error. The
// thread is never unlocked, so Go discards it afterwards: namespace changes
// made by fn cannot leak into other goroutines.
func onNewThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// createNetns creates a network namespace, bind-mounts it at path (an empty
// file is created) and brings its loopback up.
func createNetns(path string) error {
	return createNamespace(path, unix.CLONE_NEWNET, "net", loopbackUp)
}

// createIPCns creates an IPC namespace and bind-mounts it at path.
func createIPCns(path string) error {
	return createNamespace(path, unix.CLONE_NEWIPC, "ipc", func() error { return nil })
}

// createNamespace creates a namespace of type nstype (named name in
// /proc/<pid>/task/<tid>/ns), bind-mounts it at path (an empty file is
// created) and runs setUp in it.
func createNamespace(path string, nstype int, name string, setUp func() error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create %s namespace file: %w", name, err)
	}
	f.Close()
	err = onNewThread(func() error {
		if err := unix.Unshare(nstype); err != nil {
			return fmt.Errorf("unshare %s: %w", name, err)
		}
		src := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/" + name
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s namespace: %w", name, err)
		}
		return setUp()
	})
	if err != nil {
		_ = removeNetns(path)
	}
	return err
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// removeNetns unmounts and deletes the namespace (of any type) at path; a
// missing one is not an error.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// inNetns runs fn on a thread in the namespace at path ("" runs it in the
// host's). Sockets fn opens stay in that namespace.
func inNetns(path string, fn func() error) error {
	return inNamespace(path, unix.CLONE_NEWNET, fn)
}

// inNamespace runs fn on a thread in the namespace of type nstype at path
// ("" runs it in the host's).
func inNamespace(path string, nstype int, fn func() error) error {
	if path == "" {
		return fn()
	}
	return onNewThread(func() error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open namespace %s: %w", path, err)
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, nstype); err != nil {
			return fmt.Errorf("setns %s: %w", path, err)
		}
		return fn()
	})
}
