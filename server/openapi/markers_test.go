package openapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedMarkersAreCurrent regenerates zz_generated.markers.go from the k8s.io sources in the module graph
// and fails when the checked-in file differs: run `go generate ./server/openapi` after upgrading k8s.io/api.
func TestGeneratedMarkersAreCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "markers.go")
	cmd := exec.CommandContext(t.Context(), "go", "run", "./markergen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("markergen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_generated.markers.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("zz_generated.markers.go is stale; run go generate ./server/openapi")
	}
}

func TestMarkersApplyToTypes(t *testing.T) {
	if markersSource == "" || len(generatedMarkers) == 0 || len(generatedEnums) == 0 {
		t.Fatal("no generated markers")
	}
}
