package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// zonedNode is a Node as an agent would register it (its status comes next, as the agent posts it).
func zonedNode(name, zone string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  labels: {kubernetes.io/hostname: %s, topology.kubernetes.io/zone: %s}
`, name, name, zone)
}

const nodeStatus = `{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"},` +
	`"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`

const workloadManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 20
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources:
          requests: {cpu: 100m, memory: 64Mi}
`

// fakeKubelets marks every pod bound to a node Running and Ready, and removes terminating ones, as the node
// agents will (issue 6), until the test ends.
func fakeKubelets(t *testing.T, cs kubernetes.Interface) {
	fakeKubeletsOn(t, cs, func(string) bool { return true })
}

// fakeKubeletsOn is fakeKubelets for the nodes alive says are up (a dead node's kubelet does nothing).
func fakeKubeletsOn(t *testing.T, cs kubernetes.Interface, alive func(node string) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
			if err == nil {
				for _, p := range pods.Items {
					if !alive(p.Spec.NodeName) {
						continue
					}
					if p.DeletionTimestamp != nil { // containers stopped: the kubelet removes the pod
						_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64),
							Preconditions: &metav1.Preconditions{UID: &p.UID}})
						continue
					}
					if p.Status.Phase == corev1.PodRunning {
						continue
					}
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady,
						Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
					_, _ = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// TestWorkloads drives the controllers and the scheduler the way a user does: Nodes registered, a 20-replica
// Deployment applied with kubectl, its pods placed over the nodes, then the rollout commands, scaling, an
// unschedulable pod explained, and a cascading delete.
func TestWorkloads(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir,
		// The test's nodes have no agents renewing their Leases: on a loaded machine the test outlasts the
		// default 40 s grace period and the node lifecycle controller would take them for lost.
		"--node-monitor-grace-period", "1h")
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
	for i, zone := range []string{"a", "a", "b", "b"} {
		name := fmt.Sprint("node-", i)
		contains(t, k.must(zonedNode(name, zone), "apply", "-f", "-"), "node/"+name+" created")
		k.must("", "patch", "node", name, "--subresource=status", "--type=merge", "-p", nodeStatus)
	}
	contains(t, k.must("", "get", "nodes"), "node-0", "Ready")
	fakeKubelets(t, cs)

	k.must(workloadManifest, "apply", "-f", "-")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), `deployment "web" successfully rolled out`)
	perNode := map[string]int{}
	pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}
	if len(pods.Items) != 20 || len(perNode) != 4 {
		t.Fatalf("20 pods over 4 nodes expected, have %d pods over %v", len(pods.Items), perNode)
	}
	for n, c := range perNode {
		if c < 3 || c > 7 {
			t.Errorf("node %s has %d of 20 pods: not spread", n, c)
		}
	}
	contains(t, k.must("", "get", "deploy", "web"), "20/20")
	contains(t, k.must("", "get", "events"), "ScalingReplicaSet", "SuccessfulCreate", "Scheduled")

	// Rolling update, history, rollback.
	k.must("", "set", "image", "deployment/web", "web=nginx:1.28")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	hist := k.must("", "rollout", "history", "deployment/web")
	contains(t, hist, "REVISION", "1 ", "2 ")
	k.must("", "rollout", "undo", "deployment/web")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	contains(t, k.must("", "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"), "nginx:1.27")
	contains(t, k.must("", "rollout", "history", "deployment/web"), "2 ", "3 ")

	// Pause: a template change waits; resume rolls it out. Restart makes a new revision.
	k.must("", "rollout", "pause", "deployment/web")
	k.must("", "set", "image", "deployment/web", "web=nginx:1.29")
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "deploy", "web", "-o", "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}")
		return strings.Contains(out, "DeploymentPaused")
	})
	if out := k.must("", "get", "rs", "-l", "app=web", "-o", "name"); strings.Count(out, "replicaset") != 2 {
		t.Fatalf("a paused deployment made a new ReplicaSet:\n%s", out)
	}
	k.must("", "rollout", "resume", "deployment/web")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	k.must("", "rollout", "restart", "deployment/web")
	contains(t, k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	contains(t, k.must("", "rollout", "history", "deployment/web"), "5 ")

	// Scale.
	contains(t, k.must("", "scale", "deployment/web", "--replicas=5"), "scaled")
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "deploy", "web", "-o", "jsonpath={.status.availableReplicas}/{.status.replicas}")
		return strings.TrimSpace(out) == "5/5"
	})

	// A pod that can never fit stays Pending, explained.
	k.must(`apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      requests: {cpu: "64"}
`, "apply", "-f", "-")
	waitFor(t, func() bool {
		out, _ := k.run("", "describe", "pod", "huge")
		return strings.Contains(out, "FailedScheduling") && strings.Contains(out, "0/4 nodes are available: 4 Insufficient cpu.")
	})
	contains(t, k.must("", "get", "pod", "huge"), "Pending")

	// Deleting the Deployment takes its ReplicaSets and pods.
	k.must("", "delete", "deployment", "web")
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "rs,pods", "-l", "app=web", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}

const schedulingManifest = `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cache, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: cache}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: redis
        image: redis:7
        resources: {requests: {cpu: 100m}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: filler, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: filler}}
  template:
    metadata: {labels: {app: filler}}
    spec:
      priorityClassName: low
      containers:
      - name: busy
        image: busybox
        resources: {requests: {cpu: 1500m}}
`

// TestScheduling: required anti-affinity keeps replicas apart (and explains the one that cannot fit), and a
// high-priority pod preempts a low-priority one on a full cluster.
func TestScheduling(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir,
		// The test's nodes have no agents renewing their Leases: on a loaded machine the test outlasts the
		// default 40 s grace period and the node lifecycle controller would take them for lost.
		"--node-monitor-grace-period", "1h")
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
	for i, zone := range []string{"a", "b"} {
		name := fmt.Sprint("node-", i)
		k.must(zonedNode(name, zone), "apply", "-f", "-")
		k.must("", "patch", "node", name, "--subresource=status", "--type=merge", "-p", nodeStatus)
	}
	fakeKubelets(t, cs)
	k.must(schedulingManifest, "apply", "-f", "-")
	contains(t, k.must("", "rollout", "status", "deployment/cache", "--timeout=60s"), "successfully rolled out")
	contains(t, k.must("", "rollout", "status", "deployment/filler", "--timeout=60s"), "successfully rolled out")
	nodesOf := func(selector string) []string {
		out := k.must("", "get", "pods", "-l", selector, "--field-selector", "status.phase=Running",
			"-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}")
		return strings.Fields(out)
	}
	if n := nodesOf("app=cache"); len(n) != 2 || n[0] == n[1] {
		t.Fatalf("cache replicas on %v, want two different nodes", n)
	}
	// A third replica has no node left without a cache pod.
	k.must("", "scale", "deployment/cache", "--replicas=3")
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "events", "--field-selector", "reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, "2 node(s) didn't match pod anti-affinity rules")
	})
	k.must("", "scale", "deployment/cache", "--replicas=2")

	// Each node now holds two 1.5-CPU fillers of 4 CPUs: a high-priority 2-CPU pod fits only by preemption.
	k.must(`apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: default}
spec:
  priorityClassName: high
  containers:
  - name: c
    image: busybox
    resources: {requests: {cpu: "2"}}
`, "apply", "-f", "-")
	t.Cleanup(func() {
		if t.Failed() {
			k.run("", "describe", "pod", "urgent")
			k.run("", "get", "pods", "-o", "wide")
		}
	})
	waitFor(t, func() bool {
		out, _ := k.run("", "get", "pod", "urgent", "-o", "jsonpath={.spec.nodeName}")
		return strings.HasPrefix(out, "node-")
	})
	contains(t, k.must("", "get", "pod", "urgent", "-o", "jsonpath={.spec.priority}"), "1000")
	contains(t, k.must("", "get", "events", "--field-selector", "reason=Preempted"), "Preempted")
	// A class that does not exist is refused at creation.
	out, err := k.run(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"typo"},"spec":{"priorityClassName":"hihg","containers":[{"name":"c","image":"x"}]}}`,
		"apply", "-f", "-")
	if err == nil || !strings.Contains(out, "no PriorityClass with name hihg was found") {
		t.Fatalf("a pod with an unknown priority class: %v\n%s", err, out)
	}
	// The preempted filler's replacement waits: only three fit now.
	waitFor(t, func() bool { return len(nodesOf("app=filler")) == 3 })
}
