// Package apiproxy is a node's in-cluster endpoint of its cluster's API (docs/design/incluster.md): the agent
// serves it on the pod gateway, and its Service proxy sends the `kubernetes` Service's cluster IP there, so that
// client-go's rest.InClusterConfig, kubectl in a pod, and anything else that speaks to
// https://kubernetes.default.svc work as on any Kubernetes cluster.
//
// Every request goes on to the server under the cluster's prefix (/clusters/<id>) with the caller's own
// headers: the pod's ServiceAccount token is what the server authenticates, authorizes and audits; the node's
// credential is used only to ask the server for the proxy's certificate, signed by the cluster's own CA for the
// names in-cluster clients verify (kubernetes.default.svc..., the cluster IP).
package apiproxy
