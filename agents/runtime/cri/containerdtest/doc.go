// Package containerdtest starts a real containerd (Debian's containerd 1.6 with runc and the runc v2 shim)
// with its CRI plugin, and builds the OCI images such tests run: a pause image and the podserver test program,
// static Go binaries imported with ctr, since these machines have no registry.
//
// In a test:
//
//	c := containerdtest.Start(t, containerdtest.Options{})
//	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
//	rt := c.Runtime() // runtimeapi.RuntimeServiceClient on c.Socket
//
// Outside tests (the perf harness), the same with errors, and Close instead of the test's cleanup:
//
//	c, err := containerdtest.Launch(ctx, containerdtest.Options{})
//	...
//	defer c.Close()
//	pause, err := containerdtest.BuildPause(ctx)
//	...
//	err = c.Import(ctx, pause)
//
// Start, Pause, Server and ImportImages are thin wrappers over Launch (+ Close as a cleanup), BuildPause,
// BuildServer and Import that fail (or, without root, skip) the test instead of returning an error.
//
// # Guarantees
//
//   - Isolation: each instance has its own root, state, gRPC and ttrpc sockets, runc state directory, log and
//     CRI streaming port (127.0.0.1, chosen by the kernel), so instances run in parallel (t.Parallel) without
//     colliding. Pod network namespaces are mounted under State, not in /var/run/netns.
//   - Readiness: Launch returns once CRI answers Version and reports RuntimeReady (NetworkReady too only if the
//     CNI conf dir has a configuration).
//   - Cleanup: Close (Start: when the test ends) stops and removes every sandbox through CRI, stops containerd,
//     kills leftover shims and container processes, unmounts what is under the instance's directory, removes
//     the cgroups named by its containers, its directories and sockets, whether containerd is healthy or has
//     crashed and left its shims behind, and reports what it could not remove. A failed test gets the tail of
//     containerd's log; a failed Launch returns it in its error. A process that dies without Close takes
//     containerd with it (Pdeathsig), but not the shims.
//   - Images are built once per process and cached under os.TempDir() by content hash. They are built from the
//     wheelhouse module's sources, found with `go list -m` from the working directory: the module itself or
//     one that requires it.
//
// # Host state outside the instance
//
// containerd 1.6 hard-codes /run/containerd/s for shim sockets, and runc's cgroupfs driver puts sandboxes
// without a cgroup_parent under /k8s.io in each cgroup hierarchy. These are shared by every containerd on
// the machine; the package removes them when its last live instance ends if they did not exist before.
//
// Launch needs root (ErrNeedsRoot otherwise); Start skips the test without it.
package containerdtest
