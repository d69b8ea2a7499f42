package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// member adds a user with role in team `default` (or, with team "", in no team) and returns a kubectl that
// uses a fresh API token of theirs. Until the platform API exists the test writes the rows itself.
func member(t *testing.T, dbURL, bin, kbin, url, dataDir, email, team, role string) *kubectl {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var id string
	if err := conn.QueryRow(t.Context(), "INSERT INTO users (email) VALUES ($1) RETURNING id::text", email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if team != "" {
		if _, err := conn.Exec(t.Context(), "INSERT INTO memberships (team_id, user_id, role) VALUES ($1, $2, $3)", team, id, role); err != nil {
			t.Fatal(err)
		}
	}
	ten, err := tenancy.Open(t.Context(), tenancy.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	token, _, err := ten.CreateToken(t.Context(), id, "e2e", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return kubectlFor(t, bin, kbin, url, dataDir, token)
}

func kubectlFor(t *testing.T, bin, kbin, url, dataDir, token string) *kubectl {
	t.Helper()
	cfg, err := exec.Command(bin, "kubeconfig", "--cluster", "default", "--server", url, "--token", token,
		"--data-dir", dataDir).Output()
	if err != nil {
		t.Fatalf("wheelhouse kubeconfig: %v", err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: kbin, kubeconfig: kc}
}

// fails runs kubectl, wants it to fail, and returns its output.
func (k *kubectl) fails(args ...string) string {
	k.t.Helper()
	return k.failsIn("", args...)
}

// failsIn is fails with stdin.
func (k *kubectl) failsIn(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err == nil {
		k.t.Fatalf("kubectl %s succeeded; want a refusal", strings.Join(args, " "))
	}
	return out
}

// TestRBAC drives real kubectl as users with different team roles and RBAC bindings: team roles map to
// cluster-admin / edit / view, `kubectl auth can-i` answers what the server then enforces, bindings take effect
// on the next request, escalation is refused, impersonation needs the verb, and another team's cluster does
// not exist for a non-member.
func TestRBAC(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	dbURL := pgtest.NewEmptyDatabase(t)
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + dbURL, "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	owner := kubectlFor(t, bin, kbin, p.url, dataDir, e2eToken)
	viewer := member(t, dbURL, bin, kbin, p.url, dataDir, "viewer@example.com", "default", "viewer")
	dev := member(t, dbURL, bin, kbin, p.url, dataDir, "dev@example.com", "default", "member")
	outsider := member(t, dbURL, bin, kbin, p.url, dataDir, "outsider@example.com", "", "")

	t.Run("whoami and built-in roles", func(t *testing.T) {
		contains(t, owner.must("", "auth", "whoami"), "admin@localhost", "wheelhouse:team:owner", "system:authenticated")
		contains(t, owner.must("", "get", "clusterroles"), "cluster-admin", "admin", "edit", "view", "system:discovery")
		contains(t, owner.must("", "get", "clusterrolebindings", "wheelhouse:team:viewer", "-o", "jsonpath={.roleRef.name}"), "view")
		owner.must("", "create", "namespace", "dev")
		owner.must("", "create", "configmap", "settings", "-n", "dev", "--from-literal=a=b")
		// The service-account controller (on the replica holding the controller lease) gives it a default account.
		waitFor(t, func() bool {
			_, err := owner.run("", "get", "serviceaccount", "default", "-n", "dev")
			return err == nil
		})
	})

	t.Run("viewer reads, cannot write; can-i agrees", func(t *testing.T) {
		contains(t, viewer.must("", "get", "configmaps", "-n", "dev"), "settings")
		contains(t, viewer.must("", "auth", "can-i", "list", "pods", "-n", "dev"), "yes")
		out, _ := viewer.run("", "auth", "can-i", "create", "configmaps", "-n", "dev")
		contains(t, out, "no")
		contains(t, viewer.fails("create", "configmap", "x", "-n", "dev"),
			`configmaps is forbidden: User "viewer@example.com" cannot create resource "configmaps" in API group "" in the namespace "dev"`)
		out, _ = viewer.run("", "auth", "can-i", "get", "secrets", "-n", "dev")
		contains(t, out, "no")
		viewer.fails("get", "secrets", "-n", "dev")
		contains(t, viewer.must("", "auth", "can-i", "--list", "-n", "dev"), "pods", "[get list watch]")
	})

	t.Run("member edits, cannot touch RBAC", func(t *testing.T) {
		dev.must("", "create", "configmap", "mine", "-n", "dev", "--from-literal=a=b")
		dev.must("", "get", "secrets", "-n", "dev")
		out, _ := dev.run("", "auth", "can-i", "create", "rolebindings", "-n", "dev")
		contains(t, out, "no")
		dev.fails("create", "rolebinding", "sneaky", "-n", "dev", "--clusterrole=admin", "--user=dev@example.com")
	})

	t.Run("bindings take effect on the next request", func(t *testing.T) {
		lead := member(t, dbURL, bin, kbin, p.url, dataDir, "lead@example.com", "default", "viewer")
		lead.fails("create", "configmap", "x", "-n", "dev")
		owner.must("", "create", "rolebinding", "lead-admin", "-n", "dev", "--clusterrole=admin", "--user=lead@example.com")
		lead.must("", "create", "configmap", "x", "-n", "dev", "--from-literal=a=b")
		lead.fails("create", "configmap", "y", "-n", "default")
		// Namespace admin may grant what it holds, not more (escalation prevention).
		lead.must("", "create", "rolebinding", "dev-edit", "-n", "dev", "--clusterrole=edit", "--user=viewer@example.com")
		contains(t, lead.fails("create", "rolebinding", "grab", "-n", "dev", "--clusterrole=cluster-admin", "--user=lead@example.com"),
			"is attempting to grant RBAC permissions not currently held")
		contains(t, lead.fails("create", "role", "wide", "-n", "dev", "--verb=*", "--resource=nodes"),
			"is attempting to grant RBAC permissions not currently held")
		viewer.must("", "create", "configmap", "from-viewer", "-n", "dev", "--from-literal=a=b")
		owner.must("", "delete", "rolebinding", "lead-admin", "-n", "dev")
		lead.fails("create", "configmap", "z", "-n", "dev")
	})

	t.Run("service account tokens", func(t *testing.T) {
		owner.must("", "create", "serviceaccount", "robot", "-n", "dev")
		token := strings.TrimSpace(owner.must("", "create", "token", "robot", "-n", "dev", "--duration", "1h"))
		robot := kubectlFor(t, bin, kbin, p.url, dataDir, token)
		contains(t, robot.must("", "auth", "whoami"), "system:serviceaccount:dev:robot", "system:serviceaccounts:dev")
		contains(t, robot.fails("get", "configmaps", "-n", "dev"), `User "system:serviceaccount:dev:robot" cannot list`)
		owner.must("", "create", "rolebinding", "robot-view", "-n", "dev", "--clusterrole=view", "--serviceaccount=dev:robot")
		contains(t, robot.must("", "get", "configmaps", "-n", "dev"), "settings")
		// Bound to a pod: the token dies with the pod.
		owner.must("", "run", "holder", "-n", "dev", "--image", "busybox", "--restart=Never")
		bound := strings.TrimSpace(owner.must("", "create", "token", "robot", "-n", "dev", "--bound-object-kind", "Pod",
			"--bound-object-name", "holder"))
		boundK := kubectlFor(t, bin, kbin, p.url, dataDir, bound)
		boundK.must("", "get", "configmaps", "-n", "dev")
		owner.must("", "delete", "pod", "holder", "-n", "dev", "--grace-period=0", "--force")
		contains(t, boundK.fails("get", "configmaps", "-n", "dev"), "Unauthorized")
		owner.fails("create", "token", "robot", "-n", "dev", "--duration", "1m")
		// Deleting the service account ends its tokens.
		owner.must("", "delete", "serviceaccount", "robot", "-n", "dev")
		contains(t, robot.fails("get", "configmaps", "-n", "dev"), "Unauthorized")
	})

	t.Run("impersonation needs the verb", func(t *testing.T) {
		contains(t, owner.must("", "auth", "whoami", "--as", "someone", "--as-group", "g1"), "someone", "g1")
		contains(t, dev.fails("get", "pods", "--as", "admin@localhost"), "cannot impersonate")
	})

	t.Run("a non-member sees no cluster", func(t *testing.T) {
		contains(t, outsider.fails("get", "namespaces"), "NotFound")
		out, _ := outsider.run("", "auth", "can-i", "get", "pods")
		if strings.Contains(out, "yes") {
			t.Errorf("can-i answered yes to an outsider: %s", out)
		}
	})
}
