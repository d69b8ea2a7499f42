package process

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// A sandbox's sysctls are written when it is created, in its own namespaces, where every container of the pod
// sees them: net.* in its network namespace, kernel.shm*, kernel.msg*, kernel.sem and fs.mqueue.* in its IPC
// namespace (the runtime gives a sandbox one unless NamespaceOptions.Ipc is NODE). Any other sysctl — one of a
// namespace the runtime does not give pods (UTS, user) or of none (the node's own) — is refused, as is a
// namespaced one in a sandbox sharing that namespace with the node: writing it would change the node.

// sysctlNamespace is the namespace a sandbox sysctl is written in.
type sysctlNamespace int

const (
	sysctlNet sysctlNamespace = iota
	sysctlIPC
)

// sandboxSysctl is one sysctl of a sandbox: its file under /proc/sys, its value and its namespace.
type sandboxSysctl struct {
	name, file, value string
	ns                sysctlNamespace
}

// sandboxSysctls checks the sandbox's sysctls and returns them in name order; an error is InvalidArgument.
func sandboxSysctls(cfg *runtimeapi.PodSandboxConfig) ([]sandboxSysctl, error) {
	opts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	var out []sandboxSysctl
	for name, value := range cfg.GetLinux().GetSysctls() {
		s := sandboxSysctl{name: sysctl.NormalizeName(name), value: value}
		file, ok := sysctlFile(s.name)
		if !ok {
			return nil, runtime.InvalidArgumentError("sysctl %q: not a sysctl name", name)
		}
		s.file = file
		switch ns, _, _ := sysctl.GetNamespace(s.name); {
		case ns == sysctl.NetNamespace && opts.GetNetwork() == runtimeapi.NamespaceMode_NODE:
			return nil, runtime.InvalidArgumentError("sysctl %q: the sandbox uses the node's network namespace", name)
		case ns == sysctl.NetNamespace:
			s.ns = sysctlNet
		case ns == sysctl.IPCNamespace && opts.GetIpc() == runtimeapi.NamespaceMode_NODE:
			return nil, runtime.InvalidArgumentError("sysctl %q: the sandbox uses the node's IPC namespace", name)
		case ns == sysctl.IPCNamespace:
			s.ns = sysctlIPC
		default:
			return nil, runtime.InvalidArgumentError("sysctl %q: not in a network or IPC namespace, the only ones the process runtime gives a pod", name)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b sandboxSysctl) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// sysctlFile is the file under /proc/sys of a dotted sysctl name (a "/" in it is a "." of the file's path,
// as in net.ipv4.conf.eth0/100.rp_filter); ok is false for a name that would leave /proc/sys.
func sysctlFile(name string) (file string, ok bool) {
	path := strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
			return "", false
		}
	}
	return filepath.Join("/proc/sys", path), true
}

// writeSysctls writes sysctls in the sandbox's namespaces.
func writeSysctls(rec *sandboxRecord, sysctls []sandboxSysctl) error {
	for _, s := range sysctls {
		ns, nstype := rec.NetNS, unix.CLONE_NEWNET
		if s.ns == sysctlIPC {
			ns, nstype = rec.IPCNS, unix.CLONE_NEWIPC
		}
		if ns == "" { // checked by sandboxSysctls; never the node's
			return fmt.Errorf("sysctl %s: the sandbox has no namespace of its own for it", s.name)
		}
		err := inNamespace(ns, nstype, func() error { return os.WriteFile(s.file, []byte(s.value), 0) })
		if err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", s.name, s.value, err)
		}
	}
	return nil
}
