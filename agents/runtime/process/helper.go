package process

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
const helperPrefix = "wheelhouse-runtime:"

// selfExe is the binary the helpers are started from.
const selfExe = "/proc/self/exe"

// MaybeRunHelper runs the requested helper and exits if this process was
// started as one; otherwise it returns at once. Every binary that embeds the
// process runtime must call it first thing in main (and tests in TestMain),
// before flags are parsed or goroutines started.
func MaybeRunHelper() {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[0], helperPrefix) {
		return
	}
	var err error
	switch mode := strings.TrimPrefix(os.Args[0], helperPrefix); mode {
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
