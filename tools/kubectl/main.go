// Command kubectl is the upstream kubectl, built from the k8s.io/kubectl module at the version pinned in go.mod.
//
// Wheelhouse's end-to-end tests drive this binary against the server to check API compatibility with the real
// client. It adds nothing to kubectl: scripts/kubectl.sh builds it with version ldflags so that
// `kubectl version --client` reports the pinned release, and prints the path of the cached binary.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // registers the exec and OIDC credential plugins, as upstream does
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Like upstream, apply -v before the command tree is built, so plugin discovery and kuberc loading log too.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err) // prints the error the way kubectl does and exits non-zero
	}
}
