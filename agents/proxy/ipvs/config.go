package ipvs

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net/netip"
	"slices"

	"github.com/vishvananda/netns"
)

// DefaultInterface is the dummy interface holding the service addresses when Config.Interface is empty.
const DefaultInterface = "wh-ipvs0"

// DefaultScheduler is the IPVS scheduler when Config.Scheduler is empty: round robin.
const DefaultScheduler = "rr"

// DefaultMasqueradeMark is the packet mark bit that asks for masquerading when Config.MasqueradeMark is 0
// (kube-proxy's).
const DefaultMasqueradeMark = 0x4000

// Table is the nftables table (family inet) the backend owns for masquerading.
const Table = "wh-ipvs"

// Schedulers are the IPVS schedulers a Config may name (each is a kernel module ip_vs_<name>).
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}

// Config configures the IPVS backend of one node. Zero fields take the defaults noted.
type Config struct {
	// NetNS is the node's network namespace (0: the agent's own); New opens its sockets there and keeps a
	// duplicate of the handle (Close closes it) to set sysctls there. Tests run "nodes" in namespaces.
	NetNS netns.NsHandle
	// Interface is the dummy interface the backend creates (if missing) to hold the cluster and external IPs, so
	// that the node accepts packets for them and IPVS sees them (default DefaultInterface). Every address on it is
	// the backend's: it removes those no virtual service uses.
	Interface string
	// Scheduler is the IPVS scheduler of every virtual service, one of Schedulers (default DefaultScheduler).
	Scheduler string
	// PodCIDR is the cluster's pod network (kube-proxy's --cluster-cidr): a connection to a cluster IP from outside
	// it is masqueraded, so that the reply comes back through this node. Zero: none is.
	PodCIDR netip.Prefix
	// MasqueradeMark is the bit of the packet mark that asks for a connection to be masqueraded in postrouting,
	// which clears it (default DefaultMasqueradeMark).
	MasqueradeMark uint32
	// Logger receives the backend's repairs and refusals (default: discarded).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if c.Scheduler == "" {
		c.Scheduler = DefaultScheduler
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
	case len(c.Interface) > 15: // IFNAMSIZ - 1
		return fmt.Errorf("ipvs: interface name %q is longer than 15 bytes", c.Interface)
	case !slices.Contains(Schedulers, c.Scheduler):
		return fmt.Errorf("ipvs: unknown scheduler %q (known: %v)", c.Scheduler, Schedulers)
	case bits.OnesCount32(c.MasqueradeMark) != 1:
		return fmt.Errorf("ipvs: masquerade mark %#x is not one bit", c.MasqueradeMark)
	}
	return nil
}

// ErrNoIPVS is returned (wrapped) by Available, New and Sync when the kernel has no IPVS.
var ErrNoIPVS = errors.New("ipvs: the kernel has no IPVS (ip_vs)")
