package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdInstallHint is how to get the etcd server on Debian and Ubuntu.
const etcdInstallHint = "apt-get update && apt-get install -y etcd-server"

// findEtcd returns the etcd server binary, installing Debian's etcd-server first when it is missing, the
// caller is root and install is set.
func findEtcd(ctx context.Context, install bool, logPath string, log *slog.Logger) (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	_, aptErr := exec.LookPath("apt-get")
	switch {
	case !install:
		return "", fmt.Errorf("etcd: no etcd binary in PATH; install it with: %s", etcdInstallHint)
	case os.Geteuid() != 0 || aptErr != nil:
		return "", fmt.Errorf("etcd: no etcd binary in PATH and not root on a Debian system; run: %s", etcdInstallHint)
	}
	log.Info("installing etcd", "command", etcdInstallHint, "log", logPath)
	for _, args := range [][]string{{"update"}, {"install", "-y", "etcd-server"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		_ = os.WriteFile(logPath, out, 0o644)
		if err != nil {
			return "", fmt.Errorf("etcd: apt-get %s failed: %w\n%s", strings.Join(args, " "), err, lastLines(out, 10))
		}
	}
	return exec.LookPath("etcd")
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// etcdVersion is the first line of `etcd --version`.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "etcd Version:"))
}

// server is an etcd-API server the harness started: etcd or kine.
type server struct {
	proc     *child
	endpoint string
}

// startEtcd runs a single-member etcd on loopback with its data in dir. Durability is etcd's default (it
// fsyncs its WAL on every commit); the backend quota is raised so the run's history, never compacted, fits.
func startEtcd(ctx context.Context, bin, dir string) (*server, error) {
	client, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	cu := "http://127.0.0.1:" + strconv.Itoa(client)
	pu := "http://127.0.0.1:" + strconv.Itoa(peer)
	cmd := exec.Command(bin,
		"--name", "perf", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "perf="+pu, "--initial-cluster-state", "new",
		"--quota-backend-bytes", strconv.FormatInt(8<<30, 10),
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	proc, err := startChild("etcd", cmd, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	s := &server{proc: proc, endpoint: "127.0.0.1:" + strconv.Itoa(client)}
	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("etcd: %w", err)
	}
	return s, nil
}

// waitReady polls the server with a read until it answers.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cli, err := dialEtcd(ctx, s.endpoint)
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		if s.proc.exited() {
			return fmt.Errorf("%s exited during start-up: %v\n%s", s.proc.name, s.proc.waitErr, s.proc.logTail())
		}
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "/healthcheck", clientv3.WithCountOnly())
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer within %s: %w\n%s", s.proc.name, timeout, err, s.proc.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *server) Stop() { s.proc.Stop(10 * time.Second) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("free port: not a TCP address")
	}
	return addr.Port, nil
}
