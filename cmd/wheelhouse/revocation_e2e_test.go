package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// TestRevocationAcrossReplicas (issue 34, items 2, 4 and 5): access taken away through one replica ends what the
// other replica holds on it — a removed member's and a revoked token's watches (asked to last 100,000 s), a
// revoked node credential's tunnel, a deleted cluster's tunnels and watches — well before any periodic check
// could (tunnels are checked every minute, watches last up to an hour), and a deleted cluster's id can never be
// taken by another team.
func TestRevocationAcrossReplicas(t *testing.T) {
	bin := buildBinary(t)
	dataDir := t.TempDir()
	dbURL := pgtest.NewEmptyDatabase(t)
	env := []string{"WHEELHOUSE_DATABASE_URL=" + dbURL, "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}
	a := startServer(t, bin, env, "--data-dir", dataDir)
	a.waitReady(t)
	b := startServer(t, bin, env, "--data-dir", t.TempDir())
	b.waitReady(t)
	r := &revocationEnv{t: t, bin: bin, dataDir: dataDir, dbURL: dbURL, a: a, b: b}

	t.Run("removed member's watch ends", func(t *testing.T) {
		id, token := r.user(t, "bob@example.com", "member")
		w := r.openSecretWatch(t, r.client(t, b.url, "default", token))
		if code, body := platformCall(t, a.url, e2eToken, "DELETE", "/teams/default/members/"+id, ""); code != 204 {
			t.Fatalf("remove member: %d %s", code, body)
		}
		r.wantWatchEnded(t, w, "after-removal")
	})
	t.Run("revoked token's watch ends", func(t *testing.T) {
		_, token := r.user(t, "carol@example.com", "member")
		w := r.openSecretWatch(t, r.client(t, b.url, "default", token))
		code, body := platformCall(t, a.url, token, "GET", "/tokens", "")
		var toks struct {
			Items []struct{ ID string } `json:"items"`
		}
		if err := json.Unmarshal(body, &toks); code != 200 || err != nil || len(toks.Items) != 1 {
			t.Fatalf("GET /tokens: %d %s (%v)", code, body, err)
		}
		if code, body := platformCall(t, a.url, token, "DELETE", "/tokens/"+toks.Items[0].ID, ""); code != 204 {
			t.Fatalf("revoke token: %d %s", code, body)
		}
		r.wantWatchEnded(t, w, "after-revocation")
	})
	t.Run("revoked node credential's tunnel closes", func(t *testing.T) {
		admin := r.client(t, a.url, "default", e2eToken)
		r.startAgent(t, "default", "rev", b.url)
		r.wantKubelet(t, admin, "rev-0")
		if code, body := platformCall(t, a.url, e2eToken, "DELETE", "/clusters/default/node-credentials/rev-0", ""); code != 204 {
			t.Fatalf("revoke node credential: %d %s", code, body)
		}
		b.waitLogged(t, "closing the tunnel of an agent whose credential is no longer valid")
		r.wantNoKubelet(t, admin, "rev-0")
	})
	t.Run("deleted cluster's tunnels and watches end; its id is never reused", func(t *testing.T) {
		if code, body := platformCall(t, a.url, e2eToken, "POST", "/teams/default/clusters", `{"id":"doomed","name":"Doomed"}`); code != 201 {
			t.Fatalf("create cluster: %d %s", code, body)
		}
		admin := r.client(t, b.url, "doomed", e2eToken)
		r.startAgent(t, "doomed", "d", b.url)
		r.wantKubelet(t, admin, "d-0")
		w := r.openSecretWatch(t, admin)
		if code, body := platformCall(t, a.url, e2eToken, "DELETE", "/clusters/doomed", ""); code != 204 {
			t.Fatalf("delete cluster: %d %s", code, body)
		}
		b.waitLogged(t, "closing the tunnel of a deleted cluster's node")
		wantClosed(t, w)

		// Another team — its owner another user — may not take the id, through either replica.
		_, owner := r.user(t, "mallory@example.com", "")
		if code, body := platformCall(t, a.url, owner, "POST", "/teams", `{"id":"other","name":"Other"}`); code != 201 {
			t.Fatalf("create team: %d %s", code, body)
		}
		for _, p := range []*serverProcess{a, b} {
			code, body := platformCall(t, p.url, owner, "POST", "/teams/other/clusters", `{"id":"doomed","name":"Doomed"}`)
			if code != 409 || !strings.Contains(string(body), "deleted cluster") {
				t.Errorf("another team creating a deleted cluster's id: %d %s, want 409", code, body)
			}
		}
	})
}

type revocationEnv struct {
	t            *testing.T
	bin, dataDir string
	dbURL        string
	a, b         *serverProcess
}

// user makes a user with an API token, a member of the default team with role (none: no team).
func (r *revocationEnv) user(t *testing.T, email, role string) (id, token string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), "INSERT INTO users (email) VALUES ($1) RETURNING id::text", email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if role != "" {
		if _, err := conn.Exec(t.Context(), "INSERT INTO memberships (team_id, user_id, role) VALUES ('default', $1, $2)", id, role); err != nil {
			t.Fatal(err)
		}
	}
	ten, err := tenancy.Open(t.Context(), tenancy.Config{URL: r.dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	token, _, err = ten.CreateToken(t.Context(), id, "e2e", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return id, token
}

// client is a clientset for cluster at the server url with token.
func (r *revocationEnv) client(t *testing.T, url, cluster, token string) kubernetes.Interface {
	t.Helper()
	kc, err := exec.Command(r.bin, "kubeconfig", "--cluster", cluster, "--server", url, "--token", token,
		"--data-dir", r.dataDir).Output()
	if err != nil {
		t.Fatalf("wheelhouse kubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openSecretWatch opens a watch on the default namespace's Secrets asking to last 100,000 s, and proves it is
// open: a Secret the admin creates arrives on it.
func (r *revocationEnv) openSecretWatch(t *testing.T, c kubernetes.Interface) watch.Interface {
	t.Helper()
	timeout := int64(100000)
	w, err := c.CoreV1().Secrets("default").Watch(t.Context(), metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	name := fmt.Sprintf("before-%d", time.Now().UnixNano())
	if _, err := c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed before it was revoked")
			}
			if s, isSecret := ev.Object.(*corev1.Secret); isSecret && s.Name == name {
				return w
			}
		case <-deadline:
			t.Fatalf("secret %s did not arrive on the watch", name)
		}
	}
}

// wantWatchEnded: the revoked watch ends, and a Secret the admin creates afterwards never reaches it.
func (r *revocationEnv) wantWatchEnded(t *testing.T, w watch.Interface, after string) {
	t.Helper()
	admin := r.client(t, r.a.url, "default", e2eToken)
	if _, err := admin.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: after}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range closedWithin(t, w) {
		if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == after {
			t.Errorf("secret %s, created after the access was revoked, reached the revoked watch", after)
		}
	}
}

// wantClosed: the watch ends.
func wantClosed(t *testing.T, w watch.Interface) {
	t.Helper()
	closedWithin(t, w)
}

// closedWithin returns the events w delivers until it closes, failing the test if it is still open after 30 s
// (far below the minute of the periodic tunnel check and the hour a watch may last).
func closedWithin(t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	var evs []watch.Event
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-deadline:
			t.Fatal("the watch is still open 30 s after the access was revoked")
		}
	}
}

// startAgent runs a hollow agent for one node (<prefix>-0) of cluster, connected to the server at url.
func (r *revocationEnv) startAgent(t *testing.T, cluster, prefix, url string) {
	t.Helper()
	out, err := exec.Command(r.bin, "join-token", "create", "--server", r.a.url, "--token", e2eToken,
		"--cluster", cluster, "--data-dir", r.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse join-token create: %v\n%s", err, out)
	}
	agent := exec.Command(r.bin, "agent", "--hollow", "1", "--node-name", prefix, "--server", url,
		"--token", strings.TrimSpace(string(out)), "--data-dir", t.TempDir())
	var agentLog logLines
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = agent.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLog.String())
		}
	})
}

func kubeletHealthz(t *testing.T, c kubernetes.Interface, node string) (string, error) {
	b, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(t.Context())
	return string(b), err
}

// wantKubelet: node's kubelet answers through the server c talks to.
func (r *revocationEnv) wantKubelet(t *testing.T, c kubernetes.Interface, node string) {
	t.Helper()
	eventually(t, 60*time.Second, node+"'s kubelet reachable", func() (bool, string) {
		got, err := kubeletHealthz(t, c, node)
		return err == nil && got == "ok", fmt.Sprint(got, err)
	})
}

// wantNoKubelet: node's agent is not connected any more.
func (r *revocationEnv) wantNoKubelet(t *testing.T, c kubernetes.Interface, node string) {
	t.Helper()
	eventually(t, 30*time.Second, node+"'s tunnel gone", func() (bool, string) {
		body, err := kubeletHealthz(t, c, node)
		return apierrors.IsServiceUnavailable(err) && strings.Contains(body, "agent is not connected"), fmt.Sprint(body, err)
	})
}
