// Package ipvs is the IPVS backend of the Service proxy (docs/design/proxy.md), as kube-proxy's IPVS mode: it makes
// the kernel of a node hold a proxy.State with the same methods as the nftables backend (agents/proxy/nft), so that
// the agent can use either.
//
// What it programs:
//
//   - one IPVS virtual service per proxy.Key (ClusterIP:port, externalIP:port, NodeIP:nodePort) with
//     Config.Scheduler; ClientIP affinity is persistence (IP_VS_SVC_F_PERSISTENT, the affinity's timeout, one
//     client per template: netmask /32 or /128); destinations are masqueraded (NAT), weight 1; a drained one has
//     weight 0 (no new connections, established ones go on) and is deleted at the next Sync (proxy.Diff);
//   - the cluster and external IPs as /32 (/128) addresses on a dummy interface of its own (Config.Interface,
//     "wh-ipvs0", created if missing and set up for IPv6), so that the node takes their packets in and IPVS sees
//     them; node ports are on the node's own addresses. Addresses no virtual service needs are removed;
//   - a table "inet wh-ipvs" (masq.go draws it) that marks, before IPVS, connections to cluster IPs from outside
//     Config.PodCIDR and to node ports and external IPs (unless KeepSource) and masquerades them after, and
//     masquerades hairpin connections (an endpoint reaching itself through its service); its sets hold one element
//     per virtual service and per endpoint address, changed per Sync in one transaction;
//   - the sysctls kube-proxy sets in IPVS mode (node.go): net.ipv4.vs.conntrack=1 (without it IPVS's connections
//     bypass conntrack and nothing is masqueraded), expire_nodest_conn, expire_quiescent_template, ip_forward.
//
// Reading back: moby/ipvs answers nil errors when the kernel has no IPVS (it sends to generic netlink family 0,
// which acknowledges everything). Available asks for the family itself (after modprobe ip_vs), New refuses to
// work without it, and New also probes the handle (a virtual service that cannot exist must not be "present").
// Every Sync then dumps the kernel's virtual services (no destinations; parsed in place, dump.go) and the dummy's
// addresses — one dump each, O(services) — so that a virtual service or address someone deleted or added is repaired by the next Sync, and
// reads back the destinations of the virtual services that may need a change: those whose record differs from
// desired, that have drained destinations, or whose kernel attributes (scheduler, persistence, flags) are not the
// recorded ones. proxy.Diff of that read back against desired gives the changes; the others are trusted to the
// record (what the last Sync read back and changed), so that one endpoint change among 10,000 services reads back
// one service's destinations. Resync reads every destination back, and the table's sets and chains, and repairs
// what differs (a destination or set element removed by hand is found there, not by Sync); run it periodically.
// The table is written whole on the first Sync and whenever it is missing (checked at each Sync), refused, or (in
// Resync) different.
//
// Ownership: the backend touches only the virtual services it was asked for, has recorded, or finds on an address
// of its dummy interface or on a node address it was asked for node ports on; others (docker's, an operator's) are
// left alone, by Sync and by Cleanup.
//
// Errors: a change the kernel refuses does not stop the others; Sync returns one error per refusal joined, each
// naming the virtual service and the change, and the next Sync retries (its read back finds what is missing). A
// virtual service the kernel refused to create gets no destinations until it exists.
//
// Not done: IPv6 forwarding (net.ipv6.conf.all.forwarding) is left to the node's network setup (setting it
// changes router advertisements on every interface); one PodCIDR (of one family) as the nftables backend; strict
// ARP (arp_ignore/arp_announce, kube-proxy's --ipvs-strict-arp): the dummy's addresses are answered for on every
// interface; traffic to a cluster IP port no Service has is not rejected.
package ipvs
