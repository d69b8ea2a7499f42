// Command wheelhouse is the Wheelhouse binary.
//
//	wheelhouse server [--listen ADDR] [--database-url URL] [--data-dir DIR] [--log-level L] [--log-format F]
//	wheelhouse agent --server URL [--token JOIN-TOKEN] [--node-name N] [--data-dir DIR] [--label k=v] [--taint k=v:E]
//	wheelhouse version [-o json]
//
// Every server flag can also be set with the environment variable named in its help (WHEELHOUSE_*); a flag on
// the command line wins over the environment, which wins over the default.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wheelhouse-dev/wheelhouse/agents"
	// This binary is also the process runtime's container shim and namespace helper: the shim package's init
	// runs them, before the rest of the binary is initialized.
	_ "github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process at once
	}()
	err := newRootCommand(os.Getenv, os.Stdout, run).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wheelhouse:", err)
		os.Exit(1)
	}
}

// newRootCommand builds the command tree. getenv supplies the WHEELHOUSE_* defaults, out receives command
// output, and runServer runs `wheelhouse server` (tests replace all three).
func newRootCommand(getenv func(string) string, out io.Writer, runServer func(context.Context, serverConfig) error) *cobra.Command {
	root := &cobra.Command{
		Use:           "wheelhouse",
		Short:         "Wheelhouse runs Kubernetes clusters on PostgreSQL",
		Version:       version.Get().String(),
		SilenceUsage:  true, // errors are not usage mistakes: print them, not the help
		SilenceErrors: true, // main prints them
	}
	root.SetOut(out)
	root.AddCommand(newServerCommand(getenv, runServer), newVersionCommand(out))
	root.AddCommand(newKubeconfigCommand(getenv, out), newJoinTokenCommand(getenv, out))
	root.AddCommand(newAgentCommand(getenv, os.Stderr, agents.Run))
	return root
}
