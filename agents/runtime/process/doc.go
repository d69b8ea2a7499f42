// Package process is the process runtime: a runtime.Runtime that runs pod
// containers as host processes, isolated by Linux namespaces and cgroups
// rather than images.
//
// # Model
//
//   - A sandbox is a network namespace bind-mounted at StateDir/netns/<id>
//     (none with hostNetwork, NamespaceOptions.Network == NODE), set up by the
//     consumer's Network hook (nil: only lo, up), an IPC namespace at
//     StateDir/netns/<id>.ipc (none with NamespaceOptions.Ipc == NODE), its
//     sysctls written in those namespaces (sysctl.go: net.*, kernel.shm*,
//     kernel.msg*, kernel.sem, fs.mqueue.*; any other is refused), and a pod
//     cgroup <CgroupRoot>/pod-<id> (cgroup v2, or the v1 memory, cpu and pids
//     hierarchies when /sys/fs/cgroup is not cgroup2). Containers share the
//     node's PID namespace whatever NamespaceOptions.Pid says.
//   - A container is its Command+Args (resolved in the PATH of its env; the
//     image is recorded, never pulled) run in the sandbox's network namespace
//     and a mount namespace of its own (rslave of the host's) where its CRI
//     Mounts are bind-mounted (mount points missing on the host are created
//     there: there is no root filesystem), in the cgroup
//     <CgroupRoot>/pod-<id>/<container id> with memory.max, cpu.max and
//     cpu.weight (v1: limit_in_bytes, cfs_quota_us/cfs_period_us, shares),
//     in WorkingDir, confined by its security context as containerd confines
//     one (security.go): its user, group and supplemental groups, capabilities
//     (containerd's default set unless privileged), no_new_privs, masked and
//     read-only paths, a read-only view of the node's filesystem for
//     ReadonlyRootfs, and seccomp RuntimeDefault as the runtime's own filter
//     (seccomp.go). What it cannot apply — Localhost seccomp profiles,
//     AppArmor profiles, RunAsUsername — is refused with InvalidArgument. On
//     v2 it has a cgroup namespace of its own with cgroup2 mounted read-only
//     at /sys/fs/cgroup (its own limits there, as runc gives containers).
//     UpdateContainerResources rewrites those limits in place (in-place pod
//     resize) and records them for ContainerStatus.
//   - There is no process namespace of a container's or a sandbox's own:
//     every container runs in the host's PID namespace. A container asking
//     for its target's (NamespaceOption Pid TARGET: an ephemeral container
//     with a targetContainerName, `kubectl debug --target`) is in it already
//     and sees the target's processes, as it sees the host's; its TargetId
//     must name a container of the same sandbox, or the create is refused
//     (namespaces.go).
//   - Each container has a shim: the runtime's binary re-executed
//     (/proc/self/exe, argv[0] "wheelhouse-runtime:shim") in a session of its
//     own, so the agent may exit or be killed while containers run. The shim
//     starts the init helper, which joins the cgroup and namespaces, mounts,
//     drops privileges and execs the command; it then writes stdout and stderr
//     to ContainerConfig.LogPath (under the sandbox's LogDirectory, else
//     LogDir/<sandbox id>) in CRI format, "<RFC3339Nano> stdout|stderr F|P
//     <line>", rotating by size into <log>.<YYYYMMDD-hhmmss> and keeping
//     LogMaxFiles files; it relays termination signals to the process group,
//     and records the exit (code, time, reason Completed / Error / OOMKilled
//     from the cgroup's oom_kill count) in the state dir. The helpers live in
//     package shim, which needs only the standard library, x/sys and pty, and
//     run from its init: a helper starts before the rest of the binary is
//     initialized (a few ms and MiB rather than the whole agent's start-up),
//     and any binary that imports the runtime serves them.
//   - State is JSON under StateDir (see state.go for the layout), written
//     atomically. New re-adopts it: a runtime opened on the same StateDir
//     lists the same sandboxes and containers, running ones still RUNNING.
//     Processes are identified by PID and start time (/proc/<pid>/stat), so a
//     reused PID is never taken for a container; a container whose process
//     and shim vanished without an exit record is EXITED with code 255.
//   - StopContainer sends SIGTERM to the process group, SIGKILL to the group
//     and every process of the cgroup after the timeout. ExecSync and Exec run
//     the command through the exec helper in the container's namespaces,
//     cgroup, user, env and working directory.
//   - The streaming server (k8s.io/cri-streaming, plus websocket
//     v5.channel.k8s.io for exec and attach, which cri-streaming lacks)
//     listens on StreamAddr; Start serves it. Port-forward dials
//     127.0.0.1:<port> inside the sandbox's namespace. Attach reaches the
//     container's shim, which owns its stdio (a pty for tty containers, a
//     pipe kept open for stdin ones) and serves sessions on a unix socket in
//     the container's directory (attach.go).
//
// The runtime needs root (namespaces, mounts, cgroups). Concurrency: a
// Runtime is safe for concurrent use; Runtime.mu guards the in-memory index
// and is never held while waiting for a process.
package process
