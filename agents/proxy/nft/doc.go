// Package nft is the nftables backend of the Service proxy (docs/design/proxy.md): it makes the kernel hold a
// proxy.State in one table of its own, Config.Table ("wh-proxy", family ip), changing per sync only what changed.
//
// Layout (kube-proxy's nftables mode is the reference; the differences are for sync speed, see below):
//
//	table ip wh-proxy {
//	  map virtual-services { type ipv4_addr . inet_proto . inet_service : verdict  # one element per virtual service
//	    elements = { 10.96.0.10 . tcp . 80 : goto endpoints-2-masquerade-outside, 10.96.0.14 . tcp . 80 : goto no-endpoints-reset,
//	                 192.0.2.1 . tcp . 30080 : goto endpoints-2-masquerade, 10.96.0.12 . tcp . 80 : goto svc-tcp/10.96.0.12:80 } }
//	  map endpoints { type ipv4_addr . inet_proto . inet_service . mark : ipv4_addr . inet_service  # slot → endpoint
//	    elements = { 10.96.0.10 . tcp . 80 . 0x00000000 : 10.244.0.2 . 8080, 10.96.0.10 . tcp . 80 . 0x00000001 : 10.244.1.7 . 8080, … } }
//	  set hairpin { type ipv4_addr . ipv4_addr; elements = { 10.244.0.2 . 10.244.0.2, … } }  # every endpoint address
//	  set affinity { type mark . ipv4_addr . ipv4_addr . inet_service; flags dynamic,timeout; size 1048576 }
//	  chain prerouting { type nat hook prerouting priority dstnat; jump services }
//	  chain output { type nat hook output priority dstnat; jump services }      # connections from the node itself
//	  chain services { ip daddr . meta l4proto . th dport vmap @virtual-services }
//	  chain postrouting { type nat hook postrouting priority srcnat;
//	    meta mark & 0x4000 != 0 meta mark set meta mark & ~0x4000 masquerade fully-random
//	    ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random }
//	  chain endpoints-2-masquerade-outside {     # shared by every service of 2 endpoints masquerading outside clients
//	    ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000
//	    dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints }
//	  chain endpoints-2-masquerade { meta mark set meta mark | 0x4000; dnat ip to … numgen random mod 2 map @endpoints }
//	  chain no-endpoints-reset { reject with tcp reset }
//	  chain svc-tcp/10.96.0.12:80 {              # a service with ClientIP affinity: its own chain
//	    ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000
//	    <id> . ip saddr . 10.244.0.2 . 8080 @affinity update @affinity { … timeout 3h } dnat to 10.244.0.2:8080
//	    …                                        # the same for each endpoint
//	    numgen random mod 2 == 0 update @affinity { … } dnat to 10.244.0.2:8080   # endpoint i of n: 1/(n-i)
//	    update @affinity { … } dnat to 10.244.1.7:8080 }
//	}
//
// A service without affinity goes to the chain shared by every service with as many active destinations and the
// same masquerade: cluster IPs mark connections from outside Config.PodCIDR, node ports and external IPs mark
// every connection unless KeepSource (externalTrafficPolicy Local). That chain DNATs to slot `numgen random mod n`
// of the packet's own virtual service (its address, protocol and port are the start of the key) in the endpoints
// map: its destinations in order. A virtual service without destinations goes to a reject chain (TCP reset, ICMP
// port unreachable otherwise). With ClientIP affinity the service's own chain first sends a client with an entry
// (service, client, endpoint) in the affinity set to that endpoint, and every choice adds or refreshes the entry
// with the service's timeout. Node ports match the node addresses the model gives them (proxy.Node.Addrs), as
// upstream's default --nodeport-addresses=primary. The mark bit is Config.MasqueradeMark. Every rule carries a
// comment naming what it depends on besides its chain's name and the Config, which is what a read-back compares,
// with the maps' elements.
//
// Why this layout (docs/design/proxy.md has the measurements): a per-service anonymous map (numgen … vmap { … })
// costs the kernel time quadratic in the number of sets of a transaction: a full sync of 10,000 services took
// 30 s here, 7 s with named maps. One rule per endpoint keeps it linear but costs ~10 µs a rule in the kernel's
// commit: 1.5–1.9 s for 120,000. Binding a rule to a map makes the kernel walk the map's elements unless a rule of
// the same chain is bound to it already, so one rule per service using a shared map took minutes; with the rules
// in a few shared chains (and written before the elements) the walks cost nothing. Now an endpoint change is two
// map elements and no rule, and a full sync is a few rules plus one element per endpoint.
//
// Costs (backend_bench_test.go and make perf-proxy, on a 2-CPU VM, 10 endpoints a service): a full sync of 10,000
// services is ~130 messages (110,000 map elements, ~20 rules) and takes 0.3–0.4 s, of 1,000 services 30–40 ms; one
// endpoint change with 10,000 services programmed 6–9 ms (4 messages); a service gaining an endpoint 9–11 ms (its
// virtual-services element moves to another chain, which the kernel validates). The agent uses Sharded (8
// tables), which builds the tables' messages in parallel.
//
// Guarantees:
//
//   - Sync is one transaction (one netlink batch): the table changes all at once or, when the kernel refuses any
//     part, not at all. The first Sync, and a Sync after a refusal or after the table was changed by someone else,
//     replaces the table whole in one transaction; the others touch only the map elements of the virtual
//     services proxy.Diff names (and a shared chain when the first service needs it or the last leaves it, an own
//     chain when its rules change), so that one endpoint change is a handful of messages whatever the number of
//     services.
//   - The backend keeps a record of what it programmed (proxy.Apply of each change) instead of reading the table
//     back at every sync. Sync asks the kernel for the ruleset generation (one round trip): when someone else has
//     committed since the backend's last transaction, it reads the table back and rewrites it if it differs.
//     Resync reads it back unconditionally (run it periodically).
//   - Drain: nftables has no weights. A destination no longer wanted (proxy.DrainDest) leaves its service's slots
//     (or own chain), so it gets no new connections, while established ones go on by conntrack; proxy.DeleteDest then only
//     updates the record (there is nothing of it left in the kernel). Affinity entries of a drained endpoint are
//     never matched again and expire.
//   - Cleanup removes the table; Close only releases the socket.
//
// The backend speaks nf_tables netlink itself (netlink.go) and uses google/nftables for its expressions only: that
// library acknowledges and echoes every message, which at 100,000 rules costs seconds.
//
// Not done: IPv6 (the table is family ip; IPv6 virtual services are left out and logged — a second table of
// family ip6 built by the same code is the way); traffic to unallocated cluster IPs is not rejected (kube-proxy's
// cluster-ips check). A pod reaching another pod of its own bridge through a Service needs br_netfilter
// (bridge-nf-call-iptables=1), as with every kube-proxy: the reply is bridged, and only then seen by conntrack.
package nft
