// Package netnstest makes network namespaces for tests: each is bind-mounted on a file of a temporary
// directory, so nothing a test does touches the namespace the test runs in, and everything goes when the test
// ends (unmounting a namespace destroys it with its links, once nothing holds it open). Tests of agents/network
// and of the proxy's kernel backends share it.
package netnstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
)

// New makes a network namespace with lo up, bind-mounted at dir/name, and returns that path; it is unmounted
// when the test ends.
func New(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	err := OnThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.New() // unshares this thread
		if err != nil {
			return err
		}
		defer ns.Close()
		mountErr := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
		if err := netns.Set(orig); err != nil {
			return fmt.Errorf("back to the test's namespace: %w", err) // the thread stays locked: Go drops it
		}
		runtime.UnlockOSThread()
		return mountErr
	})
	if err != nil {
		t.Fatalf("network namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", path, err)
		}
	})
	h := Handle(t, path)
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// OnThread runs fn on a new locked OS thread; fn unlocks it when it leaves the thread as it found it.
func OnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// Run runs fn on a thread in the namespace at path (sockets fn opens stay there).
func Run(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	return nsexec.Do(ns, fn)
}

// Handle is a netlink handle in the namespace at path, closed when the test ends.
func Handle(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}
