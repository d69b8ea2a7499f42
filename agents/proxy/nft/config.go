package nft

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net/netip"

	"github.com/vishvananda/netns"
)

// DefaultTable is the table's name when Config.Table is empty.
const DefaultTable = "wh-proxy"

// DefaultMasqueradeMark is the packet mark bit that asks for masquerading when Config.MasqueradeMark is 0
// (kube-proxy's).
const DefaultMasqueradeMark = 0x4000

// Config configures the nftables backend of one node. Zero fields take the defaults noted.
type Config struct {
	// NetNS is the node's network namespace (0: the agent's own); New opens its socket there and keeps no
	// reference to the handle. Tests run "nodes" in namespaces.
	NetNS netns.NsHandle
	// Table is the nftables table (family ip) the backend owns and rewrites at will (default DefaultTable).
	Table string
	// PodCIDR is the cluster's pod network (kube-proxy's --cluster-cidr): a connection to a cluster IP from outside
	// it is masqueraded, so that the reply comes back through this node. Zero: none is.
	PodCIDR netip.Prefix
	// MasqueradeMark is the bit of the packet mark that a virtual service's chain sets to have the connection
	// masqueraded in postrouting, which clears it (default DefaultMasqueradeMark).
	MasqueradeMark uint32
	// Logger receives the backend's rewrites and drift (default: discarded).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MasqueradeMark == 0 {
		c.MasqueradeMark = DefaultMasqueradeMark
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Table) > 255:
		return errors.New("nft: the table name is longer than 255 bytes")
	case c.PodCIDR.IsValid() && !c.PodCIDR.Addr().Is4():
		return fmt.Errorf("nft: pod CIDR %v is not IPv4 (the table is family ip)", c.PodCIDR)
	case bits.OnesCount32(c.MasqueradeMark) != 1:
		return fmt.Errorf("nft: masquerade mark %#x is not one bit", c.MasqueradeMark)
	}
	return nil
}
