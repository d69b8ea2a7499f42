package agents

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

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
		proxyNode("n1", func() string { return "192.0.2.1" }), events, nodeRef, slog.New(slog.DiscardHandler))
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
