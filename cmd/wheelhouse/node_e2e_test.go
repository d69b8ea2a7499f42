package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

const nodeManifest = `apiVersion: v1
kind: Node
metadata:
  name: NAME
  labels: {kubernetes.io/hostname: NAME}
spec:
  taints:
  - {key: dedicated, value: db, effect: NoSchedule}
`

const leaseManifest = `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: NAME, namespace: kube-node-lease}
spec: {holderIdentity: NAME, leaseDurationSeconds: 40}
`

const boundPodManifest = `apiVersion: v1
kind: Pod
metadata: {name: db-client, namespace: default}
spec:
  nodeName: worker-1
  containers:
  - name: c
    image: busybox
    env:
    - name: PW
      valueFrom: {secretKeyRef: {name: db-pw, key: pw}}
`

// TestNodeCredentials drives a node's identity end to end: a join token from the platform API, exchanged once
// for a credential bound to one node name; with it, real kubectl can register that Node and its Lease, read
// what a node reads and the secrets of pods bound to it — and nothing else: not another node, not its own
// taints, not other secrets, not deleting itself. Revoking the credential cuts it off.
func TestNodeCredentials(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	owner := kubectlFor(t, bin, kbin, p.url, dataDir, e2eToken)
	// The CLI creates the join token through the platform API, pinning the server's CA from the data dir.
	cli, err := exec.Command(bin, "join-token", "create", "--server", p.url, "--token", e2eToken, "--cluster", "default",
		"--max-uses", "2", "--data-dir", dataDir, "--description", "e2e").CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse join-token create: %v\n%s", err, cli)
	}
	jt := struct{ Token string }{strings.TrimSpace(string(cli))}
	if !strings.HasPrefix(jt.Token, "K10") {
		t.Fatalf("join token %q", jt.Token)
	}
	code, body := platformCall(t, p.url, "", "POST", "/join", `{"token":"`+jt.Token+`","nodeName":"worker-1"}`)
	if code != 201 {
		t.Fatalf("join: %d %s", code, body)
	}
	var joined struct{ Credential, Cluster, Server, PodCIDR, ServiceCIDR string }
	if err := json.Unmarshal(body, &joined); err != nil || joined.Cluster != "default" || joined.PodCIDR != "10.244.0.0/16" || joined.ServiceCIDR != "10.96.0.0/12" {
		t.Fatalf("join answer %s (%v)", body, err)
	}
	if code, body := platformCall(t, p.url, "", "POST", "/join", `{"token":"`+jt.Token+`","nodeName":"worker-1"}`); code != 409 {
		t.Fatalf("joining a joined name: %d %s, want 409", code, body)
	}
	node := kubectlFor(t, bin, kbin, p.url, dataDir, joined.Credential)

	contains(t, node.must("", "auth", "whoami"), "system:node:worker-1", "system:nodes")
	node.must(strings.ReplaceAll(nodeManifest, "NAME", "worker-1"), "create", "-f", "-")
	contains(t, node.failsIn(strings.ReplaceAll(nodeManifest, "NAME", "worker-3"), "create", "-f", "-"),
		`node "worker-1" is not allowed to modify node "worker-3"`)
	node.must(strings.ReplaceAll(leaseManifest, "NAME", "worker-1"), "create", "-f", "-")
	contains(t, node.failsIn(strings.ReplaceAll(leaseManifest, "NAME", "worker-3"), "create", "-f", "-"), "may only write its own lease")
	node.must("", "get", "nodes")
	node.must("", "get", "pods", "-A")
	contains(t, node.fails("taint", "nodes", "worker-1", "dedicated-"), "not allowed to modify taints")
	contains(t, node.fails("label", "node", "worker-1", "node-restriction.kubernetes.io/db=yes"), "not allowed to set the label")
	node.must("", "label", "node", "worker-1", "disk=ssd")
	contains(t, node.fails("delete", "node", "worker-1"), "forbidden")
	owner.must(strings.ReplaceAll(nodeManifest, "NAME", "worker-2"), "create", "-f", "-")
	contains(t, node.fails("label", "node", "worker-2", "x=y"), "forbidden")

	owner.must("", "create", "secret", "generic", "db-pw", "--from-literal=pw=s3cret")
	owner.must("", "create", "secret", "generic", "admin-creds", "--from-literal=pw=root")
	owner.must(boundPodManifest, "create", "-f", "-")
	contains(t, node.must("", "get", "secret", "db-pw", "-o", "jsonpath={.data.pw}"), "czNjcmV0")
	contains(t, node.fails("get", "secret", "admin-creds"), "forbidden")
	contains(t, node.fails("get", "secrets"), "forbidden")
	node.must("", "patch", "pod", "db-client", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)
	contains(t, node.fails("run", "rogue", "--image", "busybox"), "forbidden")

	if code, body := platformCall(t, p.url, e2eToken, "DELETE", "/clusters/default/node-credentials/worker-1", ""); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	contains(t, node.fails("get", "nodes"), "Unauthorized")
}
