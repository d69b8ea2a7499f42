package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The --registries file: installed for the agent (agents/registries reads it and writes containerd's hosts
// directories), named in agent.env, and looked up by the containerd the script configures.
const (
	registriesFile = "etc/wheelhouse/registries.yaml"
	registriesEnv  = "\nWHEELHOUSE_REGISTRIES=/etc/wheelhouse/registries.yaml\n"
	// configPath is containerd's registry hosts line: the agent's directories first, then the machine's own.
	configPath = `config_path = "/var/lib/wheelhouse-agent/registries.d:/etc/containerd/certs.d"`
)

const registriesYAML = `mirrors:
  docker.io:
    endpoint:
      - "https://mirror.example:5000"
configs:
  "mirror.example:5000":
    auth:
      username: puller
      password: s3cret
`

// containerdMachine is a machine with stand-ins for containerd, runc and the CNI plugins under its root.
func containerdMachine(t *testing.T, shell []string) *machine {
	t.Helper()
	m := newMachine(t, shell)
	for _, f := range []string{"usr/bin/containerd", "usr/sbin/runc", "usr/lib/cni/bridge"} {
		writeFile(t, filepath.Join(m.root, f), []byte("#!/bin/sh\n"))
	}
	return m
}

// statRel is the file's identity and time, to tell whether a rerun rewrote it.
func statRel(t *testing.T, m *machine, rel string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(filepath.Join(m.root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantAbsent(t *testing.T, m *machine, rel, when string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(m.root, rel)); !os.IsNotExist(err) {
		t.Errorf("%s: %s is still there (%v)", when, rel, err)
	}
}

// TestScriptRegistries: --registries with the containerd runtime installs the file (0600) and names it in
// agent.env, and containerd's configuration looks up the agent's hosts directories; a rerun without it keeps it
// and changes nothing; a changed file is rewritten and restarts the agent (not containerd); --registries none
// removes it and its env line; uninstalling removes it.
func TestScriptRegistries(t *testing.T) {
	for name, shell := range shells() {
		t.Run(name, func(t *testing.T) {
			srv := newAgentServer(t, serverOptions{})
			script := srv.script(t)
			m := containerdMachine(t, shell)
			src := writeFile(t, filepath.Join(t.TempDir(), "registries.yaml"), []byte(registriesYAML))
			args := []string{"--server", srv.URL, "--token", srv.Token, "--node-name", "node-1"}
			out, err := m.install(t, script, append(args, "--runtime", "containerd", "--registries", src)...)
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if strings.Contains(out, "the process runtime ignores it") {
				t.Errorf("the containerd install printed the process runtime's note:\n%s", out)
			}
			if got := m.read(t, registriesFile); got != registriesYAML {
				t.Errorf("registries.yaml holds %q, want the given file", got)
			}
			wantMode(t, m, registriesFile, 0o600)
			if env := m.read(t, envFile); !strings.Contains(env, registriesEnv) {
				t.Errorf("agent.env does not name registries.yaml:\n%s", env)
			}
			if conf := m.read(t, "etc/containerd/config.toml"); !strings.Contains(conf, "\n    "+configPath+"\n") {
				t.Errorf("config.toml lacks %q:\n%s", configPath, conf)
			}
			logged := m.systemctl(t)

			// A rerun without --registries keeps the file and its env line, and rewrites nothing.
			before, yamlBefore := m.stats(t), statRel(t, m, registriesFile)
			out, err = m.install(t, script, args...)
			if err != nil || !strings.Contains(out, "nothing changed") {
				t.Fatalf("rerun without --registries: %v\n%s", err, out)
			}
			if got := m.rewritten(t, before); len(got) > 0 {
				t.Errorf("a rerun without --registries rewrote %v", got)
			}
			if st := statRel(t, m, registriesFile); !os.SameFile(st, yamlBefore) || !st.ModTime().Equal(yamlBefore.ModTime()) {
				t.Error("a rerun without --registries rewrote registries.yaml")
			}
			if env := m.read(t, envFile); !strings.Contains(env, registriesEnv) {
				t.Errorf("a rerun without --registries dropped the env line:\n%s", env)
			}
			if got := m.systemctl(t); got != logged {
				t.Errorf("an unchanged rerun called systemctl:\n%s", strings.TrimPrefix(got, logged))
			}

			// A changed file is rewritten; the agent restarts to read it, containerd does not.
			changed := registriesYAML + `  "other.example":
    tls:
      insecure_skip_verify: true
`
			writeFile(t, src, []byte(changed))
			out, err = m.install(t, script, append(args, "--registries", src)...)
			if err != nil || !strings.Contains(out, "wrote /etc/wheelhouse/registries.yaml") {
				t.Fatalf("rerun with a changed file: %v\n%s", err, out)
			}
			if got := m.read(t, registriesFile); got != changed {
				t.Errorf("registries.yaml holds %q after the change, want %q", got, changed)
			}
			wantMode(t, m, registriesFile, 0o600)
			if got := m.rewritten(t, before); len(got) > 0 {
				t.Errorf("a changed registries.yaml also rewrote %v", got)
			}
			if got := strings.TrimPrefix(m.systemctl(t), logged); got != installed {
				t.Errorf("systemctl calls for a changed registries.yaml:\n%s\nwant:\n%s", got, installed)
			}
			logged = m.systemctl(t)

			// --registries none removes the file and its env line.
			out, err = m.install(t, script, append(args, "--registries", "none")...)
			if err != nil || !strings.Contains(out, "removed /etc/wheelhouse/registries.yaml") {
				t.Fatalf("--registries none: %v\n%s", err, out)
			}
			wantAbsent(t, m, registriesFile, "after --registries none")
			if env := m.read(t, envFile); strings.Contains(env, "WHEELHOUSE_REGISTRIES") {
				t.Errorf("agent.env still names registries.yaml after --registries none:\n%s", env)
			}
			if got := strings.TrimPrefix(m.systemctl(t), logged); got != installed {
				t.Errorf("systemctl calls for --registries none:\n%s\nwant:\n%s", got, installed)
			}
			// Again: nothing left to remove.
			out, err = m.install(t, script, append(args, "--registries", "none")...)
			if err != nil || !strings.Contains(out, "nothing changed") {
				t.Fatalf("a second --registries none: %v\n%s", err, out)
			}

			// Uninstalling removes an installed registries.yaml with the agent's other files.
			if out, err := m.install(t, script, append(args, "--registries", src)...); err != nil {
				t.Fatalf("reinstall with --registries: %v\n%s", err, out)
			}
			if out, err := m.command(t, nil, m.shell[0], append(m.shell[1:], filepath.Join(m.root, uninstallFile))...); err != nil {
				t.Fatalf("uninstall: %v\n%s", err, out)
			}
			wantAbsent(t, m, registriesFile, "after uninstalling")
			wantAbsent(t, m, "etc/wheelhouse", "after uninstalling")
		})
	}
}

// TestScriptRegistriesProcessRuntime: with the process runtime the file is installed all the same (the agent
// reads it), with a note that it has no effect there; uninstalling leaves nothing of it.
func TestScriptRegistriesProcessRuntime(t *testing.T) {
	srv := newAgentServer(t, serverOptions{})
	script := srv.script(t)
	m := newMachine(t, []string{"sh"})
	src := writeFile(t, filepath.Join(t.TempDir(), "registries.yaml"), []byte(registriesYAML))
	out, err := m.install(t, script, "--server", srv.URL, "--token", srv.Token, "--node-name", "node-1", "--registries", src)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if !strings.Contains(out, "note: --registries configures image pulls, which only --runtime containerd makes") {
		t.Errorf("the output has no note about the process runtime:\n%s", out)
	}
	if got := m.read(t, registriesFile); got != registriesYAML {
		t.Errorf("registries.yaml holds %q, want the given file", got)
	}
	wantMode(t, m, registriesFile, 0o600)
	if env := m.read(t, envFile); !strings.Contains(env, registriesEnv) {
		t.Errorf("agent.env does not name registries.yaml:\n%s", env)
	}
	testUninstall(t, m, script)
}

// TestScriptRegistriesRefused: a --registries that cannot be read is refused before anything is written.
func TestScriptRegistriesRefused(t *testing.T) {
	srv := newAgentServer(t, serverOptions{})
	script := srv.script(t)
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	dir := t.TempDir()
	for _, tc := range []struct {
		name, value, want string
	}{
		{"missing file", missing, "--registries " + missing + ": no such file"},
		{"a directory", dir, "--registries " + dir + ": not a readable file"},
		{"empty", "", "--registries: want a file (a registries.yaml), or none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := containerdMachine(t, []string{"sh"})
			stand := m.files(t)
			out, err := m.install(t, script, "--server", srv.URL, "--token", srv.Token, "--node-name", "node-1",
				"--runtime", "containerd", "--registries", tc.value)
			if err == nil {
				t.Errorf("the script succeeded:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the output does not say %q:\n%s", tc.want, out)
			}
			if got := m.files(t); strings.Join(got, " ") != strings.Join(stand, " ") {
				t.Errorf("the refused install wrote files: %v, before %v", got, stand)
			}
			if got := m.systemctl(t); got != "" {
				t.Errorf("the refused install called systemctl:\n%s", got)
			}
		})
	}
}
