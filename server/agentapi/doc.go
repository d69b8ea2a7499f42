// Package agentapi is the server's side of its node agents (docs/design/agent.md): the endpoint agents keep
// their tunnel open on, and the proxy through those tunnels of the Kubernetes subresources that reach a
// kubelet.
//
//   - GET /clusters/<id>/agent/connect: authenticated with the same Authenticator as the Kubernetes API; only a
//     node credential of that cluster (user system:node:<name> in group system:nodes) may connect, as that node
//     (anyone else: 403). The request is then the node's tunnel (agents/tunnel.Registry.Accept).
//   - POST /clusters/<id>/agent/serving-certificate: the same authentication; the body is a PEM certificate
//     request, the answer the PEM certificate of the node's in-cluster API endpoint, signed by the cluster's own
//     CA (server/clusterca; docs/design/incluster.md).
//   - The Kubernetes API (server/kubeapi) authenticates, authorizes and reads the pod or node of pods/log,
//     pods/exec, pods/attach, pods/portforward and nodes/proxy, then calls API.Connect, which picks the
//     container as upstream does and reverse-proxies to the kubelet path kube-apiserver would use
//     (/containerLogs, /exec, /attach, /portForward, /<path>) over the node's tunnel, upgrades (SPDY, websocket)
//     passing through untouched.
//   - pods/proxy and services/proxy (podproxy.go): the Kubernetes API reads the pod, or chooses a ready endpoint
//     of the service whose pod holds its address, and API.Connect forwards the request through the tunnel of the
//     pod's node to the agent's /podProxy endpoint, which dials the pod's address itself, refusing any address
//     that is not one of its own pods' (agents/kubelet/api_podproxy.go); the server never dials a pod. As
//     upstream's proxy: the pod's absolute links and redirects are rewritten below the proxy's path (HTML
//     streamed, never held whole), its CORS headers dropped, a pod that cannot be reached is a 503 Status.
//
// Tenancy: a tunnel is keyed by the cluster of the URL its credential was accepted for and the node the
// credential names, and a proxied request goes to the tunnel keyed by the cluster of its own URL; so a node of
// one cluster can never be reached through another. The caller's credentials (Authorization, cookies,
// impersonation headers) are never forwarded to a node.
package agentapi
