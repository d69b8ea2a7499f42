// Package managed runs containerd as a child process of the node agent, for machines without a service manager
// to run it (no systemd): the way `wheelhouse server` runs its own PostgreSQL (store/pgserver) and k3s its
// containerd. The agent uses it with --runtime containerd when no --containerd-endpoint is given and nothing
// answers on containerd's default socket (docs/design/containerd.md).
//
//	c, err := managed.New(managed.Config{Dir: filepath.Join(dataDir, "containerd"), Logger: log})
//	...
//	go c.Start(ctx)          // runs, supervises and, when ctx ends, stops containerd
//	<-c.Ready()              // or let cri.Open wait on c.Socket()
//
// # Guarantees
//
//   - Everything of the instance is under Config.Dir: config.toml, root/ (images, snapshots, metadata), state/
//     (tasks, runc's state, pod network namespaces: netns_mounts_under_state_dir), net.d/ (the CNI configuration
//     the caller writes), the gRPC and ttrpc sockets (unless Config.Socket puts them elsewhere) and
//     containerd.pid. A system containerd's files (/var/lib/containerd, /run/containerd/containerd.sock,
//     /run/containerd/runc, /etc/containerd, /var/run/netns) are never read or written. Outside Dir there is
//     only what containerd 1.6 hard-codes for every instance: shim sockets in /run/containerd/s (named by a hash
//     of the instance's socket, so they never collide with another containerd's) and the CNI plugins' own
//     files (host-local's allocations go where the caller's CNI configuration says).
//   - The configuration is WriteConfig's: the CRI plugin with runc v2 on cgroupfs, overlayfs, a streaming
//     server on 127.0.0.1 with a kernel-chosen port, and restrict_oom_score_adj where this process lacks
//     CAP_SYS_RESOURCE (NeedsRestrictOOMScoreAdj), which the kernel needs for CRI's pause containers.
//   - Start blocks until its ctx ends. A containerd that exits is started again after a back-off (1 s, doubling
//     after each start that never became ready, up to 1 min; back to 1 s after a ready one) and logged at warn
//     with its last lines of output; the pods' shims outlive it and the next start re-adopts their containers.
//     When ctx ends, containerd gets SIGTERM, then SIGKILL after Config.StopGrace, and Start returns once it has
//     exited: no containerd process is left (its pods' shims and containers are, as with a system containerd
//     that stops). If the calling process dies first, the kernel kills containerd (Pdeathsig); an instance
//     left running anyway (PID file, command line naming the instance's configuration) is stopped by the next
//     Start, which also refuses to start where another runtime answers on the socket.
//   - containerd's output is logged line by line at debug ("containerd output"); starts and readiness at info.
//   - Ready is closed once a start has answered CRI Version and reported RuntimeReady. Answers tells whether any
//     runtime answers on a socket; WaitReady and Probe are the readiness checks, shared with the test harness
//     (agents/runtime/cri/containerdtest).
//
// Everything needs root (containerd mounts snapshots; runc creates namespaces and cgroups) and Debian's
// containerd, runc and containernetworking-plugins packages (Validate's ErrNoBinary otherwise).
package managed
