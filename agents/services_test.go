package agents

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"testing"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/nft"
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
