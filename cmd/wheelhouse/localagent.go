package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// localAgent runs `wheelhouse agent` as a child of the server, as a node of the default cluster, for `make run`:
// once the server answers, it makes a single-use join token and starts the agent with its data dir inside the
// server's. The agent keeps its identity there, so later starts need no new token. It needs root (network
// namespaces, cgroups); otherwise it logs why it does not start. The agent stops with the server.
func localAgent(ctx context.Context, cfg serverConfig, listenAddr string, ten *tenancy.Store, caPEM []byte, log *slog.Logger) {
	log = log.With("component", "local-agent")
	if os.Geteuid() != 0 {
		log.Warn("the local agent needs root (network namespaces and cgroups); not starting it")
		return
	}
	base := serverBaseURL(cfg, listenAddr)
	if !waitReady(ctx, base, caPEM) {
		return
	}
	runtime, why := localAgentRuntime(cfg.LocalAgentRuntime, exec.LookPath)
	args := []string{"agent", "--server", base, "--data-dir", filepath.Join(cfg.DataDir, "agent"), "--node-name", agents.DefaultNodeName(),
		"--runtime", runtime}
	if cfg.TLS == "off" {
		args = append(args, "--insecure-http")
	}
	env := os.Environ()
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "agent", "identity", "node.json")); err != nil {
		var pin string
		if block, _ := pem.Decode(caPEM); block != nil {
			sum := sha256.Sum256(block.Bytes)
			pin = hex.EncodeToString(sum[:])
		}
		token, _, err := ten.CreateJoinToken(ctx, tenancy.DefaultCluster, "", "local agent of make run", time.Now().Add(time.Hour), 1, pin)
		if err != nil {
			log.Error("cannot make a join token for the local agent", "err", err)
			return
		}
		env = append(env, "WHEELHOUSE_TOKEN="+token)
	}
	self, err := os.Executable()
	if err != nil {
		log.Error("cannot find this executable for the local agent", "err", err)
		return
	}
	cmd := exec.Command(self, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // dies with the server
	if err := cmd.Start(); err != nil {
		log.Error("the local agent did not start", "err", err)
		return
	}
	log.Info("local agent started", "pid", cmd.Process.Pid, "node", agents.DefaultNodeName(), "runtime", runtime, "why", why)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		log.Error("the local agent exited", "err", err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// serverBaseURL is how a process on this machine reaches the server listening on listenAddr (the listener's
// address: with --listen host:0 only the listener knows the port).
func serverBaseURL(cfg serverConfig, listenAddr string) string {
	host, port, _ := net.SplitHostPort(listenAddr)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "https"
	if cfg.TLS == "off" {
		scheme = "http"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// waitReady polls /readyz until the server answers 200 or ctx ends.
func waitReady(ctx context.Context, base string, caPEM []byte) bool {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsCfg.RootCAs = pool
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		} else if errors.Is(err, context.Canceled) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond): // the server is starting: poll again
		}
	}
}

// localAgentRuntime is the local agent's runtime for mode (auto, containerd or process) and why it was chosen:
// auto takes containerd — container images, as on any Kubernetes node — when containerd and runc are on the
// PATH (the agent runs its own containerd when no system one answers), else the process runtime, which runs
// only pods that give a command.
func localAgentRuntime(mode string, lookPath func(string) (string, error)) (runtime, why string) {
	switch mode {
	case "containerd", "process":
		return mode, "--local-agent-runtime " + mode
	}
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := lookPath(bin); err != nil {
			return "process", bin + " is not installed (scripts/ensure-runtime.sh installs it): pods run as host processes and need a command; container images do not run"
		}
	}
	return "containerd", "containerd and runc are installed"
}
