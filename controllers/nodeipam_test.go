package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// podCIDRs gives some clusters of the wrapped Clusters another pod CIDR.
type podCIDRs struct {
	kubeapi.Clusters
	cidr map[string]string
}

func (p podCIDRs) Cluster(ctx context.Context, id string) (kubeapi.Cluster, error) {
	cl, err := p.Clusters.Cluster(ctx, id)
	if c, ok := p.cidr[id]; ok && err == nil {
		cl.PodCIDR = c
	}
	return cl, err
}

// ipamEnv runs the node IPAM controller (alone, with events) on a real API; start and stop it at will.
type ipamEnv struct {
	t    *testing.T
	d    Deps
	cs   map[string]kubernetes.Interface
	stop func()
}

func newIPAMEnv(t *testing.T, cidr map[string]string) *ipamEnv {
	api, reg := apitest.NewWith(t, func(c *kubeapi.Config) { c.Clusters = podCIDRs{c.Clusters, cidr} })
	d := Deps{API: api, Registry: reg, Logger: slog.New(slog.DiscardHandler)}
	d.Events = NewEvents(d)
	t.Cleanup(d.Events.Close)
	e := &ipamEnv{t: t, d: d, cs: map[string]kubernetes.Interface{"c1": admin(t, d, "c1"), "c2": admin(t, d, "c2")}}
	e.start()
	t.Cleanup(func() { e.stop() })
	return e
}

func (e *ipamEnv) start() {
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); RunNodeIPAM(ctx, e.d) }()
	e.stop = func() { cancel(); <-done; e.stop = func() {} }
}

func (e *ipamEnv) createNode(cluster, name string) {
	e.t.Helper()
	_, err := e.cs[cluster].CoreV1().Nodes().Create(e.t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *ipamEnv) deleteNode(cluster, name string) {
	e.t.Helper()
	if err := e.cs[cluster].CoreV1().Nodes().Delete(e.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ipamEnv) node(cluster, name string) *corev1.Node {
	e.t.Helper()
	n, err := e.cs[cluster].CoreV1().Nodes().Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// hasCIDR waits for the node to get exactly cidr (in both fields).
func (e *ipamEnv) hasCIDR(cluster, name, cidr string) {
	e.t.Helper()
	var got *corev1.Node
	eventually(e.t, fmt.Sprintf("%s/%s getting pod CIDR %s", cluster, name, cidr), func() bool {
		got = e.node(cluster, name)
		return got.Spec.PodCIDR != ""
	})
	if got.Spec.PodCIDR != cidr || len(got.Spec.PodCIDRs) != 1 || got.Spec.PodCIDRs[0] != cidr {
		e.t.Fatalf("%s/%s: podCIDR %q, podCIDRs %q; want %s", cluster, name, got.Spec.PodCIDR, got.Spec.PodCIDRs, cidr)
	}
}

// TestNodeIPAMAllocates: distinct /24s in node creation order, per cluster (the clusters' ranges overlap: they
// are separate networks), a deleted node's CIDR handed out again, and the pod CIDR fields kept once set.
func TestNodeIPAMAllocates(t *testing.T) {
	e := newIPAMEnv(t, map[string]string{"c2": "10.50.0.0/16"})
	for i, name := range []string{"n0", "n1", "n2"} {
		e.createNode("c1", name)
		e.hasCIDR("c1", name, fmt.Sprintf("10.244.%d.0/24", i))
	}
	e.createNode("c2", "n0")
	e.hasCIDR("c2", "n0", "10.50.0.0/24")

	e.deleteNode("c1", "n1")
	e.createNode("c1", "n3")
	e.hasCIDR("c1", "n3", "10.244.1.0/24")
	e.createNode("c1", "n4")
	e.hasCIDR("c1", "n4", "10.244.3.0/24")

	// A node created with a CIDR keeps it and takes it out of the free set.
	_, err := e.cs["c2"].CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "static"},
		Spec: corev1.NodeSpec{PodCIDR: "10.50.1.0/24", PodCIDRs: []string{"10.50.1.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.createNode("c2", "n1")
	e.hasCIDR("c2", "n1", "10.50.2.0/24")
	e.hasCIDR("c2", "static", "10.50.1.0/24")

	// Once set, the API keeps them (the controller relies on it).
	n := e.node("c1", "n0")
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
	if _, err := e.cs["c1"].CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err == nil {
		t.Fatal("a node's pod CIDR was changed")
	}
}

// TestNodeIPAMRestart: a new controller rebuilds the used set from the nodes before it allocates.
func TestNodeIPAMRestart(t *testing.T) {
	e := newIPAMEnv(t, nil)
	e.createNode("c1", "a")
	e.hasCIDR("c1", "a", "10.244.0.0/24")
	e.createNode("c1", "b")
	e.hasCIDR("c1", "b", "10.244.1.0/24")
	e.stop()

	e.createNode("c1", "c") // while no controller runs
	e.deleteNode("c1", "a")
	e.start()
	e.hasCIDR("c1", "c", "10.244.0.0/24") // a's: a went away before the restart
	e.createNode("c1", "d")
	e.hasCIDR("c1", "d", "10.244.2.0/24") // not b's
	e.hasCIDR("c1", "b", "10.244.1.0/24")
}

// TestNodeIPAMExhausted: a /24 cluster has room for one node; the next gets CIDRNotAvailable until the first
// goes away. The other cluster is not affected.
func TestNodeIPAMExhausted(t *testing.T) {
	e := newIPAMEnv(t, map[string]string{"c2": "10.60.7.0/24"})
	e.createNode("c2", "first")
	e.hasCIDR("c2", "first", "10.60.7.0/24")
	e.createNode("c2", "second")
	eventually(t, "a CIDRNotAvailable event", func() bool {
		for _, ev := range eventsOf(t, e.cs["c2"], "Node", "second") {
			if ev.Reason == "CIDRNotAvailable" && ev.Source.Component == "cidrAllocator" &&
				ev.Message == "Node second status is now: CIDRNotAvailable" {
				return true
			}
		}
		return false
	})
	if n := e.node("c2", "second"); n.Spec.PodCIDR != "" {
		t.Fatalf("got %s from a full range", n.Spec.PodCIDR)
	}
	e.createNode("c1", "second")
	e.hasCIDR("c1", "second", "10.244.0.0/24")

	e.deleteNode("c2", "first")
	e.hasCIDR("c2", "second", "10.60.7.0/24")
}

func TestCIDRSetLowestFree(t *testing.T) {
	for _, tc := range []struct {
		name, rng string
		used      []string
		want      string // "" is none
	}{
		{"empty /16", "10.244.0.0/16", nil, "10.244.0.0/24"},
		{"skips used", "10.244.0.0/16", []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.3.0/24"}, "10.244.2.0/24"},
		{"last of /23", "10.0.0.0/23", []string{"10.0.0.0/24"}, "10.0.1.0/24"},
		{"full /23", "10.0.0.0/23", []string{"10.0.0.0/24", "10.0.1.0/24"}, ""},
		{"/24 is one node's", "10.9.9.0/24", nil, "10.9.9.0/24"},
		{"narrower than /24", "10.9.9.128/25", nil, "10.9.9.128/25"},
		{"a /8 crosses octets", "10.0.0.0/8", []string{"10.0.0.0/24"}, "10.0.1.0/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &cidrSet{used: map[netip.Prefix]string{}, of: map[string]nodeCIDR{}, waiting: map[string]bool{}}
			for i, u := range tc.used {
				s.occupy(fmt.Sprint("n", i), mustPrefix(t, u))
			}
			got, ok := s.lowestFree(mustPrefix(t, tc.rng))
			if (tc.want == "") == ok || (ok && got.String() != tc.want) {
				t.Fatalf("lowestFree = %v, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
