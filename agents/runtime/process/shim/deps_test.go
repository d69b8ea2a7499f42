package shim

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesStayLight: the helpers run from this package's init, before packages that do not depend on it
// are initialized; what it imports is initialized first and paid by every container start, exec and exec probe.
// It must stay the standard library, x/sys and pty (the Kubernetes types, gRPC or protobuf here would make every
// helper pay their initialization again).
func TestDependenciesStayLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"golang.org/x/sys/", "github.com/creack/pty", "vendor/", "github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"}
	for _, pkg := range strings.Fields(string(out)) {
		std := !strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".")
		ok := std
		for _, prefix := range allowed {
			ok = ok || strings.HasPrefix(pkg, prefix)
		}
		if !ok {
			t.Errorf("the shim package depends on %s", pkg)
		}
	}
}
