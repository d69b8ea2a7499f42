// Package dns is the cluster DNS server that runs in each node agent (issue 8): pods of the node have its
// address as their nameserver (ResolvConf writes their /etc/resolv.conf), it answers the names of the
// cluster domain from the agent's watch cache, as CoreDNS's kubernetes plugin does, and forwards the
// other names to the host's resolvers.
//
// Data flow: the agent's Service and EndpointSlice informers call Index.Handler (or the Upsert and
// Delete methods), the Index derives each Service's records (its cluster IPs, ports and published
// endpoints) and a reverse map of addresses, and the Server (miekg/dns, UDP and TCP on one address)
// answers from the Index through the Records interface. No query reads the API server.
//
// Names of the cluster domain (Config.Domain, cluster.local), per the Kubernetes DNS specification:
//
//	<svc>.<ns>.svc.<domain>                  A/AAAA of the cluster IPs (both for a dual-stack Service); for a
//	                                         headless Service, of its published endpoints; CNAME for an
//	                                         ExternalName Service; SRV of every port
//	<endpoint>.<svc>.<ns>.svc.<domain>       A/AAAA of an endpoint, named by its hostname (StatefulSet pods)
//	                                         or its dashed address (10-1-0-5)
//	_<port>._<proto>.<svc>.<ns>.svc.<domain> SRV of a named port: target <svc>.<ns>.svc.<domain> (port of the
//	                                         Service) for a Service with a cluster IP; one per endpoint,
//	                                         target <endpoint>.<svc>.<ns>.svc.<domain> (port of the
//	                                         EndpointSlice) for a headless one; the targets' addresses in
//	                                         the additional section
//	<a-b-c-d>.<ns>.pod.<domain>              A of the address in the name, unchecked ("pods insecure")
//	dns-version.<domain>                     TXT "1.1.0"; the domain itself has SOA and NS
//
// and PTR records under in-addr.arpa and ip6.arpa for the addresses the Index knows: a cluster IP names
// its Service; an endpoint's address names the endpoint (one PTR per Service it backs).
//
// Guarantees:
//
//   - A change given to the Index is in the answer of every query that starts after the call returned.
//     Lookups take a read lock for a map read or two (O(1) in the number of Services and endpoints);
//     a change rebuilds the records of its one Service.
//   - Answers of the cluster domain are authoritative, TTL Config.TTL (5 s). A name that does not exist
//     (an unknown Service, namespace, endpoint or port, a headless Service without published endpoints,
//     a name of the wrong shape) is NXDOMAIN; a name without records of the asked type is NOERROR without
//     answers (NODATA); both carry the domain's SOA, whose minimum is the TTL. Neither asks the upstreams.
//   - Published endpoints are those whose ready condition is true or unset, and all of them for a
//     Service with publishNotReadyAddresses. FQDN EndpointSlices are ignored.
//   - Names match case-insensitively; answers keep the case of the question.
//   - Over UDP, a response larger than the client takes (512 bytes, or its EDNS0 size up to 4096) is
//     truncated with TC set, and the client asks again over TCP. A query with EDNS0 gets an OPT record
//     (DO bit copied); an EDNS version other than 0 gets BADVERS.
//   - Other queries (names outside the domain, reverse names of unknown addresses, other classes) are
//     forwarded as they are, over the client's transport, to Config.Upstreams in order, each with
//     Config.ForwardTimeout, passing over one that fails, refuses or SERVFAILs: the first other answer is
//     returned as it is, else the last refusal, or SERVFAIL when no upstream answered. An ExternalName's target is followed likewise (in the
//     domain: here), its records added after the CNAME.
//   - The addresses of an answer come in an order that turns from one query to the next.
//
// Not done, where CoreDNS differs: a namespace exists for DNS when it holds a Service (CoreDNS watches
// Namespaces, so <ns>.svc.<domain> of an empty namespace is NODATA there, NXDOMAIN here); no cache of
// forwarded answers (CoreDNS's cache plugin); no autopath, wildcards, zone transfers, DNSSEC, "pods
// verified", topology-zone names or multicluster names; queries are not logged above debug level and
// there are no metrics.
package dns
