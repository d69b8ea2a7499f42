package perf

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// kineModule is the kine release the harness compares against.
const (
	kineModule  = "github.com/k3s-io/kine"
	kineVersion = "v0.17.5"
)

// findKine returns a kine binary of kineVersion in binDir, building it with `go install` when missing.
func findKine(ctx context.Context, binDir, logPath string, log *slog.Logger) (string, error) {
	bin := filepath.Join(binDir, "kine")
	if v, err := moduleVersion(bin); err == nil && v == kineVersion {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("kine: %s is missing and no go command is in PATH to build it: %w", bin, err)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("kine: %w", err)
	}
	log.Info("building kine (once; cached afterwards)", "version", kineVersion, "into", binDir, "log", logPath)
	cmd := exec.CommandContext(ctx, goBin, "install", kineModule+"@"+kineVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+binDir)
	cmd.Dir = os.TempDir() // outside any module, so the install uses kine's own go.mod
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(logPath, out, 0o644)
	if err != nil {
		return "", fmt.Errorf("kine: GOBIN=%s go install %s@%s failed: %w\n%s", binDir, kineModule, kineVersion, err,
			lastLines(out, 15))
	}
	if v, err := moduleVersion(bin); err != nil || v != kineVersion {
		return "", fmt.Errorf("kine: %s after install is %q (%v), want %s", bin, v, err, kineVersion)
	}
	return bin, nil
}

// moduleVersion is the main module version recorded in a Go binary.
func moduleVersion(bin string) (string, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", err
	}
	return info.Main.Version, nil
}

// startKine runs kine against PostgreSQL, listening on a free loopback port, metrics off.
func startKine(ctx context.Context, bin, endpoint, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--endpoint", endpoint, "--listen-address", addr, "--metrics-bind-address", "0")
	proc, err := startChild("kine", cmd, filepath.Join(dir, "kine.log"))
	if err != nil {
		return nil, err
	}
	s := &server{proc: proc, endpoint: addr}
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("kine: %w", err)
	}
	return s, nil
}
