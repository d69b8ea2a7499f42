package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestWatchAcrossReplicasAndRestart drives two real server processes on one database the way a client-go user
// sees them: a write through one replica is in the other's consistent list at once and in its watches; a
// watch cut by a server restart resumes from the last resourceVersion it saw and gets exactly the events it
// missed (written through the other replica while this one was down), in order, then new ones.
func TestWatchAcrossReplicasAndRestart(t *testing.T) {
	bin := buildBinary(t)
	dataDir := t.TempDir()
	env := []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t), "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}
	a := startServer(t, bin, env, "--data-dir", dataDir)
	a.waitReady(t)
	// B has its own data directory: the serving CA is shared through the database, so a kubeconfig that pins
	// A's CA verifies B's certificate too.
	b := startServer(t, bin, env, "--data-dir", t.TempDir())
	b.waitReady(t)
	ca, cb := clientFor(t, bin, a.url, dataDir), clientFor(t, bin, b.url, dataDir)
	ctx := t.Context()
	cms := func(c kubernetes.Interface) func(string) string {
		return func(name string) string {
			t.Helper()
			cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
			return cm.ResourceVersion
		}
	}
	createA, createB := cms(ca), cms(cb)

	start := createA("a1")
	for _, name := range []string{"b1", "b2", "b3"} {
		createB(name)
		// Consistent lists on the other replica are never stale, though served from its watch cache.
		l, err := ca.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(l.Items, func(cm corev1.ConfigMap) bool { return cm.Name == name }) {
			t.Fatalf("replica A's list right after replica B created %s lacks it", name)
		}
	}

	w, err := ca.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: start})
	if err != nil {
		t.Fatal(err)
	}
	seen := receive(t, w, 3)
	if got := names(seen); !slices.Equal(got, []string{"b1", "b2", "b3"}) {
		t.Fatalf("watch on A from a1's resourceVersion: %v, want b1 b2 b3 (written through B)", got)
	}
	last := seen[len(seen)-1].ResourceVersion

	a.stop(t, syscall.SIGTERM)
	drained := time.After(20 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-w.ResultChan():
		case <-drained:
			t.Fatal("the watch stream did not end when its server stopped")
		}
	}
	createB("b4") // while A is down
	createB("b5")

	a2 := startServer(t, bin, env, "--data-dir", dataDir)
	a2.waitReady(t)
	ca2 := clientFor(t, bin, a2.url, dataDir)
	w, err = ca2.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: last})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := names(receive(t, w, 2)); !slices.Equal(got, []string{"b4", "b5"}) {
		t.Fatalf("resumed watch: %v, want exactly the missed b4 b5", got)
	}
	createB("b6")
	cms(ca2)("a3")
	if got := names(receive(t, w, 2)); !slices.Equal(got, []string{"b6", "a3"}) {
		t.Fatalf("resumed watch, new events: %v, want b6 a3", got)
	}
}

// clientFor is a client-go clientset from the kubeconfig `wheelhouse kubeconfig` prints for server url.
func clientFor(t *testing.T, bin, url, dataDir string) kubernetes.Interface {
	t.Helper()
	kc, err := exec.Command(bin, "kubeconfig", "--cluster", "default", "--server", url, "--token", e2eToken,
		"--data-dir", dataDir).Output()
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

// receive reads n ADDED ConfigMap events (skipping bookmarks) within 20 s.
func receive(t *testing.T, w watch.Interface, n int) []*corev1.ConfigMap {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []*corev1.ConfigMap
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(out), n)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || !isCM {
				t.Fatalf("event %s %T, want ADDED ConfigMap", ev.Type, ev.Object)
			}
			out = append(out, cm)
		case <-ctx.Done():
			t.Fatalf("%d of %d events within 20s", len(out), n)
		}
	}
	return out
}

func names(cms []*corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Name)
	}
	return out
}

// TestControllersFailOver: of two replicas only the lease holder runs the controllers and the scheduler; when
// it stops, the other takes over and pods are created and placed again.
func TestControllersFailOver(t *testing.T) {
	bin := buildBinary(t)
	dataDir := t.TempDir()
	env := []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t), "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}
	a := startServer(t, bin, env, "--data-dir", dataDir)
	a.waitReady(t)
	a.waitLogged(t, "leading: starting controllers and scheduler")
	b := startServer(t, bin, env, "--data-dir", t.TempDir())
	b.waitReady(t)
	ca, cb := clientFor(t, bin, a.url, dataDir), clientFor(t, bin, b.url, dataDir)
	ctx := t.Context()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", Labels: map[string]string{"kubernetes.io/hostname": "worker"}}}
	node, err := ca.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The node IPAM controller may write the node (its pod CIDR) meanwhile: retry on conflict, as an agent does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ca.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		_, err = ca.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(c kubernetes.Interface, name string) {
		t.Helper()
		two := int32(2)
		labels := map[string]string{"app": name}
		_, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil || len(pods.Items) != 2 {
				return false
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != "worker" {
					return false
				}
			}
			return true
		})
	}
	deploy(cb, "before") // written through B, run by A's controllers and scheduler
	if b.log.field("leading: starting controllers and scheduler", "msg") != "" {
		t.Fatal("both replicas lead")
	}
	a.stop(t, syscall.SIGTERM)
	b.waitLogged(t, "leading: starting controllers and scheduler")
	deploy(cb, "after")
}

// TestNodeTunnelAcrossReplicas: a node's agent keeps its tunnel on one replica; requests for its kubelet that
// reach the other replica are forwarded to the one holding the tunnel, and once the agent is gone both say so.
func TestNodeTunnelAcrossReplicas(t *testing.T) {
	bin := buildBinary(t)
	dataDir := t.TempDir()
	env := []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t), "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}
	a := startServer(t, bin, env, "--data-dir", dataDir)
	a.waitReady(t)
	b := startServer(t, bin, env, "--data-dir", t.TempDir())
	b.waitReady(t)
	ca, cb := clientFor(t, bin, a.url, dataDir), clientFor(t, bin, b.url, dataDir)
	out, err := exec.Command(bin, "join-token", "create", "--server", a.url, "--token", e2eToken,
		"--cluster", "default", "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse join-token create: %v\n%s", err, out)
	}
	agent := exec.Command(bin, "agent", "--hollow", "1", "--node-name", "far", "--server", a.url,
		"--token", strings.TrimSpace(string(out)), "--data-dir", t.TempDir())
	var agentLog logLines
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan struct{})
	go func() { _ = agent.Wait(); close(agentDone) }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-agentDone
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLog.String())
		}
	})
	const node = "far-0"
	healthz := func(c kubernetes.Interface) (string, error) {
		b, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(t.Context())
		return string(b), err
	}
	eventually(t, 30*time.Second, "the node's kubelet reachable through replica A, which holds its tunnel", func() (bool, string) {
		got, err := healthz(ca)
		return err == nil && got == "ok", fmt.Sprint(got, err)
	})
	if got, err := healthz(cb); err != nil || got != "ok" {
		t.Fatalf("through replica B (forwarded to A): %q, %v", got, err)
	}

	_ = agent.Process.Kill()
	<-agentDone
	for name, c := range map[string]kubernetes.Interface{"A": ca, "B": cb} {
		eventually(t, 60*time.Second, "replica "+name+" reporting the agent gone", func() (bool, string) {
			body, err := healthz(c) // client-go's error is generic for a 503; the Status is in the body
			return apierrors.IsServiceUnavailable(err) && strings.Contains(body, "node far-0's agent is not connected"), fmt.Sprint(body, err)
		})
	}
}
