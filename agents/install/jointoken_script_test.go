package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tokenFile is where the script leaves the join token for the agent's first start.
const tokenFile = "etc/wheelhouse/join-token"

// TestScriptKeepsNoJoinTokenAfterJoin: the join token never enters agent.env (or the unit); it waits in its own
// 0600 file for the agent's first start, which deletes it once the node's credential is kept (agents/jointoken.go);
// a rerun on a node that has joined writes no token again, removes one left over, and restarts nothing.
func TestScriptKeepsNoJoinTokenAfterJoin(t *testing.T) {
	for name, shell := range shells() {
		t.Run(name, func(t *testing.T) {
			srv := newAgentServer(t, serverOptions{})
			script := srv.script(t)
			m := newMachine(t, shell)
			args := []string{"--server", srv.URL, "--token", srv.Token, "--node-name", "node-1"}
			if out, err := m.install(t, script, args...); err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			secret := srv.Token[strings.LastIndexByte(srv.Token, '.')+1:]
			wantNoToken := func(when string) {
				t.Helper()
				for _, f := range []string{envFile, unitFile, uninstallFile} {
					if got := m.read(t, f); strings.Contains(got, secret) || strings.Contains(got, "WHEELHOUSE_TOKEN=") {
						t.Errorf("%s: %s holds the join token:\n%s", when, f, got)
					}
				}
			}
			wantNoToken("after the install")
			if env := m.read(t, envFile); !strings.Contains(env, "\nWHEELHOUSE_TOKEN_FILE=/etc/wheelhouse/join-token\n") {
				t.Errorf("agent.env does not name the token file:\n%s", env)
			}
			if got := m.read(t, tokenFile); got != srv.Token+"\n" {
				t.Errorf("join-token holds %q, want the token", got)
			}
			wantMode(t, m, tokenFile, 0o600)

			// The agent's first start: it joins, keeps its credential and deletes the token file.
			joined(t, m)
			if err := os.Remove(filepath.Join(m.root, tokenFile)); err != nil {
				t.Fatal(err)
			}
			logged := m.systemctl(t)
			before := m.stats(t)
			out, err := m.install(t, script, args...)
			if err != nil || !strings.Contains(out, "nothing changed") {
				t.Fatalf("rerun after the join: %v\n%s", err, out)
			}
			if got := m.rewritten(t, before); len(got) > 0 {
				t.Errorf("a rerun after the join rewrote %v", got)
			}
			if _, err := os.Stat(filepath.Join(m.root, tokenFile)); !os.IsNotExist(err) {
				t.Errorf("a rerun after the join wrote the token again: %v", err)
			}
			wantNoToken("after a rerun")

			// A token file left beside a joined node (an agent that did not delete it) is removed.
			writeFile(t, filepath.Join(m.root, tokenFile), []byte(srv.Token+"\n"))
			if out, err := m.install(t, script, args...); err != nil || !strings.Contains(out, "removed /etc/wheelhouse/join-token") {
				t.Fatalf("rerun with a token left over: %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(m.root, tokenFile)); !os.IsNotExist(err) {
				t.Errorf("the left-over token file is still there: %v", err)
			}
			if got := m.systemctl(t); got != logged {
				t.Errorf("reruns after the join called systemctl:\n%s", strings.TrimPrefix(got, logged))
			}
		})
	}
}

// joined gives the machine the identity a joined agent keeps (agents/join): node.json beside its credential.
func joined(t *testing.T, m *machine) {
	t.Helper()
	dir := filepath.Join(m.root, dataDir, "identity")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "credential"), []byte("whn_credential\n"))
	writeFile(t, filepath.Join(dir, "node.json"), []byte(`{"nodeName":"node-1"}`+"\n"))
}
