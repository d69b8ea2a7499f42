// Package proxy turns a cluster's Services and EndpointSlices into the virtual services a node programs into its
// kernel (IPVS or nftables), and computes the minimal change from what the kernel holds to that. The model
// follows upstream kube-proxy: one virtual service per Service address, protocol and port (cluster IPs, external
// IPs, the node's addresses for node ports); destinations are the ready endpoints of the port, or the serving
// terminating ones while none is ready; internal and external traffic policies Local keep this node's endpoints
// only; session affinity ClientIP with its timeout. Loop is the sync loop the agent runs over a Backend: changes
// applied together at most once per min-sync, a periodic read-back, failures retried with back-off and reported.
// See docs/design/proxy.md.
package proxy
