package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The real agents run each in a network namespace of its own (two agents in one would fight over the bridge
// wh0, the nftables table and the routes), joined by a host bridge that also carries the server's address:
//
//	host: whperf0 10.254.0.1/24 (the server listens here)  ←veth→  netns whperf-<i>: eth0 10.254.0.<10+i>/24
//
// Only the network namespace differs (nsenter --net): the agents share the host's mount namespace, /sys and
// cgroups, as a real agent does.
const (
	perfBridge   = "whperf0"
	perfHostIP   = "10.254.0.1"
	perfNetnsPfx = "whperf-"
)

func perfNetns(i int) string   { return perfNetnsPfx + strconv.Itoa(i) }
func perfAgentIP(i int) string { return "10.254.0." + strconv.Itoa(10+i) }

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNetns creates the host bridge and n namespaces wired to it (removing leftovers of an earlier run first);
// the returned function removes them.
func setupNetns(n int) (func(), error) {
	teardown := func() {
		for i := range 200 {
			if _, err := os.Stat("/run/netns/" + perfNetns(i)); err == nil {
				_ = ipCmd("netns", "del", perfNetns(i))
			}
		}
		_ = exec.Command("ip", "link", "del", perfBridge).Run()
	}
	teardown()
	if os.Geteuid() != 0 {
		return teardown, fmt.Errorf("the real agents need root (network namespaces, cgroups)")
	}
	steps := [][]string{
		{"link", "add", perfBridge, "type", "bridge"},
		{"addr", "add", perfHostIP + "/24", "dev", perfBridge},
		{"link", "set", perfBridge, "up"},
	}
	for i := range n {
		ns, host := perfNetns(i), "whp"+strconv.Itoa(i)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", host, "master", perfBridge, "up"},
			[]string{"-n", ns, "addr", "add", perfAgentIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "route", "add", "default", "via", perfHostIP})
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			teardown()
			return func() {}, err
		}
	}
	return teardown, nil
}

// startServerAt runs `wheelhouse server` listening on host (the bridge's address, so the serving certificate
// covers it) and returns once /readyz answers.
func startServerAt(ctx context.Context, bin, host, dbURL, dir, token string) (*apiServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	listen := host + ":" + strconv.Itoa(port)
	cmd := exec.Command(bin, "server", "--listen", listen, "--database-url", dbURL, "--data-dir", dir, "--log-level", "warn")
	if addr := os.Getenv("PERF_SERVER_DEBUG_LISTEN"); addr != "" { // profile the server: go tool pprof http://<addr>/debug/pprof/profile
		cmd.Args = append(cmd.Args, "--debug-listen", addr)
	}
	cmd.Env = cleanEnv("WHEELHOUSE_BOOTSTRAP_TOKEN=" + token)
	proc, err := startChild("server", cmd, filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s := &apiServer{name: "server", proc: proc, base: "https://" + listen}
	s.apiBase = s.base + "/clusters/" + clusterID
	if err := s.waitReady(ctx, filepath.Join(dir, "tls", "ca.crt"), token, 90*time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	return s, nil
}

// cleanEnv is the harness's environment without any WHEELHOUSE_* variable, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHEELHOUSE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// platform calls the server's platform API with the bootstrap token and decodes a JSON answer into out.
func (s *apiServer) platform(ctx context.Context, method, path string, body, out any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/platform/v1"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, res.Status, strings.TrimSpace(string(answer)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// joinToken creates a join token for cluster allowing uses joins.
func (s *apiServer) joinToken(ctx context.Context, cluster string, uses int) (string, error) {
	var created struct{ Token string }
	err := s.platform(ctx, http.MethodPost, "/clusters/"+cluster+"/join-tokens",
		map[string]any{"description": "agentperf", "maxUses": uses}, &created)
	return created.Token, err
}

// clusterClient is an admin clientset (the bootstrap token) for another cluster of the server.
func (s *apiServer) clusterClient(cluster string) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(s.cfg)
	cfg.Host = s.base + "/clusters/" + cluster
	return kubernetes.NewForConfig(cfg)
}

// startAgent runs `wheelhouse agent` with args; netns "" runs it in the host's network namespace. nsenter
// execs the agent, so the child's PID is the agent's.
func startAgent(name, bin, netns, logPath string, args ...string) (*child, error) {
	argv := append([]string{"agent"}, args...)
	cmd := exec.Command(bin, argv...)
	if netns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + netns, "--", bin}, argv...)...)
	}
	cmd.Env = cleanEnv()
	return startChild(name, cmd, logPath)
}

// killShims kills what is left of the process runtime's shims of bin (and their containers) after the agents
// stopped: the normal path deletes every pod first, so this finds nothing unless a run was interrupted.
func killShims(bin string) int {
	killed := 0
	for _, pid := range shimPIDs(bin) {
		for _, c := range childrenOf(pid) {
			_ = syscall.Kill(-c, syscall.SIGKILL)
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed++
	}
	return killed
}

// shimPIDs are the processes running bin as the runtime's shim.
func shimPIDs(bin string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		exe, err := os.Readlink(d + "/exe")
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != bin {
			continue
		}
		argv, _ := os.ReadFile(d + "/cmdline")
		if arg0, _, _ := bytes.Cut(argv, []byte{0}); strings.Contains(string(arg0), "shim") {
			n, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, n)
		}
	}
	return out
}
