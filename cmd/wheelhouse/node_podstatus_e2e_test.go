package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

const heldPodManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels: {app: web}
  annotations: {team: frontend}
  finalizers: [example.com/keep]
spec:
  nodeName: worker-1
  containers:
  - {name: c, image: busybox}
`

// TestNodeChangesOnlyPodStatus is the regression test of issue 34 item 12 against the real binary: with a
// real node credential, a node patched its own pod's labels (so a Service selecting app=payments would send it
// that traffic), annotations and finalizers through pods/status. Each is now 403, as upstream's NodeRestriction
// answers for labels, and the pod keeps its metadata; a real status write still works.
func TestNodeChangesOnlyPodStatus(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	owner := kubectlFor(t, bin, kbin, p.url, dataDir, e2eToken)
	code, body := platformCall(t, p.url, e2eToken, "POST", "/clusters/default/join-tokens", `{"maxUses":1}`)
	if code != 201 {
		t.Fatalf("join token: %d %s", code, body)
	}
	var jt struct{ Token string }
	if err := json.Unmarshal(body, &jt); err != nil {
		t.Fatal(err)
	}
	code, body = platformCall(t, p.url, "", "POST", "/join", `{"token":"`+jt.Token+`","nodeName":"worker-1"}`)
	if code != 201 {
		t.Fatalf("join: %d %s", code, body)
	}
	var joined struct{ Credential string }
	if err := json.Unmarshal(body, &joined); err != nil {
		t.Fatal(err)
	}
	node := kubectlFor(t, bin, kbin, p.url, dataDir, joined.Credential)
	node.must(strings.ReplaceAll(nodeManifest, "NAME", "worker-1"), "create", "-f", "-")
	owner.must("", "create", "service", "clusterip", "payments", "--tcp=80:8080")
	owner.must("", "set", "selector", "service", "payments", "app=payments")
	owner.must(heldPodManifest, "create", "-f", "-")

	for _, tc := range []struct{ name, patchType, patch, says string }{
		{"relabel to draw a Service's traffic", "merge", `{"metadata":{"labels":{"app":"payments"}}}`, "cannot update labels through pod status"},
		{"drop the labels", "json", `[{"op":"remove","path":"/metadata/labels"}]`, "cannot update labels through pod status"},
		{"remove the finalizer", "merge", `{"metadata":{"finalizers":null}}`, "cannot update finalizers through pod status"},
		{"add a finalizer", "json", `[{"op":"add","path":"/metadata/finalizers/-","value":"x.io/stay"}]`, "cannot update finalizers through pod status"},
		{"annotate", "merge", `{"metadata":{"annotations":{"team":"payments"}}}`, "cannot update annotations through pod status"},
		{"relabel with the status", "merge", `{"metadata":{"labels":{"app":"payments"}},"status":{"phase":"Running"}}`, "cannot update labels through pod status"},
	} {
		t.Logf("%s: %s", tc.name, tc.patch) // kubectl's helpers fail the test itself: no subtests
		contains(t, node.fails("patch", "pod", "web", "--subresource=status", "--type="+tc.patchType, "-p", tc.patch),
			"Forbidden", tc.says)
	}
	// The same with a whole pod PUT to pods/status.
	pod := node.must("", "get", "pod", "web", "-o", "json")
	relabelled := strings.Replace(pod, `"app": "web"`, `"app": "payments"`, 1)
	if relabelled == pod {
		t.Fatalf("no app label in %s", pod)
	}
	contains(t, node.failsIn(relabelled, "replace", "--subresource=status", "-f", "-"), "cannot update labels through pod status")
	got := owner.must("", "get", "pod", "web", "-o", "jsonpath={.metadata.labels} {.metadata.annotations} {.metadata.finalizers}")
	contains(t, got, `{"app":"web"}`, `{"team":"frontend"}`, `["example.com/keep"]`)
	if strings.Contains(got, "payments") || strings.Contains(got, "x.io/stay") {
		t.Errorf("the node changed its pod's metadata: %s", got)
	}
	// What kubelet writes still goes through.
	node.must("", "patch", "pod", "web", "--subresource=status", "--type=merge", "-p",
		`{"status":{"phase":"Running","podIP":"10.244.1.5","conditions":[{"type":"Ready","status":"True"}]}}`)
	contains(t, owner.must("", "get", "pod", "web", "-o", "jsonpath={.status.phase} {.status.podIP}"), "Running 10.244.1.5")
	// The pod's owner may still change its metadata, through the pod or its status.
	owner.must("", "patch", "pod", "web", "--subresource=status", "--type=merge", "-p", `{"metadata":{"annotations":{"team":"platform"}}}`)
	contains(t, owner.must("", "get", "pod", "web", "-o", "jsonpath={.metadata.annotations.team}"), "platform")
}
