package process

import "golang.org/x/sys/unix"

// seccompArch is the audit architecture of the runtime's system calls.
const seccompArch = unix.AUDIT_ARCH_X86_64

// archSeccompRules are the default profile's rules for x86-64's own calls.
var archSeccompRules = []seccompRule{
	{-1, []uint32{unix.SYS_USELIB, unix.SYS__SYSCTL, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS_CREATE_MODULE,
		unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE}},
	{unix.CAP_SYS_RAWIO, []uint32{unix.SYS_IOPL, unix.SYS_IOPERM}},
}
