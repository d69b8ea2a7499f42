package network

import (
	"errors"
	"fmt"
	"net/netip"
)

// DefaultBridge is the bridge's name when Config.Bridge is empty.
const DefaultBridge = "wh0"

// Config configures the pod network of one node. Zero fields take the defaults noted.
type Config struct {
	// PodCIDR is the node's spec.podCIDR (required, IPv4, at most /30): the bridge has its first address, pods
	// the rest but the broadcast address.
	PodCIDR netip.Prefix
	// ClusterCIDR is the cluster's pod CIDR (required, containing PodCIDR): traffic from PodCIDR to outside it
	// is masqueraded.
	ClusterCIDR netip.Prefix
	// Bridge is the name of the node's bridge (default DefaultBridge).
	Bridge string
	// StateDir holds the address allocations (required); it must survive agent restarts.
	StateDir string
	// MTU of the bridge and the veth pairs (default 1500).
	MTU int
	// NetNS is the path of the node's network namespace ("": the agent's own). Tests run "nodes" in namespaces.
	NetNS string
}

func (c Config) withDefaults() Config {
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case !c.PodCIDR.IsValid() || !c.PodCIDR.Addr().Is4() || c.PodCIDR.Bits() > 30:
		return fmt.Errorf("network: pod CIDR %v is not an IPv4 network of at least 4 addresses", c.PodCIDR)
	case !c.ClusterCIDR.IsValid() || !c.ClusterCIDR.Addr().Is4():
		return fmt.Errorf("network: cluster CIDR %v is not an IPv4 network", c.ClusterCIDR)
	case c.ClusterCIDR.Bits() > c.PodCIDR.Bits() || !c.ClusterCIDR.Contains(c.PodCIDR.Addr()):
		return fmt.Errorf("network: cluster CIDR %v does not contain pod CIDR %v", c.ClusterCIDR, c.PodCIDR)
	case len(c.Bridge) > 15:
		return fmt.Errorf("network: bridge name %q is longer than 15 bytes", c.Bridge)
	case c.StateDir == "":
		return errors.New("network: StateDir is required")
	case c.MTU < 68:
		return fmt.Errorf("network: MTU %d is below IPv4's minimum of 68", c.MTU)
	}
	return nil
}
