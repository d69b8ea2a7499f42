package process

import (
	"os/user"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// A container's security context, as the process runtime honours it (shim/security.go applies it):
//
//   - the user: RunAsUser (else the runtime's own, root), RunAsGroup (else the user's primary group in the
//     node's /etc/passwd, else 0, as containerd reads the image's), the supplemental groups (with policy Merge,
//     also the user's groups in the node's /etc/group); RunAsUsername is refused;
//   - capabilities as containerd gives them: a privileged container keeps every one; any other containerd's
//     default set, with AddCapabilities and DropCapabilities applied ("ALL" first, then the others);
//   - NoNewPrivs; MaskedPaths and ReadonlyPaths, and /sys read-only, unless privileged;
//   - ReadonlyRootfs: the container has no root filesystem of its own, so its view of the node's is read-only
//     (every mount but /proc, /dev, /sys and its own Mounts; mounts the node makes later appear as the node
//     made them);
//   - seccomp: Unconfined, or RuntimeDefault, the runtime's own profile (a filter refusing the calls below);
//     Localhost profiles are refused; so is any AppArmor profile but Unconfined (the runtime applies none, as
//     containerd refuses them on a node without AppArmor).
//
// PID namespaces are the node's whatever NamespaceOptions say (PodSandboxStatus reports so), and SELinux
// options are not applied (as containerd on a node without SELinux).

// defaultCapabilities are containerd's (and Docker's) for a container that is not privileged.
var defaultCapabilities = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// capabilityNumbers are the capabilities by name.
var capabilityNumbers = map[string]int{
	"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"CAP_FOWNER": unix.CAP_FOWNER, "CAP_FSETID": unix.CAP_FSETID, "CAP_KILL": unix.CAP_KILL, "CAP_SETGID": unix.CAP_SETGID,
	"CAP_SETUID": unix.CAP_SETUID, "CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "CAP_NET_BROADCAST": unix.CAP_NET_BROADCAST,
	"CAP_NET_ADMIN": unix.CAP_NET_ADMIN, "CAP_NET_RAW": unix.CAP_NET_RAW, "CAP_IPC_LOCK": unix.CAP_IPC_LOCK,
	"CAP_IPC_OWNER": unix.CAP_IPC_OWNER, "CAP_SYS_MODULE": unix.CAP_SYS_MODULE, "CAP_SYS_RAWIO": unix.CAP_SYS_RAWIO,
	"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_SYS_PTRACE": unix.CAP_SYS_PTRACE, "CAP_SYS_PACCT": unix.CAP_SYS_PACCT,
	"CAP_SYS_ADMIN": unix.CAP_SYS_ADMIN, "CAP_SYS_BOOT": unix.CAP_SYS_BOOT, "CAP_SYS_NICE": unix.CAP_SYS_NICE,
	"CAP_SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "CAP_SYS_TIME": unix.CAP_SYS_TIME, "CAP_SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG,
	"CAP_MKNOD": unix.CAP_MKNOD, "CAP_LEASE": unix.CAP_LEASE, "CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
	"CAP_AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL, "CAP_SETFCAP": unix.CAP_SETFCAP, "CAP_MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE,
	"CAP_MAC_ADMIN": unix.CAP_MAC_ADMIN, "CAP_SYSLOG": unix.CAP_SYSLOG, "CAP_WAKE_ALARM": unix.CAP_WAKE_ALARM,
	"CAP_BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND, "CAP_AUDIT_READ": unix.CAP_AUDIT_READ, "CAP_PERFMON": unix.CAP_PERFMON,
	"CAP_BPF": unix.CAP_BPF, "CAP_CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
}

// securityOf is what init and exec apply for a container's security context; an error is InvalidArgument.
func securityOf(sc *runtimeapi.LinuxContainerSecurityContext) (shim.Security, error) {
	var sec shim.Security
	if ap := sc.GetApparmor(); ap != nil && ap.ProfileType != runtimeapi.SecurityProfile_Unconfined {
		return sec, runtime.InvalidArgumentError("apparmor profile %s: the process runtime applies no AppArmor profile", profileName(ap))
	}
	sec.NoNewPrivs = sc.GetNoNewPrivs()
	sec.ReadonlyRootfs = sc.GetReadonlyRootfs()
	if sc.GetPrivileged() {
		// Every capability, no masked or read-only path, no seccomp filter: containerd's privileged container.
		return sec, nil
	}
	caps, err := capabilitiesOf(sc.GetCapabilities())
	if err != nil {
		return sec, err
	}
	sec.Capabilities = &caps
	sec.MaskedPaths = slices.Clone(sc.GetMaskedPaths())
	sec.ReadonlyPaths = append(slices.Clone(sc.GetReadonlyPaths()), "/sys")
	switch sp := seccompOf(sc); sp.ProfileType {
	case runtimeapi.SecurityProfile_Unconfined:
	case runtimeapi.SecurityProfile_RuntimeDefault:
		if seccompArch == 0 {
			return sec, runtime.InvalidArgumentError("seccomp profile RuntimeDefault: the process runtime has no profile for this architecture")
		}
		sec.Seccomp, sec.SeccompArch = seccompDenied(caps), seccompArch
	default:
		return sec, runtime.InvalidArgumentError("seccomp profile %s: the process runtime runs only Unconfined and RuntimeDefault", profileName(sp))
	}
	return sec, nil
}

// seccompOf is the container's seccomp profile, Unconfined when it has none (the deprecated path form is not
// read: the kubelet sends profiles).
func seccompOf(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.SecurityProfile {
	if sp := sc.GetSeccomp(); sp != nil {
		return sp
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

func profileName(p *runtimeapi.SecurityProfile) string {
	if p == nil {
		return ""
	}
	if p.LocalhostRef != "" {
		return p.ProfileType.String() + " " + p.LocalhostRef
	}
	return p.ProfileType.String()
}

// capabilitiesOf is containerd's capability set for a container that is not privileged: the default set, all
// of them with AddCapabilities "ALL", none with DropCapabilities "ALL", then the other additions and drops.
// Names are case-insensitive, with or without "CAP_".
func capabilitiesOf(c *runtimeapi.Capability) ([]int, error) {
	set := map[string]bool{}
	for _, n := range defaultCapabilities {
		set[n] = true
	}
	isAll := func(n string) bool { return strings.EqualFold(n, "ALL") }
	if slices.ContainsFunc(c.GetAddCapabilities(), isAll) {
		for n := range capabilityNumbers {
			set[n] = true
		}
	}
	if slices.ContainsFunc(c.GetDropCapabilities(), isAll) {
		clear(set)
	}
	for _, change := range []struct {
		names []string
		keep  bool
	}{{c.GetAddCapabilities(), true}, {c.GetDropCapabilities(), false}} {
		for _, n := range change.names {
			if isAll(n) {
				continue
			}
			name := strings.ToUpper(n)
			if !strings.HasPrefix(name, "CAP_") {
				name = "CAP_" + name
			}
			if _, ok := capabilityNumbers[name]; !ok {
				return nil, runtime.InvalidArgumentError("unknown capability %q", n)
			}
			if change.keep {
				set[name] = true
			} else {
				delete(set, name)
			}
		}
	}
	out := []int{}
	for n := range set {
		out = append(out, capabilityNumbers[n])
	}
	slices.Sort(out)
	return out, nil
}

// userOf returns the user the container runs as (nil: the runtime's own, root, with its groups).
func userOf(sc *runtimeapi.LinuxContainerSecurityContext) (*shim.User, error) {
	if sc.GetRunAsUsername() != "" {
		return nil, runtime.InvalidArgumentError("runAsUsername is not supported, use a numeric runAsUser")
	}
	if sc.GetRunAsUser() == nil && sc.GetRunAsGroup() == nil && len(sc.GetSupplementalGroups()) == 0 {
		return nil, nil
	}
	// Without a runAsUser, the user is the one the runtime would run the command as: itself, root (kubelet
	// passes the image's user, and the process runtime's "image" runs as the runtime).
	uid := sc.GetRunAsUser().GetValue()
	if uid < 0 || uid > 1<<32-2 {
		return nil, runtime.InvalidArgumentError("runAsUser %d out of range", uid)
	}
	u := &shim.User{UID: uint32(uid)}
	pw, _ := user.LookupId(strconv.FormatInt(uid, 10))
	if g := sc.GetRunAsGroup(); g != nil {
		if g.GetValue() < 0 || g.GetValue() > 1<<32-2 {
			return nil, runtime.InvalidArgumentError("runAsGroup %d out of range", g.GetValue())
		}
		u.GID = uint32(g.GetValue())
	} else if pw != nil {
		if gid, err := strconv.ParseUint(pw.Gid, 10, 32); err == nil {
			u.GID = uint32(gid)
		}
	}
	add := func(g uint32) {
		if !slices.Contains(u.Groups, g) {
			u.Groups = append(u.Groups, g)
		}
	}
	if pw != nil && sc.GetSupplementalGroupsPolicy() == runtimeapi.SupplementalGroupsPolicy_Merge {
		// The user's groups in the node's /etc/group, as containerd merges the image's.
		gids, _ := pw.GroupIds()
		for _, s := range gids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != u.GID {
				add(uint32(g))
			}
		}
	}
	for _, g := range sc.GetSupplementalGroups() {
		if g < 0 || g > 1<<32-2 {
			return nil, runtime.InvalidArgumentError("supplemental group %d out of range", g)
		}
		add(uint32(g))
	}
	return u, nil
}
