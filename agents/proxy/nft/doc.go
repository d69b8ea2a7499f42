// Package nft is the nftables backend of the Service proxy (docs/design/proxy.md): it makes the kernel hold a
// proxy.State in one table of its own, Config.Table ("wh-proxy", family ip), changing per sync only what changed.
//
// Layout (kube-proxy's nftables mode is the reference; the differences are for sync speed, see below):
//
//	table ip wh-proxy {
//	  map virtual-services { type ipv4_addr . inet_proto . inet_service : verdict  # one element per virtual service
//	    elements = { 10.96.0.10 . tcp . 80 : goto svc-tcp/10.96.0.10:80, 192.0.2.1 . tcp . 30080 : goto … } }
//	  set hairpin { type ipv4_addr . ipv4_addr; elements = { 10.244.0.2 . 10.244.0.2, … } }  # every endpoint address
//	  set affinity { type integer . ipv4_addr . ipv4_addr . inet_service; flags dynamic,timeout; size 1048576 }
//	  chain prerouting { type nat hook prerouting priority dstnat; jump services }
//	  chain output { type nat hook output priority dstnat; jump services }      # connections from the node itself
//	  chain services { ip daddr . meta l4proto . th dport vmap @virtual-services }
//	  chain postrouting { type nat hook postrouting priority srcnat;
//	    meta mark & 0x4000 != 0 meta mark set meta mark & ~0x4000 masquerade fully-random
//	    ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random }
//	  chain svc-tcp/10.96.0.10:80 {                       # one per virtual service
//	    ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x4000   # cluster IP: clients outside Config.PodCIDR
//	    numgen random mod 3 == 0 dnat to 10.244.0.2:8080             # endpoint i of n: probability 1/(n-i)
//	    numgen random mod 2 == 0 dnat to 10.244.0.3:8080
//	    dnat to 10.244.1.7:8080 }
//	}
//
// A node port or external IP marks every connection for masquerade unless KeepSource (externalTrafficPolicy
// Local); a virtual service without destinations rejects (TCP reset, ICMP port unreachable otherwise). With
// ClientIP affinity the chain first sends a client with an entry (service, client, endpoint) in the affinity set to
// that endpoint, and every choice adds or refreshes the entry with the service's timeout. Node ports match the
// node addresses the model gives them (proxy.Node.Addrs), as upstream's default --nodeport-addresses=primary.
// The mark bit is Config.MasqueradeMark. Every rule carries a comment naming what it depends on, which is what a
// read-back compares.
//
// Why not kube-proxy's layout exactly: a per-service anonymous map (numgen … vmap { … }) costs the kernel time
// quadratic in the number of sets of a transaction (anonymous set names and bindings are found by walking lists):
// a full sync of 10,000 services took 30 s here, 7 s with named maps; one map shared by every service's rule is
// quadratic too (each element is checked against every rule bound to the map). Rules that pick an endpoint with
// decreasing probability (iptables mode's way) keep a full sync linear, and need no per-endpoint chain; a new
// connection evaluates up to n rules of its service.
//
// Costs (backend_bench_test.go and make perf-proxy, on a 2-CPU VM, 10 endpoints a service): a full sync of 10,000
// services is 120,000 messages and takes 1.1–1.9 s (the kernel's commit 1.2–1.4 s of it, ~10 µs a rule), of 1,000
// services 0.1–0.2 s. One endpoint change is 14 messages but takes 57–84 ms with 10,000 services programmed in one
// table: the kernel checks the whole table (every rule reachable from the base chains, twice: prerouting and
// output) in every transaction that adds a rule. Sharded spreads the services over several tables, each with its
// own hooks, so that a change is checked in its own table only: 13–16 ms with 8 tables (sharded.go). The agent
// uses Sharded.
//
// Guarantees:
//
//   - Sync is one transaction (one netlink batch): the table changes all at once or, when the kernel refuses any
//     part, not at all. The first Sync, and a Sync after a refusal or after the table was changed by someone else,
//     replaces the table whole in one transaction; the others touch only the chains and map elements of the
//     virtual services proxy.Diff names, so that one endpoint change is a handful of messages whatever the
//     number of services.
//   - The backend keeps a record of what it programmed (proxy.Apply of each change) instead of reading the table
//     back at every sync. Sync asks the kernel for the ruleset generation (one round trip): when someone else has
//     committed since the backend's last transaction, it reads the table back and rewrites it if it differs.
//     Resync reads it back unconditionally (run it periodically).
//   - Drain: nftables has no weights. A destination no longer wanted (proxy.DrainDest) leaves its service's chain,
//     so it gets no new connections, while established ones go on by conntrack; proxy.DeleteDest then only
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
