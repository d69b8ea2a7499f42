package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestTenantIsolation is the tenant-isolation matrix: team B fills its cluster; team A's owner, with A's token,
// tries every served resource and subresource of B's cluster with every verb, plus discovery, OpenAPI and B's
// platform endpoints. Every answer is 404 and none mentions B's objects.
func TestTenantIsolation(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	dbURL := pgtest.NewEmptyDatabase(t)
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + dbURL, "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)

	// Team B: its own user, team and cluster, through the platform API, filled through kubectl.
	bUser := member(t, dbURL, bin, kbin, p.url, dataDir, "bea@example.com", "", "")
	bToken := tokenOf(t, bUser)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/teams", `{"id":"bteam","name":"Team B"}`},
		{"POST", "/teams/bteam/clusters", `{"id":"bcluster","name":"B"}`},
	} {
		if code, body := platformCall(t, p.url, bToken, c.method, c.path, c.body); code != 201 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	code, kc := platformCall(t, p.url, bToken, "POST", "/clusters/bcluster/kubeconfig", "")
	if code != 201 {
		t.Fatalf("kubeconfig: %d %s", code, kc)
	}
	kcPath := filepath.Join(t.TempDir(), "b.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	b := &kubectl{t: t, bin: kbin, kubeconfig: kcPath}
	b.must("", "create", "namespace", "bsecretns")
	b.must("", "create", "configmap", "bsecretdata", "-n", "bsecretns", "--from-literal=k=bsecretvalue")
	b.must("", "create", "secret", "generic", "bsecretcreds", "-n", "bsecretns", "--from-literal=k=bsecretvalue")
	leaks := []string{"bsecretns", "bsecretdata", "bsecretcreds", "bsecretvalue"}

	// What the server serves, from discovery on A's own cluster.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	type probe struct{ method, path, body string }
	var probes []probe
	base := "/clusters/bcluster"
	for _, l := range lists {
		gvPath := "/apis/" + l.GroupVersion
		if !strings.Contains(l.GroupVersion, "/") {
			gvPath = "/api/" + l.GroupVersion
		}
		for _, r := range l.APIResources {
			res, sub, _ := strings.Cut(r.Name, "/")
			coll := base + gvPath + "/" + res
			if r.Namespaced {
				coll = base + gvPath + "/namespaces/bsecretns/" + res
			}
			obj := coll + "/bsecretdata"
			if sub != "" {
				obj += "/" + sub
			}
			for _, v := range r.Verbs {
				switch v {
				case "get":
					probes = append(probes, probe{"GET", obj, ""})
				case "list":
					probes = append(probes, probe{"GET", coll, ""}, probe{"GET", base + gvPath + "/" + res, ""})
				case "watch":
					probes = append(probes, probe{"GET", coll + "?watch=1&timeoutSeconds=1", ""})
				case "create":
					target := coll
					if sub != "" {
						target = obj
					}
					probes = append(probes, probe{"POST", target, `{"metadata":{"name":"x"}}`})
				case "update":
					probes = append(probes, probe{"PUT", obj, `{"metadata":{"name":"bsecretdata"}}`})
				case "patch":
					probes = append(probes, probe{"PATCH", obj, `{"metadata":{"labels":{"pwned":"yes"}}}`})
				case "delete":
					probes = append(probes, probe{"DELETE", obj, ""})
				case "deletecollection":
					probes = append(probes, probe{"DELETE", coll, ""})
				}
			}
		}
	}
	for _, path := range []string{"/api", "/apis", "/api/v1", "/version", "/openapi/v2", "/openapi/v3", "/apis/apps/v1"} {
		probes = append(probes, probe{"GET", base + path, ""})
	}
	if len(probes) < 100 {
		t.Fatalf("only %d probes: discovery looks wrong", len(probes))
	}
	for _, pr := range probes {
		req, err := http.NewRequestWithContext(t.Context(), pr.method, p.url+pr.path, strings.NewReader(pr.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e2eToken) // team A's owner
		req.Header.Set("Content-Type", "application/merge-patch+json")
		if pr.method != "PATCH" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404: %s", pr.method, pr.path, resp.StatusCode, body)
		}
		for _, l := range leaks {
			if strings.Contains(string(body), l) {
				t.Errorf("%s %s leaks %q: %s", pr.method, pr.path, l, body)
			}
		}
	}
	t.Logf("%d requests to another team's cluster, all 404", len(probes))

	// B's platform endpoints do not exist for A either; and B's objects are untouched.
	for _, path := range []string{"/teams/bteam", "/teams/bteam/members", "/teams/bteam/clusters", "/clusters/bcluster"} {
		if code, body := platformCall(t, p.url, e2eToken, "GET", path, ""); code != 404 {
			t.Errorf("GET %s as team A: %d %s", path, code, body)
		}
	}
	out := b.must("", "get", "configmap", "bsecretdata", "-n", "bsecretns", "-o", "json")
	var cm metav1.PartialObjectMetadata
	if err := json.Unmarshal([]byte(out), &cm); err != nil || cm.Labels["pwned"] != "" {
		t.Errorf("team B's configmap was changed: %v %v", cm.Labels, err)
	}
}

// tokenOf is the bearer token in a kubectl's kubeconfig.
func tokenOf(t *testing.T, k *kubectl) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		return a.Token
	}
	t.Fatal("kubeconfig without a user")
	return ""
}
