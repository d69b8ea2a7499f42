package agents

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/network"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/nft"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// TestCleanupOtherModes: the nftables mode's tables are removed when the agent starts in another mode (a switch of
// --proxy-mode), and kept when it starts in nftables mode. Run in a network namespace of the test's own.
func TestCleanupOtherModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	path := netnstest.New(t, t.TempDir(), "node")
	cfg := proxyConfig{clusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	k := proxy.Key{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: corev1.ProtocolTCP, Port: 80}
	tables := func() (n int, err error) {
		err = netnstest.Run(path, func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			list, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
			n = len(list)
			return err
		})
		return n, err
	}
	for _, tc := range []struct {
		mode string
		kept bool
	}{{ProxyNFTables, true}, {ProxyIPVS, false}, {ProxyNone, false}} {
		err := netnstest.Run(path, func() error {
			b, err := nft.NewSharded(nft.Config{PodCIDR: cfg.clusterCIDR}, nft.DefaultShards)
			if err != nil {
				return err
			}
			defer b.Close()
			if err := b.Sync(context.Background(), proxy.State{k: {Key: k, Kind: proxy.ClusterIP}}); err != nil {
				return err
			}
			cleanupOtherModes(tc.mode, cfg, slog.New(slog.DiscardHandler))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := tables()
		if err != nil {
			t.Fatal(err)
		}
		if kept := n == nft.DefaultShards; kept != tc.kept || !kept && n != 0 {
			t.Errorf("starting in %s mode left %d of the nftables mode's %d tables, want them kept: %v", tc.mode, n, nft.DefaultShards, tc.kept)
		}
	}
}

// refusing is a backend whose every Sync fails, as when the kernel refuses a rule.
type refusing struct{ syncs chan struct{} }

func (r refusing) Sync(context.Context, proxy.State) error {
	select {
	case r.syncs <- struct{}{}:
	default:
	}
	return errors.New("nft: commit: operation not supported\nnft: another table: invalid argument")
}
func (refusing) Resync(context.Context) error  { return nil }
func (refusing) Cleanup(context.Context) error { return nil }
func (refusing) Close() error                  { return nil }

// TestProxyReportsRefusalsOnTheNode: the agent's proxy loop, on a real API with the node's credential (whose
// authorizer lets it watch Services and EndpointSlices), turns a failing sync into one Warning event
// FailedToSyncProxyRules on its Node, the errors on one line, and keeps running.
func TestProxyReportsRefusalsOnTheNode(t *testing.T) {
	api, _ := apitest.New(t)
	inf := newServiceInformers(nodeClient(t, api, "n1"))
	events := record.NewFakeRecorder(10)
	b := refusing{syncs: make(chan struct{}, 1)}
	nodeRef := &corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}
	loop, err := newProxyLoop(b, proxyConfig{minSync: time.Millisecond, fullSync: time.Hour}, inf,
		proxyNode("n1", func() string { return "192.0.2.1" }), netip.AddrPort{}, events, nodeRef, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case ev := <-events.Events:
		want := "Warning FailedToSyncProxyRules syncing the Service proxy failed: nft: commit: operation not supported; nft: another table: invalid argument"
		if ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the refused sync")
	}
	// It retries: another Sync comes, and no second event for the same run of failures.
	<-b.syncs
	select {
	case <-b.syncs:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not retry")
	}
	select {
	case ev := <-events.Events:
		t.Errorf("a second event for the same failures: %q", ev)
	default:
	}
}

// recording is a backend that keeps the last state it was given.
type recording struct {
	mu    sync.Mutex
	state proxy.State
}

func (r *recording) Sync(_ context.Context, s proxy.State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = maps.Clone(s)
	return nil
}
func (*recording) Resync(context.Context) error  { return nil }
func (*recording) Cleanup(context.Context) error { return nil }
func (*recording) Close() error                  { return nil }

func (r *recording) get(k proxy.Key) (proxy.VirtualService, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs, ok := r.state[k]
	return vs, ok
}

// TestTheAPIServiceIsServedByThisNode: with an API endpoint, the proxy sends the kubernetes Service's cluster IP
// to this node's API proxy only — whatever EndpointSlices the Service has — and other Services are untouched.
func TestTheAPIServiceIsServedByThisNode(t *testing.T) {
	api, _ := apitest.New(t)
	admin := apitest.Admin(t, api, "c1")
	ctx := t.Context()
	// Someone publishes endpoints for the API Service; the node ignores them.
	foreign := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-elsewhere",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.50"}}},
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](443)}}}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inf := newServiceInformers(nodeClient(t, api, "n1"))
	b := &recording{}
	ep := netip.MustParseAddrPort("10.244.3.1:6443")
	loop, err := newProxyLoop(b, proxyConfig{minSync: time.Millisecond, fullSync: time.Hour}, inf,
		proxyNode("n1", func() string { return "192.0.2.1" }), ep, record.NewFakeRecorder(10),
		&corev1.ObjectReference{Kind: "Node", Name: "n1"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.start(ctx); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(lctx) }()
	defer func() { cancel(); <-done }()

	key := proxy.Key{Addr: netip.MustParseAddr(svc.Spec.ClusterIP), Protocol: corev1.ProtocolTCP, Port: 443}
	apitest.Eventually(t, "the API Service's cluster IP sent to this node's API proxy only", func() bool {
		vs, ok := b.get(key)
		return ok && slices.Equal(vs.Destinations, []netip.AddrPort{ep})
	})
	// Another Service with endpoints keeps them.
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if web, err = admin.CoreV1().Services("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webSlice := foreign.DeepCopy()
	webSlice.Name, webSlice.Labels[discoveryv1.LabelServiceName] = "web-1", "web"
	webSlice.Ports[0] = discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To[int32](8080)}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, webSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webKey := proxy.Key{Addr: netip.MustParseAddr(web.Spec.ClusterIP), Protocol: corev1.ProtocolTCP, Port: 80}
	apitest.Eventually(t, "another Service's own endpoints", func() bool {
		vs, ok := b.get(webKey)
		return ok && slices.Equal(vs.Destinations, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.50:8080")})
	})
	if vs, _ := b.get(key); !slices.Equal(vs.Destinations, []netip.AddrPort{ep}) {
		t.Fatalf("the API Service's destinations became %v", vs.Destinations)
	}
	// Deleted, the API Service goes from the proxy (the server puts it back at its next start).
	if err := admin.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "the deleted API Service gone from the proxy", func() bool {
		_, ok := b.get(key)
		return !ok
	})
}

// TestCleanupRemovesWhatAgentsMade: `wheelhouse agent cleanup` (Cleanup) leaves a node's namespace without the
// Service proxy's tables and the pod network's bridge, routes and masquerade table; a second run finds nothing
// to do. Run in a network namespace of the test's own.
func TestCleanupRemovesWhatAgentsMade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	path := netnstest.New(t, t.TempDir(), "node")
	n, err := network.New(network.Config{PodCIDR: netip.MustParsePrefix("10.244.3.0/24"), ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		StateDir: t.TempDir(), NetNS: path})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := n.SyncRoutes(t.Context(), map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.4.0/24"): netip.MustParseAddr("10.244.3.7")}); err != nil {
		t.Fatal(err)
	}
	k := proxy.Key{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: corev1.ProtocolTCP, Port: 80}
	state := func() (tables int, bridge bool, routes int, err error) {
		err = netnstest.Run(path, func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			list, err := c.ListTables()
			tables = len(list)
			if err != nil {
				return err
			}
			_, lerr := netlink.LinkByName(network.DefaultBridge)
			bridge = lerr == nil
			return nil
		})
		if err == nil {
			var rs map[netip.Prefix]netip.Addr
			rs, err = n.Routes()
			routes = len(rs)
		}
		return
	}
	err = netnstest.Run(path, func() error {
		b, err := nft.NewSharded(nft.Config{PodCIDR: netip.MustParsePrefix("10.244.0.0/16")}, nft.DefaultShards)
		if err != nil {
			return err
		}
		defer b.Close()
		return b.Sync(t.Context(), proxy.State{k: {Key: k, Kind: proxy.ClusterIP}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if tables, bridge, routes, err := state(); err != nil || tables < nft.DefaultShards+1 || !bridge || routes != 1 {
		t.Fatalf("before: %d tables, bridge %v, %d routes, %v", tables, bridge, routes, err)
	}
	for range 2 {
		if err := netnstest.Run(path, func() error {
			return Cleanup(t.Context(), filepath.Join(t.TempDir(), "no-containerd.sock"), "", slog.New(slog.DiscardHandler))
		}); err != nil {
			t.Fatal(err)
		}
		if tables, bridge, routes, err := state(); err != nil || tables != 0 || bridge || routes != 0 {
			t.Fatalf("after: %d tables, bridge %v, %d routes, %v", tables, bridge, routes, err)
		}
	}
}
