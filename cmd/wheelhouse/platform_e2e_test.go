package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// platformCall sends a platform API request with token and returns the status and body.
func platformCall(t *testing.T, base, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+"/platform/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestPlatformAPI drives the platform API of the real binary the way an automation user would (HTTP + kubectl):
// create a cluster, download its kubeconfig and use it, mint and revoke an API token, read the audit log.
func TestPlatformAPI(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	call := func(token, method, path, body string, want int) []byte {
		t.Helper()
		code, b := platformCall(t, p.url, token, method, path, body)
		if code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	call(e2eToken, "POST", "/teams/default/clusters", `{"id":"staging","name":"Staging"}`, 201)
	kc := call(e2eToken, "POST", "/clusters/staging/kubeconfig", "", 201)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	k := &kubectl{t: t, bin: kbin, kubeconfig: path}
	contains(t, k.must("", "get", "namespaces"), "default", "kube-system", "kube-public", "kube-node-lease")
	k.must("", "create", "configmap", "only-in-staging", "--from-literal=a=b")
	owner := kubectlFor(t, bin, kbin, p.url, dataDir, e2eToken) // cluster default
	if out, err := owner.run("", "get", "configmap", "only-in-staging"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("an object of cluster staging is visible in cluster default: %v", err)
	}

	var created struct {
		Token    string
		APIToken struct{ ID string }
	}
	if err := json.Unmarshal(call(e2eToken, "POST", "/tokens", `{"name":"ci"}`, 201), &created); err != nil {
		t.Fatal(err)
	}
	ci := kubectlFor(t, bin, kbin, p.url, dataDir, created.Token)
	ci.must("", "get", "pods")
	call(e2eToken, "DELETE", "/tokens/"+created.APIToken.ID, "", 204)
	contains(t, ci.fails("get", "pods"), "Unauthorized")

	code, body := platformCall(t, p.url, e2eToken, "POST", "/teams/default/clusters", `{"id":"Not Valid","name":""}`)
	if code != 422 || !strings.Contains(string(body), `"field":"id"`) {
		t.Errorf("invalid cluster: %d %s", code, body)
	}
	audit := string(call(e2eToken, "GET", "/teams/default/audit", "", 200))
	for _, want := range []string{"POST /teams/:team/clusters", "DELETE /tokens/:id", `"result":"422"`, "admin@localhost"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
	// Kubernetes API writes are audited too (written in the background, so poll).
	waitFor(t, func() bool {
		log := string(call(e2eToken, "GET", "/teams/default/audit?cluster=staging", "", 200))
		return strings.Contains(log, `"action":"create configmaps"`) &&
			strings.Contains(log, `"resource":"/clusters/staging/api/v1/namespaces/default/configmaps"`)
	})
	call(e2eToken, "DELETE", "/clusters/staging", "", 204)
	contains(t, k.fails("get", "namespaces"), "NotFound")
}
