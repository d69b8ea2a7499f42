package install

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// The script's tests run it, with real curl, against a live server: the install endpoints and a
// /platform/v1/cacerts serving the CA of the test server's certificate, as the platform API does. --root points
// it at a temporary directory and a stand-in systemctl records what it is asked to do.

// Paths the script writes, under its root.
const (
	binFile       = "usr/local/bin/wheelhouse"
	envFile       = "etc/wheelhouse/agent.env"
	unitFile      = "etc/systemd/system/wheelhouse-agent.service"
	uninstallFile = "usr/local/bin/wheelhouse-agent-uninstall.sh"
	dataDir       = "var/lib/wheelhouse-agent"
)

// installed is the systemctl log of an install that changed something.
const installed = "daemon-reload\nenable wheelhouse-agent\nrestart wheelhouse-agent\n"

// agentServer is a live server for the script.
type agentServer struct {
	URL    string
	CAFile string // the PEM of the server's CA, for curl --cacert
	Token  string // a join token pinning the server's CA
	Binary []byte // what it serves as the agent
	ts     *httptest.Server
}

type serverOptions struct {
	plainHTTP bool
	// wrongSum serves this as every binary's checksum.
	wrongSum string
}

func newAgentServer(t *testing.T, opts serverOptions) *agentServer {
	t.Helper()
	s := &agentServer{Binary: []byte("#!/bin/sh\necho a stand-in for the wheelhouse agent\n")}
	bin := writeFile(t, filepath.Join(t.TempDir(), "wheelhouse"), s.Binary)
	e := newEcho(t, Config{Binaries: map[string]string{"amd64": bin, "arm64": bin}})
	if opts.wrongSum != "" {
		e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if c.Request().URL.Path == ChecksumPath {
					return c.String(http.StatusOK, opts.wrongSum+"\n")
				}
				return next(c)
			}
		})
	}
	var caPEM []byte
	e.GET("/platform/v1/cacerts", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/x-pem-file", caPEM) })
	s.ts = httptest.NewUnstartedServer(e)
	if opts.plainHTTP {
		s.ts.Start()
	} else {
		s.ts.StartTLS()
		// httptest's certificate is its own CA.
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ts.Certificate().Raw})
	}
	t.Cleanup(s.ts.Close)
	s.URL = s.ts.URL
	s.CAFile = writeFile(t, filepath.Join(t.TempDir(), "ca.pem"), caPEM)
	pin := ""
	if !opts.plainHTTP {
		pin = sha256Hex(s.ts.Certificate().Raw)
	}
	s.Token = "K10" + pin + "::abc123.0123456789abcdefghijklmnopqrstuv"
	return s
}

// script is the install script as the server serves it.
func (s *agentServer) script(t *testing.T) []byte {
	t.Helper()
	resp, err := s.ts.Client().Get(s.URL + ScriptPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", ScriptPath, resp.StatusCode, err)
	}
	return b
}

// machine is a machine the script installs on: its root, a PATH with the stand-in systemctl, the systemctl log
// and its TMPDIR.
type machine struct {
	shell                   []string
	root, path, log, tmpDir string
}

// shells are the shells the script must run under: sh (dash on Debian) and busybox sh where installed.
func shells() map[string][]string {
	s := map[string][]string{"sh": {"sh"}}
	if _, err := exec.LookPath("busybox"); err == nil {
		s["busybox"] = []string{"busybox", "sh"}
	}
	return s
}

func newMachine(t *testing.T, shell []string) *machine {
	t.Helper()
	m := &machine{shell: shell, root: t.TempDir(), path: t.TempDir(), tmpDir: t.TempDir()}
	m.log = filepath.Join(m.path, "systemctl.log")
	writeFile(t, filepath.Join(m.path, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >>\"$SYSTEMCTL_LOG\"\n"))
	return m
}

// command runs name args with the machine's environment.
func (m *machine) command(t *testing.T, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Env = append(os.Environ(), "PATH="+m.path+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SYSTEMCTL_LOG="+m.log, "TMPDIR="+m.tmpDir)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if entries, _ := os.ReadDir(m.tmpDir); len(entries) > 0 {
		t.Errorf("the script left %d temporary files in TMPDIR (%s ...)", len(entries), entries[0].Name())
	}
	return string(out), err
}

// install runs the script as `... | sh -s - args`, with --root.
func (m *machine) install(t *testing.T, script []byte, args ...string) (string, error) {
	t.Helper()
	return m.command(t, script, m.shell[0], append(append(m.shell[1:], "-s", "-", "--root", m.root), args...)...)
}

func (m *machine) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (m *machine) systemctl(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(m.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// files lists the files under the root (relative), sorted.
func (m *machine) files(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(m.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(m.root, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stats records the installed files' identities and times, to prove which were rewritten.
func (m *machine) stats(t *testing.T) map[string]os.FileInfo {
	t.Helper()
	out := map[string]os.FileInfo{}
	for _, f := range []string{binFile, envFile, unitFile, uninstallFile} {
		st, err := os.Stat(filepath.Join(m.root, f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = st
	}
	return out
}

// rewritten lists the files whose inode or time changed since before.
func (m *machine) rewritten(t *testing.T, before map[string]os.FileInfo) []string {
	t.Helper()
	var out []string
	for f, st := range m.stats(t) {
		if !os.SameFile(st, before[f]) || !st.ModTime().Equal(before[f].ModTime()) {
			out = append(out, f)
		}
	}
	return out
}

func wantMode(t *testing.T, m *machine, rel string, mode fs.FileMode) {
	t.Helper()
	st, err := os.Stat(filepath.Join(m.root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != mode {
		t.Errorf("%s has mode %o, want %o", rel, st.Mode().Perm(), mode)
	}
}

// TestScriptInstall installs, reruns unchanged, reruns with a new label, and uninstalls.
func TestScriptInstall(t *testing.T) {
	for name, shell := range shells() {
		t.Run(name, func(t *testing.T) {
			srv := newAgentServer(t, serverOptions{})
			m := newMachine(t, shell)
			// The one-liner, with the server's rendered URL as --server.
			pipe := "curl -sfL --cacert \"$1\" \"$2/install.sh\" | " + strings.Join(shell, " ") +
				" -s - --root \"$3\" --token \"$4\" --node-name node-1 --label zone=a --taint dedicated=db:NoSchedule"
			out, err := m.command(t, nil, "sh", "-c", pipe, "sh", srv.CAFile, srv.URL, m.root, srv.Token)
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if got := m.read(t, binFile); got != string(srv.Binary) {
				t.Errorf("the installed binary is %q, not the served one", got)
			}
			wantMode(t, m, binFile, 0o755)
			wantMode(t, m, envFile, 0o600)
			wantMode(t, m, uninstallFile, 0o755)
			wantEnv := "WHEELHOUSE_SERVER=" + srv.URL + "\nWHEELHOUSE_TOKEN_FILE=/etc/wheelhouse/join-token\nWHEELHOUSE_NODE_NAME=node-1\n" +
				"WHEELHOUSE_NODE_LABELS=zone=a\nWHEELHOUSE_NODE_TAINTS=dedicated=db:NoSchedule\n"
			if env := m.read(t, envFile); !strings.HasSuffix(env, wantEnv) {
				t.Errorf("agent.env:\n%s\nwant it to end with:\n%s", env, wantEnv)
			}
			unit := m.read(t, unitFile)
			for _, line := range []string{"ExecStart=/usr/local/bin/wheelhouse agent\n", "EnvironmentFile=/etc/wheelhouse/agent.env\n",
				"Restart=always\n", "RestartSec=5\n", "KillMode=process\n", "Delegate=yes\n", "After=network-online.target\n"} {
				if !strings.Contains(unit, "\n"+line) {
					t.Errorf("the unit lacks %q:\n%s", line, unit)
				}
			}
			if strings.Contains(unit, "abc123") {
				t.Error("the unit holds the join token")
			}
			if got := m.systemctl(t); got != installed {
				t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, installed)
			}

			script := srv.script(t)
			before := m.stats(t)
			args := []string{"--server", srv.URL, "--token", srv.Token, "--node-name", "node-1", "--label", "zone=a", "--taint", "dedicated=db:NoSchedule"}
			out, err = m.install(t, script, args...)
			if err != nil || !strings.Contains(out, "nothing changed") {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			if got := m.rewritten(t, before); len(got) > 0 {
				t.Errorf("an unchanged rerun rewrote %v", got)
			}
			if got := m.systemctl(t); got != installed {
				t.Errorf("an unchanged rerun called systemctl:\n%s", strings.TrimPrefix(got, installed))
			}

			// A new label, and no --node-name: the node keeps its name.
			out, err = m.install(t, script, "--server", srv.URL, "--token", srv.Token, "--label", "zone=a", "--label", "disk=ssd",
				"--taint", "dedicated=db:NoSchedule")
			if err != nil {
				t.Fatalf("rerun with a label: %v\n%s", err, out)
			}
			if got := m.rewritten(t, before); len(got) != 1 || got[0] != envFile {
				t.Errorf("a new label rewrote %v, want only %s", got, envFile)
			}
			if env := m.read(t, envFile); !strings.Contains(env, "\nWHEELHOUSE_NODE_LABELS=zone=a,disk=ssd\n") ||
				!strings.Contains(env, "\nWHEELHOUSE_NODE_NAME=node-1\n") {
				t.Errorf("agent.env after the new label:\n%s", env)
			}
			wantMode(t, m, envFile, 0o600)
			if got := m.systemctl(t); got != installed+installed {
				t.Errorf("systemctl calls after the new label:\n%s", strings.TrimPrefix(got, installed))
			}

			testUninstall(t, m, script)
		})
	}
}

// testUninstall runs the installed uninstall script (the data dir stays), then the installer's --uninstall --purge.
func testUninstall(t *testing.T, m *machine, script []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(m.root, dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m.root, dataDir, "credential"), []byte("secret"))
	logged := m.systemctl(t)
	out, err := m.command(t, nil, m.shell[0], append(m.shell[1:], filepath.Join(m.root, uninstallFile))...)
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if got, want := m.files(t), []string{dataDir + "/credential"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after uninstalling the root holds %v, want %v", got, want)
	}
	want := "disable wheelhouse-agent\nkill --signal=SIGTERM wheelhouse-agent\nstop wheelhouse-agent\n" +
		"kill --signal=SIGKILL wheelhouse-agent\ndaemon-reload\n"
	if got := strings.TrimPrefix(m.systemctl(t), logged); got != want {
		t.Errorf("uninstall's systemctl calls:\n%s\nwant:\n%s", got, want)
	}
	if out, err := m.install(t, script, "--uninstall", "--purge"); err != nil {
		t.Fatalf("--uninstall --purge: %v\n%s", err, out)
	}
	if got := m.files(t); len(got) > 0 {
		t.Errorf("after --uninstall --purge the root holds %v", got)
	}
	if _, err := os.Stat(filepath.Join(m.root, dataDir)); !os.IsNotExist(err) {
		t.Errorf("--purge left the data dir: %v", err)
	}
}

// TestScriptRefuses: every failure exits non-zero, says why, and leaves nothing behind.
func TestScriptRefuses(t *testing.T) {
	otherPin := sha256.Sum256([]byte("another CA"))
	for name, shell := range shells() {
		for _, tc := range []struct {
			name string
			opts serverOptions
			// args builds the arguments from the server.
			args func(s *agentServer) []string
			want string // in the output
		}{
			{"wrong checksum", serverOptions{wrongSum: strings.Repeat("0", 64)},
				func(s *agentServer) []string { return []string{"--server", s.URL, "--token", s.Token} },
				"refusing to install it"},
			{"wrong CA", serverOptions{},
				func(s *agentServer) []string {
					return []string{"--server", s.URL, "--token", "K10" + hex.EncodeToString(otherPin[:]) + strings.TrimPrefix(s.Token, "K10"+sha256Hex(s.ts.Certificate().Raw))}
				},
				"the server's CA does not match the join token"},
			{"plain http", serverOptions{plainHTTP: true},
				func(s *agentServer) []string { return []string{"--server", s.URL, "--token", s.Token} },
				"refusing the plain-http server"},
			{"malformed token", serverOptions{},
				func(s *agentServer) []string { return []string{"--server", s.URL, "--token", "K10::nope"} },
				"the join token is malformed"},
			{"bad label", serverOptions{},
				func(s *agentServer) []string {
					return []string{"--server", s.URL, "--token", s.Token, "--label", "a=b\nc"}
				},
				"want key=value"},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				srv := newAgentServer(t, tc.opts)
				m := newMachine(t, shell)
				out, err := m.install(t, srv.script(t), tc.args(srv)...)
				if err == nil {
					t.Errorf("the script succeeded:\n%s", out)
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("the output does not say %q:\n%s", tc.want, out)
				}
				if files := m.files(t); len(files) > 0 {
					t.Errorf("the script wrote %v", files)
				}
				if got := m.systemctl(t); got != "" {
					t.Errorf("the script called systemctl:\n%s", got)
				}
			})
		}
	}
}

// TestScriptTruncated: a download cut short anywhere runs nothing (every definition is inside the function the
// last line calls, so the shell stops at a syntax error).
func TestScriptTruncated(t *testing.T) {
	for name, shell := range shells() {
		t.Run(name, func(t *testing.T) {
			srv := newAgentServer(t, serverOptions{})
			script := srv.script(t)
			for _, cut := range []int{1, 100, len(script) / 4, len(script) / 3, len(script) / 2, 2 * len(script) / 3,
				len(script) - 30, len(script) - 3} {
				m := newMachine(t, shell)
				out, err := m.install(t, script[:cut], "--server", srv.URL, "--token", srv.Token, "--node-name", "n")
				// Cut in the header comment, the shell runs nothing and succeeds; after, it must fail.
				inFunction := cut > bytes.Index(script, []byte("wheelhouse_install() {"))
				if (err == nil && inFunction) || strings.Contains(out, "wheelhouse-install:") {
					t.Errorf("the script cut at %d of %d bytes ran: %v\n%s", cut, len(script), err, out)
				}
				if files := m.files(t); len(files) > 0 {
					t.Errorf("the script cut at %d wrote %v", cut, files)
				}
				if got := m.systemctl(t); got != "" {
					t.Errorf("the script cut at %d called systemctl:\n%s", cut, got)
				}
			}
		})
	}
}

// TestScriptInsecureHTTP: with --insecure-http a plain-http server is accepted and the agent is told so.
func TestScriptInsecureHTTP(t *testing.T) {
	srv := newAgentServer(t, serverOptions{plainHTTP: true})
	m := newMachine(t, []string{"sh"})
	if out, err := m.install(t, srv.script(t), "--server", srv.URL, "--token", srv.Token, "--insecure-http", "--node-name", "dev"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if unit := m.read(t, unitFile); !strings.Contains(unit, "\nExecStart=/usr/local/bin/wheelhouse agent --insecure-http\n") {
		t.Errorf("the unit does not pass --insecure-http:\n%s", unit)
	}
}

// TestScriptNodeNameFromMachineID: the name is the short host name and a hash of the machine ID.
func TestScriptNodeNameFromMachineID(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(strings.ToLower(host), ".")
	const machineID = "0123456789abcdef0123456789abcdef"
	srv := newAgentServer(t, serverOptions{})
	m := newMachine(t, []string{"sh"})
	if err := os.MkdirAll(filepath.Join(m.root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m.root, "etc/machine-id"), []byte(machineID+"\n"))
	if out, err := m.install(t, srv.script(t), "--server", srv.URL, "--token", srv.Token, "--node-name-from-machine-id"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	want := "\nWHEELHOUSE_NODE_NAME=" + short + "-" + sha256Hex([]byte(machineID))[:8] + "\n"
	if env := m.read(t, envFile); !strings.Contains(env, want) {
		t.Errorf("agent.env:\n%s\nwant %q", env, want)
	}
}

// TestScriptContainerd: --runtime containerd on a machine that has containerd, runc and the CNI plugins (stand-ins
// under the root): containerd's configuration written (the previous one kept), containerd restarted before the
// agent, the agent's environment and unit; a rerun remembers the runtime; a machine without containerd under
// --root is refused with nothing written; uninstalling removes the agent's CNI configuration and leaves containerd.
func TestScriptContainerd(t *testing.T) {
	srv := newAgentServer(t, serverOptions{})
	script := srv.script(t)
	m := newMachine(t, []string{"sh"})
	for _, f := range []string{"usr/bin/containerd", "usr/sbin/runc", "usr/lib/cni/bridge"} {
		writeFile(t, filepath.Join(m.root, f), []byte("#!/bin/sh\n"))
	}
	const ctdConf = "etc/containerd/config.toml"
	writeFile(t, filepath.Join(m.root, ctdConf), []byte("# the distribution's\n"))
	args := []string{"--server", srv.URL, "--token", srv.Token, "--node-name", "node-1"}
	out, err := m.install(t, script, append(args, "--runtime", "containerd", "--proxy-mode", "nftables", "--pause-image", "mirror.example/pause:3.10")...)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	conf := m.read(t, ctdConf)
	for _, want := range []string{"# Written by the Wheelhouse installer", "restrict_oom_score_adj = true",
		`runtime_type = "io.containerd.runc.v2"`, "SystemdCgroup = false", `bin_dir = "/usr/lib/cni"`, `conf_dir = "/etc/cni/net.d"`, `sandbox_image = "mirror.example/pause:3.10"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("config.toml lacks %q:\n%s", want, conf)
		}
	}
	if got := m.read(t, ctdConf+".pre-wheelhouse"); got != "# the distribution's\n" {
		t.Errorf("the previous configuration was not kept: %q", got)
	}
	wantMode(t, m, ctdConf, 0o644)
	if env := m.read(t, envFile); !strings.HasSuffix(env, "WHEELHOUSE_NODE_NAME=node-1\nWHEELHOUSE_RUNTIME=containerd\n"+
		"WHEELHOUSE_CONTAINERD_ENDPOINT=unix:///run/containerd/containerd.sock\nWHEELHOUSE_PROXY_MODE=nftables\n") {
		t.Errorf("agent.env:\n%s", env)
	}
	if unit := m.read(t, unitFile); !strings.Contains(unit, "\nAfter=network-online.target containerd.service\n") {
		t.Errorf("the unit does not start after containerd:\n%s", unit)
	}
	want := "daemon-reload\nenable containerd\nrestart containerd\nenable wheelhouse-agent\nrestart wheelhouse-agent\n"
	if got := m.systemctl(t); got != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}

	// A rerun without --runtime (nor --pause-image) keeps containerd as it is and changes nothing.
	out, err = m.install(t, script, args...)
	if err != nil || !strings.Contains(out, "nothing changed") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	if got := m.systemctl(t); got != want {
		t.Errorf("an unchanged rerun called systemctl:\n%s", strings.TrimPrefix(got, want))
	}
	// Back to the process runtime: the agent is restarted, containerd left alone.
	if out, err = m.install(t, script, append(args, "--runtime", "process")...); err != nil {
		t.Fatalf("rerun with the process runtime: %v\n%s", err, out)
	}
	if env := m.read(t, envFile); strings.Contains(env, "WHEELHOUSE_RUNTIME") {
		t.Errorf("agent.env still names a runtime:\n%s", env)
	}
	if got := strings.TrimPrefix(m.systemctl(t), want); got != installed {
		t.Errorf("systemctl calls going back to process:\n%s\nwant:\n%s", got, installed)
	}

	writeFile(t, filepath.Join(m.root, "etc/cni/net.d/10-wheelhouse.conflist"), []byte("{}"))
	if out, err := m.command(t, nil, "sh", filepath.Join(m.root, uninstallFile)); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(m.root, "etc/cni/net.d/10-wheelhouse.conflist")); !os.IsNotExist(err) {
		t.Errorf("uninstalling left the agent's CNI configuration: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.root, ctdConf)); err != nil {
		t.Errorf("uninstalling removed containerd's configuration: %v", err)
	}

	t.Run("no containerd under --root", func(t *testing.T) {
		bare := newMachine(t, []string{"sh"})
		out, err := bare.install(t, script, append(args, "--runtime", "containerd")...)
		if err == nil || !strings.Contains(out, "containerd, runc or the CNI plugins are missing under") {
			t.Fatalf("want a refusal, got %v:\n%s", err, out)
		}
		if bare.systemctl(t) != "" {
			t.Errorf("the refused install called systemctl:\n%s", bare.systemctl(t))
		}
	})
	t.Run("a runtime it does not know", func(t *testing.T) {
		bare := newMachine(t, []string{"sh"})
		out, err := bare.install(t, script, append(args, "--runtime", "docker")...)
		if err == nil || !strings.Contains(out, "--runtime docker: want process or containerd") {
			t.Fatalf("want a refusal, got %v:\n%s", err, out)
		}
		if files := bare.files(t); len(files) > 0 {
			t.Errorf("the refused install wrote %v", files)
		}
	})
}
