package kubelet

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	criruntime "github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/fakecri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// nodeClient is a clientset for cluster c1 as node name (the node authorizer applies).
func nodeClient(t *testing.T, api *kubeapi.API, name string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(api.LocalConfig("c1", kubeapi.User{Name: "system:node:" + name,
		Groups: []string{"system:nodes", "system:authenticated"}}))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// fakeHost is a machine whose facts the test changes.
type fakeHost struct {
	mu sync.Mutex
	h  Host
}

func (f *fakeHost) read() (Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h, nil
}

func (f *fakeHost) set(change func(*Host)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.h)
}

func newFakeHost() *fakeHost {
	return &fakeHost{h: Host{Hostname: "box", CPUs: 4, MemoryBytes: 8 << 30, MemoryAvailableBytes: 6 << 30,
		DiskBytes: 100 << 30, DiskAvailableBytes: 50 << 30, PIDs: 300, PIDMax: 4194304, MachineID: "m-1", BootID: "b-1",
		KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)", Arch: "amd64", InternalIP: "10.0.0.5"}}
}

func TestNodeRegistersAndReports(t *testing.T) {
	api, _ := apitest.New(t)
	admin := apitest.Admin(t, api, "c1")
	cs := nodeClient(t, api, "n1")
	host := newFakeHost()
	clk := clocktesting.NewFakeClock(time.Now())
	var healthy error
	var healthMu sync.Mutex
	cfg := NodeConfig{Name: "n1", Labels: map[string]string{"pool": "blue"},
		Taints:         []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		KubeletVersion: "v1.37.0-wheelhouse", RuntimeVersion: "process://0.1", Host: host.read, Clock: clk,
		Healthy: func() error { healthMu.Lock(); defer healthMu.Unlock(); return healthy }}
	n, err := NewNode(cs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	node, err := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "pool": "blue"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v", node.Spec.Taints)
	}
	if cpu, pods := node.Status.Allocatable.Cpu().Value(), node.Status.Capacity.Pods().Value(); cpu != 4 || pods != 110 {
		t.Errorf("allocatable cpu %d, pods capacity %d", cpu, pods)
	}
	if node.Status.Capacity.Memory().Value() != 8<<30 || node.Status.Capacity.StorageEphemeral().Value() != 100<<30 {
		t.Errorf("capacity %v", node.Status.Capacity)
	}
	if ni := node.Status.NodeInfo; ni.MachineID != "m-1" || ni.KubeletVersion != "v1.37.0-wheelhouse" || ni.ContainerRuntimeVersion != "process://0.1" ||
		ni.OSImage != "Debian GNU/Linux 12 (bookworm)" || ni.Architecture != "amd64" {
		t.Errorf("nodeInfo %+v", ni)
	}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0].Address != "10.0.0.5" {
		t.Errorf("addresses %v", node.Status.Addresses)
	}
	for _, c := range []struct {
		t      corev1.NodeConditionType
		status corev1.ConditionStatus
		reason string
	}{
		{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"},
		{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"},
	} {
		if got := condition(node, c.t); got.Status != c.status || got.Reason != c.reason {
			t.Errorf("%s: %s %s, want %s %s", c.t, got.Status, got.Reason, c.status, c.reason)
		}
	}
	lease, err := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "n1" || *lease.Spec.LeaseDurationSeconds != 40 ||
		len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != node.UID {
		t.Fatalf("lease %+v", lease)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The lease renews every 10 s.
	renewed := lease.Spec.RenewTime.Time
	apitest.Eventually(t, "the lease renewed", func() bool {
		clk.Step(10 * time.Second)
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(renewed)
	})
	// An unchanged status is not posted again before the report interval.
	before, _ := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	// The lease as it was before the step (read after it, a renewal already done would be waited for again).
	l0, _ := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
	clk.Step(10 * time.Second)
	apitest.Eventually(t, "the next lease renewal", func() bool {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
		return err == nil && l.ResourceVersion != l0.ResourceVersion
	})
	if after, _ := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{}); after.ResourceVersion != before.ResourceVersion {
		t.Error("an unchanged status was posted again")
	}

	// An extended resource patched into the status (as the scheduler's conformance tests do) outlives the
	// kubelet's next posts.
	if _, err := admin.CoreV1().Nodes().Patch(t.Context(), "n1", types.StrategicMergePatchType,
		[]byte(`{"status":{"capacity":{"example.com/fakecpu":"1k"},"allocatable":{"example.com/fakecpu":"1k"}}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	// Memory runs low and the runtime fails: both show at the next status check.
	host.set(func(h *Host) { h.MemoryAvailableBytes = 50 << 20 })
	healthMu.Lock()
	healthy = errors.New("container runtime is down")
	healthMu.Unlock()
	apitest.Eventually(t, "NotReady with the runtime's message and memory pressure", func() bool {
		clk.Step(10 * time.Second)
		node, err := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
		ready := condition(node, corev1.NodeReady)
		return err == nil && ready.Status == corev1.ConditionFalse && ready.Reason == "KubeletNotReady" &&
			ready.Message == "container runtime is down" && condition(node, corev1.NodeMemoryPressure).Status == corev1.ConditionTrue
	})
	node, _ = admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	fake := corev1.ResourceName("example.com/fakecpu")
	if c, a := node.Status.Capacity[fake], node.Status.Allocatable[fake]; c.Value() != 1000 || a.Value() != 1000 || node.Status.Capacity.Cpu().Value() != 4 {
		t.Errorf("after the kubelet's post: capacity %v, allocatable %v, want the extended resource kept", node.Status.Capacity, node.Status.Allocatable)
	}

	// A restarted agent adopts its Node: same object, a label added by a user kept.
	cancel()
	<-done
	node, _ = admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	node.Labels["team"] = "infra"
	delete(node.Labels, "kubernetes.io/os")
	if _, err := admin.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n2, _ := NewNode(cs, cfg)
	if err := n2.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, _ := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if again.UID != node.UID || again.Labels["team"] != "infra" || again.Labels["kubernetes.io/os"] != "linux" {
		t.Fatalf("re-registration: uid %s (was %s), labels %v", again.UID, node.UID, again.Labels)
	}
}

func TestNodeCannotRegisterAnother(t *testing.T) {
	api, _ := apitest.New(t)
	n, err := NewNode(nodeClient(t, api, "n1"), NodeConfig{Name: "n2", Host: newFakeHost().read})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Register(t.Context()); !apierrors.IsForbidden(err) {
		t.Fatalf("node n1 registering node n2: %v, want Forbidden", err)
	}
}

// countingTransport counts a client's requests by method and path.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

// TestLeaseRenewalWritesWithoutReading: as upstream's lease controller, a renewal writes over the Lease last
// written (one PUT); after a failed renewal (someone else wrote the Lease) the next one reads it again.
func TestLeaseRenewalWritesWithoutReading(t *testing.T) {
	api, _ := apitest.New(t)
	admin := apitest.Admin(t, api, "c1")
	rc := api.LocalConfig("c1", kubeapi.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}})
	counter := &countingTransport{next: rc.Transport, n: map[string]int{}}
	rc.Transport = counter
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	n, err := NewNode(cs, NodeConfig{Name: "n1", Host: newFakeHost().read, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	const path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
	prefix := kubeapi.Prefix("c1")
	counter.take()
	for range 3 {
		clk.Step(10 * time.Second)
		if err := n.renewLease(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.take(); got["PUT "+prefix+path] != 3 || got["GET "+prefix+path] != 0 || len(got) != 1 {
		t.Fatalf("three renewals made %v, want three PUTs and nothing else", got)
	}
	lease, err := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil || !lease.Spec.RenewTime.Time.Equal(clk.Now().Truncate(time.Microsecond)) {
		t.Fatalf("lease after three renewals: %v %v, want renewed at %v", lease.Spec.RenewTime, err, clk.Now())
	}
	// Someone else writes the Lease: the next renewal conflicts, the one after reads it and succeeds.
	lease.Labels = map[string]string{"touched": "yes"}
	if _, err := admin.CoordinationV1().Leases("kube-node-lease").Update(t.Context(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	if err := n.renewLease(t.Context()); !apierrors.IsConflict(err) {
		t.Fatalf("renewal over a Lease changed meanwhile: %v, want a conflict", err)
	}
	clk.Step(10 * time.Second)
	if err := n.renewLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := counter.take(); got["PUT "+prefix+path] != 2 || got["GET "+prefix+path] != 1 {
		t.Fatalf("a conflict and a renewal made %v, want two PUTs and one GET", got)
	}
	after, _ := admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "n1", metav1.GetOptions{})
	if after.Labels["touched"] != "yes" || !after.Spec.RenewTime.Time.Equal(clk.Now().Truncate(time.Microsecond)) {
		t.Fatalf("lease after the re-read: labels %v, renewed %v", after.Labels, after.Spec.RenewTime)
	}
}

// TestNodeRuntimeDown: with containerd's health (a CRI runtime's Ready, here an in-process CRI server) the node
// goes NotReady with kubelet's message while the runtime is down and Ready again when it is back, with a
// NodeNotReady and a NodeReady event.
func TestNodeRuntimeDown(t *testing.T) {
	api, _ := apitest.New(t)
	admin := apitest.Admin(t, api, "c1")
	srv := fakecri.Start(t, fake.New())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rt, err := criruntime.Open(ctx, criruntime.Config{Endpoint: srv.Endpoint(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	events := record.NewFakeRecorder(10)
	n, err := NewNode(nodeClient(t, api, "n1"), NodeConfig{Name: "n1", Host: newFakeHost().read, Clock: clk, Recorder: events,
		Healthy: func() error { return rt.Healthy(t.Context()) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	ready := func(want corev1.ConditionStatus, msg string) func() bool {
		return func() bool {
			clk.Step(10 * time.Second)
			node, err := admin.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
			c := condition(node, corev1.NodeReady)
			return err == nil && c.Status == want && strings.HasPrefix(c.Message, msg)
		}
	}
	apitest.Eventually(t, "Ready", ready(corev1.ConditionTrue, "kubelet is posting ready status"))
	srv.Down()
	apitest.Eventually(t, "NotReady: the runtime is down", ready(corev1.ConditionFalse, "container runtime is down"))
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "Ready again", ready(corev1.ConditionTrue, "kubelet is posting ready status"))
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	want := []string{"Normal NodeReady Node n1 status is now: NodeReady", "Normal NodeNotReady Node n1 status is now: NodeNotReady",
		"Normal NodeReady Node n1 status is now: NodeReady"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
