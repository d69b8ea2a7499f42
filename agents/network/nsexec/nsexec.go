// Package nsexec runs code in another network namespace: on a locked OS thread switched there and back. The
// agent's pod network and the proxy's backends use it to open sockets and write sysctls in a node's namespace
// (the tests' "nodes" are namespaces).
package nsexec

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn on a locked thread in ns, and directly for the caller's own namespace (ns 0 or netns.None()).
// Sockets fn opens stay in ns. A thread that cannot go back stays locked, so Go discards it.
func Do(ns netns.NsHandle, fn func() error) error {
	if ns == 0 || !ns.IsOpen() {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- doLocked(ns, fn)
	}()
	return <-errc
}

// doLocked is Do on the locked thread: it unlocks the thread only when it is back in its namespace.
func doLocked(ns netns.NsHandle, fn func() error) error {
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("nsexec: this thread's namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("nsexec: enter namespace: %w", err)
	}
	err = fn()
	if netns.Set(orig) == nil {
		runtime.UnlockOSThread()
	}
	return err
}
