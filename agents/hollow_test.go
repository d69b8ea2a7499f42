package agents

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// nodeClient is a clientset for cluster c1 as node name (the node authorizer applies), as a joined credential.
func nodeClient(t *testing.T, api *kubeapi.API, name string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(api.LocalConfig("c1", kubeapi.User{Name: "system:node:" + name,
		Groups: []string{"system:nodes", "system:authenticated"}}))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// hollowPod is a pod bound to node whose probes and hook could only pass on a real network.
func hollowPod(name, node string) *corev1.Pod {
	httpProbe := &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName: node,
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", Command: []string{"serve"},
			ReadinessProbe: httpProbe,
			StartupProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
			LivenessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"check"}}}},
			Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/warm", Port: intstr.FromInt32(8080)}}}}}}}
}

func ready(conds []corev1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestHollowNodes runs three hollow nodes against a real API, each with its own node credential: they register
// as Ready nodes of a synthetic machine with distinct addresses, renew their Leases, run the pods bound to them
// to Running and Ready (probes and hooks that would need a network pass), and delete a removed pod's object.
func TestHollowNodes(t *testing.T) {
	api, _ := apitest.New(t)
	admin := apitest.Admin(t, api, "c1")
	ctx := t.Context()
	const count = 3
	nodes := make([]hollowNode, count)
	for i := range nodes {
		name := hollowName("hollow", i)
		nodes[i] = hollowNode{name: name, index: i, cs: nodeClient(t, api, name)}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- runHollowNodes(runCtx, nodes, hollowOptions{DataDir: t.TempDir(), Labels: map[string]string{"pool": "hollow"},
			Resync: 50 * time.Millisecond, RenewInterval: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("runHollowNodes: %v", err)
		}
	})

	var list *corev1.NodeList
	apitest.Eventually(t, "three Ready hollow nodes", func() bool {
		var err error
		list, err = admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=hollow"})
		if err != nil || len(list.Items) != count {
			return false
		}
		for i := range list.Items {
			if !nodeReady(&list.Items[i]) {
				return false
			}
		}
		return true
	})
	ips := map[string]bool{}
	for _, n := range list.Items {
		if len(n.Status.Addresses) == 0 {
			t.Fatalf("node %s has no addresses", n.Name)
		}
		ips[n.Status.Addresses[0].Address] = true
		if cpu, pods := n.Status.Capacity.Cpu().Value(), n.Status.Capacity.Pods().Value(); cpu != 4 || pods != 110 {
			t.Errorf("node %s capacity: %d CPUs, %d pods; want 4 and 110", n.Name, cpu, pods)
		}
	}
	for i := range count {
		if !ips[hollowIP(i)] {
			t.Errorf("no node has InternalIP %s (have %v)", hollowIP(i), ips)
		}
	}
	var first *coordinationv1.Lease // a node posts its status before it creates its lease
	apitest.Eventually(t, "the lease of "+nodes[0].name, func() bool {
		var err error
		first, err = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodes[0].name, metav1.GetOptions{})
		return err == nil
	})
	apitest.Eventually(t, "a renewed lease", func() bool {
		l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodes[0].name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	})

	for i, n := range nodes {
		for j := range 2 {
			if _, err := admin.CoreV1().Pods("default").Create(ctx, hollowPod(fmt.Sprintf("p-%d-%d", i, j), n.name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	apitest.Eventually(t, "every pod Running and Ready on its node's address", func() bool {
		pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 2*count {
			return false
		}
		for _, p := range pods.Items {
			var idx int
			if _, err := fmt.Sscanf(p.Spec.NodeName, "hollow-%d", &idx); err != nil {
				t.Fatalf("pod %s on %q", p.Name, p.Spec.NodeName)
			}
			if p.Status.Phase != corev1.PodRunning || !ready(p.Status.Conditions) || p.Status.HostIP != hollowIP(idx) {
				return false
			}
		}
		return true
	})

	// Settled pods are not written again: while the nodes renew their Leases ten times more (and relist their
	// pods about twenty times, every 50 ms), every status stays as it was.
	before, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mark, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodes[0].name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "ten more lease renewals", func() bool {
		l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodes[0].name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.Sub(mark.Spec.RenewTime.Time) >= time.Second
	})
	after, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range after.Items {
		if b, a := before.Items[i], after.Items[i]; a.ResourceVersion != b.ResourceVersion {
			t.Errorf("pod %s was written again after it settled: resourceVersion %s → %s\nbefore: %+v\nafter:  %+v",
				a.Name, b.ResourceVersion, a.ResourceVersion, b.Status, a.Status)
		}
	}

	if err := admin.CoreV1().Pods("default").Delete(ctx, "p-0-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "the deleted pod gone", func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "p-0-0", metav1.GetOptions{})
		return err != nil
	})
}

func TestHollowConfig(t *testing.T) {
	for _, tc := range []struct {
		hollow  int
		runtime string
		ok      bool
	}{
		{0, "process", true},
		{0, "fake", false},
		{5, "anything", true}, // hollow nodes run on the fake runtime whatever --runtime says
		{-1, "process", false},
		{MaxHollow + 1, "process", false},
	} {
		err := Config{Server: "https://s", DataDir: "/d", Runtime: tc.runtime, Hollow: tc.hollow}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("hollow %d runtime %q: %v, want ok=%v", tc.hollow, tc.runtime, err, tc.ok)
		}
	}
	if got := hollowIP(0); got != "10.250.0.1" {
		t.Errorf("hollowIP(0) = %s", got)
	}
	if got := hollowIP(MaxHollow - 1); got != "10.250.39.16" {
		t.Errorf("hollowIP(%d) = %s", MaxHollow-1, got)
	}
}
