// Package kubectltest finds the real kubectl that tests drive: the build pinned by tools/kubectl, which
// `make test` builds (scripts/kubectl.sh) and names in WHEELHOUSE_KUBECTL.
package kubectltest

import (
	"os"
	"path/filepath"
	"testing"
)

// Binary is the pinned kubectl: $WHEELHOUSE_KUBECTL, else the build `make kubectl` leaves in the module's
// .cache/bin. Without either the test fails, saying how to get one: a kubectl from PATH could be any version.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("WHEELHOUSE_KUBECTL"); bin != "" {
		return bin
	}
	dir, err := os.Getwd()
	for err == nil {
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			bin := filepath.Join(dir, ".cache", "bin", "kubectl")
			if _, err = os.Stat(bin); err == nil {
				return bin
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Fatalf("no kubectl: run the tests with `make test` (it builds the pinned kubectl), run `make kubectl`, or set WHEELHOUSE_KUBECTL (%v)", err)
	return ""
}
