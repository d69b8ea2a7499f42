package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestAgentKeepsOnlyItsCredential: a join token made by the CLI without --expires-in expires in a day; an agent
// given it in a file, as install.sh does (WHEELHOUSE_TOKEN_FILE), joins, keeps its node credential and deletes
// the token file; restarted without any token, it runs on the credential alone.
func TestAgentKeepsOnlyItsCredential(t *testing.T) {
	bin := buildBinary(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	cs := clientFor(t, bin, p.url, dataDir)
	created := time.Now()
	out, err := exec.Command(bin, "join-token", "create", "--server", p.url, "--token", e2eToken,
		"--cluster", "default", "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse join-token create: %v\n%s", err, out)
	}
	token := strings.TrimSpace(string(out))
	code, body := platformCall(t, p.url, e2eToken, "GET", "/clusters/default/join-tokens", "")
	var list struct {
		Items []struct{ ExpiresAt *time.Time }
	}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil || len(list.Items) != 1 {
		t.Fatalf("join tokens: %d %s", code, body)
	}
	if exp := list.Items[0].ExpiresAt; exp == nil || exp.Before(created.Add(23*time.Hour)) || exp.After(time.Now().Add(24*time.Hour)) {
		t.Errorf("the CLI's join token expires at %v, want a day after it was made", exp)
	}

	tokenFile := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentData := t.TempDir()
	const node = "keeper-0"
	healthz := func() (bool, string) {
		b, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(t.Context())
		return err == nil && string(b) == "ok", fmt.Sprint(string(b), err)
	}
	stop := startHollowAgent(t, bin, p.url, agentData, "WHEELHOUSE_TOKEN_FILE="+tokenFile)
	eventually(t, 60*time.Second, "the node joined and its token file deleted", func() (bool, string) {
		_, nerr := cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		_, ferr := os.Stat(tokenFile)
		return nerr == nil && os.IsNotExist(ferr), fmt.Sprint("node: ", nerr, "; token file: ", ferr)
	})
	if b, err := os.ReadFile(filepath.Join(agentData, "hollow", node, "identity", "credential")); err != nil || !strings.HasPrefix(string(b), "whn_") {
		t.Fatalf("the node's kept credential: %q %v", b, err)
	}
	eventually(t, 30*time.Second, "the node's kubelet reachable through its tunnel", healthz)
	stop()

	stop = startHollowAgent(t, bin, p.url, agentData, "WHEELHOUSE_TOKEN_FILE="+tokenFile)
	defer stop()
	eventually(t, 60*time.Second, "the restarted agent, without a token, reachable through its tunnel", healthz)
}

// startHollowAgent runs `wheelhouse agent --hollow 1 --node-name keeper` with env added to the test's; stop kills
// it (the test's cleanup does too).
func startHollowAgent(t *testing.T, bin, server, dataDir string, env ...string) (stop func()) {
	t.Helper()
	agent := exec.Command(bin, "agent", "--hollow", "1", "--node-name", "keeper", "--server", server, "--data-dir", dataDir)
	agent.Env = append(os.Environ(), env...)
	var log logLines
	agent.Stdout, agent.Stderr = &log, &log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = agent.Wait(); close(done) }()
	stop = func() {
		_ = agent.Process.Kill()
		<-done
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
	return stop
}
