// Package network is the pod network of one node (docs/design/agent.md, "Pod network"): the node agent hands
// a *Network to the process runtime as its process.Network, and keeps its routes in step with the other
// nodes of the cluster.
//
// Shape, for a node whose spec.podCIDR is P (a /24 of the cluster's pod CIDR C):
//
//   - a Linux bridge (Config.Bridge, "wh0") holding the gateway address, the first address of P;
//   - per sandbox, a veth pair: the host end (named from the sandbox ID) is a port of the bridge, the other is
//     eth0 in the sandbox's network namespace with the sandbox's address of P and a default route via the
//     gateway; lo is up there too;
//   - host-gw routes: every other node's podCIDR via that node's InternalIP (the nodes share an L2 network),
//     tagged with RouteProtocol so that SyncRoutes removes the ones it made and no one else's;
//   - one nftables table, "wheelhouse" (family ip): traffic from P to outside C is masqueraded to the node's
//     address; the bridge's traffic is accepted in the forward hook. IPv4 forwarding is on.
//
// Guarantees:
//
//   - Addresses are allocated from a file-locked allocator in Config.StateDir (one file per address, holding
//     the sandbox ID), so allocations survive agent restarts and two processes on one state dir never hand out
//     one address twice. A sandbox holds one address: SetUp again returns the one it has. Released addresses
//     are handed out again only after the rest of the range (as the CNI host-local plugin does), so a stale
//     connection-tracking or ARP entry of a gone pod rarely meets its successor.
//   - Setup, SyncRoutes and TearDown are idempotent; SetUp undoes its partial work on failure. Setup replaces
//     the nftables table atomically (one transaction).
//   - Every change is made in the node's network namespace (Config.NetNS, the agent's own by default) through
//     netlink and nftables sockets opened in it, and in the sandbox's through a socket opened in that one. A
//     thread enters another namespace only locked (to open such a socket, or to write the ip_forward sysctl)
//     and goes back before it is unlocked; one that cannot go back stays locked, so Go discards it.
//
// Not done: IPv6 (dual-stack), network policy, bandwidth limits, port mappings (hostPort), an overlay for
// nodes that do not share an L2 network.
package network
