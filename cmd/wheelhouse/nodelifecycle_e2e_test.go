package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

const lostNodeManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources: {requests: {cpu: 100m}}
`

// TestNodeLost: a node whose agent stops renewing its Lease becomes NotReady once the grace period passes, gets
// the unreachable taints, its pods are marked not ready and, after the default toleration, evicted; the
// Deployment's replacements land on the node that is still alive. When the agent comes back the node is Ready
// and untainted again. The server runs with short periods so the test takes seconds, not minutes.
func TestNodeLost(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir,
		"--node-monitor-grace-period", "3s", "--default-toleration-seconds", "2", "--node-eviction-rate", "10")
	p.waitReady(t)
	k := newKubectl(t, bin, kbin, p.url, dataDir)
	rc, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	var lostDown atomic.Bool // node-1's agent is down
	alive := func(node string) bool { return node != "node-1" || !lostDown.Load() }
	for i := range 2 {
		name := fmt.Sprint("node-", i)
		k.must(zonedNode(name, "a"), "apply", "-f", "-")
		k.must("", "patch", "node", name, "--subresource=status", "--type=merge", "-p", nodeStatus)
	}
	fakeLeases(t, cs, []string{"node-0", "node-1"}, alive)
	fakeKubeletsOn(t, cs, alive)

	k.must(lostNodeManifest, "apply", "-f", "-")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	// DefaultTolerationSeconds gave every pod the configured tolerations of the two NoExecute taints.
	contains(t, k.must("", "get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.spec.tolerations[*].key}={.spec.tolerations[*].tolerationSeconds};{end}"),
		"node.kubernetes.io/not-ready node.kubernetes.io/unreachable=2 2;")
	onLost := podsOn(t, cs, "node-1")
	if len(onLost) == 0 {
		t.Fatalf("no pod of web on node-1: %v", podsOn(t, cs, "node-0"))
	}

	// node-1's agent dies.
	lostDown.Store(true)
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "node", "node-1")
		return strings.Contains(out, "NotReady")
	})
	taints := k.must("", "get", "node", "node-1", "-o", "jsonpath={range .spec.taints[*]}{.key}:{.effect} {end}")
	contains(t, taints, "node.kubernetes.io/unreachable:NoSchedule", "node.kubernetes.io/unreachable:NoExecute")
	contains(t, k.must("", "get", "node", "node-1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`), "NodeStatusUnknown")
	contains(t, k.must("", "get", "node", "node-0"), "Ready")
	// Its pods go not ready at once, are evicted after the 2 s toleration (Terminating: no kubelet finishes them)
	// and are replaced on node-0.
	waitFor(t, func() bool {
		for _, name := range onLost {
			pod, err := cs.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
			if err != nil || pod.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "deploy", "web", "-o", "jsonpath={.status.availableReplicas}")
		return strings.TrimSpace(out) == "4" && len(podsOn(t, cs, "node-0")) == 4
	})
	for _, name := range onLost {
		pod, err := cs.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse {
				t.Errorf("pod %s on the lost node is still Ready", name)
			}
		}
	}
	contains(t, k.must("", "get", "events", "--field-selector", "involvedObject.kind=Pod"), "TaintManagerEviction", "NodeNotReady")
	contains(t, k.must("", "describe", "node", "node-1"), "NodeNotReady")

	// The agent comes back: it renews its lease and posts Ready; the taints go.
	lostDown.Store(false)
	k.must("", "patch", "node", "node-1", "--subresource=status", "--type=merge", "-p", readyNow())
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "node", "node-1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}`)
		return strings.TrimSpace(out) == "True/"
	})
}

// readyNow is a node status patch with a Ready condition heartbeat of now, as an agent posts it.
func readyNow() string {
	now := time.Now().UTC().Format(time.RFC3339)
	return `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status",` +
		`"lastHeartbeatTime":"` + now + `","lastTransitionTime":"` + now + `"}]}}`
}

// fakeLeases renews the node Leases in kube-node-lease every 500 ms for the nodes alive says are up, as their
// agents will (issue 6), until the test ends.
func fakeLeases(t *testing.T, cs kubernetes.Interface, nodes []string, alive func(string) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for _, n := range nodes {
		renew := metav1.NewMicroTime(time.Now())
		_, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &n, LeaseDurationSeconds: new(int32(40)), RenewTime: &renew}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, n := range nodes {
				if !alive(n) {
					continue
				}
				if l, err := leases.Get(ctx, n, metav1.GetOptions{}); err == nil {
					renew := metav1.NewMicroTime(time.Now())
					l.Spec.RenewTime = &renew
					_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
				}
			}
		}
	}()
}

// podsOn names the pods bound to the node that are not terminating.
func podsOn(t *testing.T, cs kubernetes.Interface, node string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}
