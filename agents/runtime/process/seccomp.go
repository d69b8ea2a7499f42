package process

import (
	"slices"

	"golang.org/x/sys/unix"
)

// The runtime's default seccomp profile (RuntimeDefault): a filter refusing with EPERM the system calls that
// reach past a container — the kernel's keyrings, modules, reboot and kexec, clocks, mounts and namespaces,
// swap, accounting, BPF and perf, other processes' memory — each unless the container keeps the capability
// that governs it, as Docker's and containerd's profiles make those calls depend on their capability. Calls of
// another architecture are refused (their numbers mean other calls). Arguments are not inspected: clone's
// namespace flags, for one, are not filtered (the kernel still requires the capabilities they need, but for
// user namespaces).

// seccompRule refuses calls unless the container keeps capability (-1: always).
type seccompRule struct {
	capability int
	calls      []uint32
}

// seccompRules are the profile's rules common to every architecture; archSeccompRules adds this one's.
var seccompRules = []seccompRule{
	{-1, []uint32{unix.SYS_ADD_KEY, unix.SYS_KEYCTL, unix.SYS_REQUEST_KEY, unix.SYS_NFSSERVCTL}},
	{unix.CAP_SYS_ADMIN, []uint32{unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_QUOTACTL, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
		unix.SYS_FSPICK, unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR, unix.SYS_LOOKUP_DCOOKIE,
		unix.SYS_FANOTIFY_INIT, unix.SYS_NAME_TO_HANDLE_AT}},
	{unix.CAP_BPF, []uint32{unix.SYS_BPF}},
	{unix.CAP_PERFMON, []uint32{unix.SYS_PERF_EVENT_OPEN}},
	{unix.CAP_SYS_MODULE, []uint32{unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE}},
	{unix.CAP_SYS_BOOT, []uint32{unix.SYS_REBOOT, unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD}},
	{unix.CAP_SYS_TIME, []uint32{unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME}},
	{unix.CAP_SYS_PACCT, []uint32{unix.SYS_ACCT}},
	{unix.CAP_SYS_PTRACE, []uint32{unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KCMP, unix.SYS_USERFAULTFD}},
	{unix.CAP_SYSLOG, []uint32{unix.SYS_SYSLOG}},
	{unix.CAP_DAC_READ_SEARCH, []uint32{unix.SYS_OPEN_BY_HANDLE_AT}},
}

// seccompDenied are the calls the default profile refuses a container keeping caps, sorted.
func seccompDenied(caps []int) []uint32 {
	out := []uint32{}
	for _, r := range slices.Concat(seccompRules, archSeccompRules) {
		// CAP_SYS_ADMIN still grants BPF and perf events, as before CAP_BPF and CAP_PERFMON existed.
		kept := r.capability >= 0 && (slices.Contains(caps, r.capability) ||
			(r.capability == unix.CAP_BPF || r.capability == unix.CAP_PERFMON) && slices.Contains(caps, unix.CAP_SYS_ADMIN))
		if !kept {
			out = append(out, r.calls...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
