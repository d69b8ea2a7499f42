// Package containerdtest starts a real containerd (Debian's containerd 1.6 with runc and the runc v2 shim) for
// a test, with its CRI plugin, and builds the OCI images such tests run: a pause image and the podserver test
// program, static Go binaries imported with ctr, since these machines have no registry.
//
//	c := containerdtest.Start(t, containerdtest.Options{})
//	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
//	rt := c.Runtime() // runtimeapi.RuntimeServiceClient on c.Socket
//
// # Guarantees
//
//   - Isolation: each instance has its own root, state, gRPC and ttrpc sockets, runc state directory, log and
//     CRI streaming port (127.0.0.1, chosen by the kernel), so instances run in parallel (t.Parallel) without
//     colliding. Pod network namespaces are mounted under State, not in /var/run/netns.
//   - Readiness: Start returns once CRI answers Version and reports RuntimeReady (NetworkReady too only if the
//     CNI conf dir has a configuration).
//   - Cleanup: when the test ends, every sandbox is stopped and removed through CRI, containerd is stopped,
//     leftover shims and container processes are killed, mounts under the instance's directory unmounted,
//     cgroups named by its containers removed, its directories and sockets deleted, whether containerd is
//     healthy or has crashed and left its shims behind. A failed test gets the tail of containerd's log.
//   - Images are built once per test process and cached under os.TempDir() by content hash.
//
// # Host state outside the instance
//
// containerd 1.6 hard-codes /run/containerd/s for shim sockets, and runc's cgroupfs driver puts sandboxes
// without a cgroup_parent under /k8s.io in each cgroup hierarchy. These are shared by every containerd on
// the machine; the package removes them when its last live instance ends if they did not exist before.
//
// Start needs root: it skips the test otherwise.
package containerdtest
