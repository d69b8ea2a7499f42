package shim

import (
	"fmt"
	"os"
	"strings"
)

// The runtime re-executes its own binary (/proc/self/exe) as small helpers,
// told apart by argv[0]:
//
//	wheelhouse-runtime:shim <container dir>
//	    the container's parent for its whole life (see shim.go)
//	wheelhouse-runtime:init <container dir>
//	    joins the cgroups and namespaces, mounts, drops privileges, execs the command
//	wheelhouse-runtime:exec <container dir> <pid> <cmd>...
//	    the same for a command run in a running container (ExecSync, Exec)
//
// Namespaces are per thread in a Go program, so init and exec lock their
// thread, set everything up on it and execve() from it.
const Prefix = "wheelhouse-runtime:"

// SelfExe is the binary the helpers are started from.
const SelfExe = "/proc/self/exe"

// init runs the requested helper and exits if this process was started as one. It runs from this package's
// init, before the packages of the rest of the binary are initialized (they come later in Go's initialization
// order: this package needs only the standard library, golang.org/x/sys and creack/pty): a helper starts in a
// few milliseconds and a few MiB instead of paying the whole agent's initialization (the Kubernetes API types,
// the OpenAPI models, gRPC), which every container start, exec and exec probe did twice. Any binary that imports
// the process runtime therefore serves its helpers; nothing needs to be called.
func init() {
	runIfHelper()
}

func runIfHelper() {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[0], Prefix) {
		return
	}
	var err error
	switch mode := strings.TrimPrefix(os.Args[0], Prefix); mode {
	case "shim":
		err = runShim(os.Args[1])
	case "init":
		err = runInit(os.Args[1])
	case "exec":
		if len(os.Args) < 4 {
			err = fmt.Errorf("exec helper: want <dir> <pid> <cmd>..., got %q", os.Args[1:])
			break
		}
		err = runExec(os.Args[1], os.Args[2], os.Args[3:])
	default:
		err = fmt.Errorf("unknown runtime helper %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
		os.Exit(1)
	}
	os.Exit(0)
}
