package process

import "golang.org/x/sys/unix"

// seccompArch is the audit architecture of the runtime's system calls.
const seccompArch = unix.AUDIT_ARCH_AARCH64

// archSeccompRules are the default profile's rules for arm64's own calls: none beyond the common ones.
var archSeccompRules []seccompRule
