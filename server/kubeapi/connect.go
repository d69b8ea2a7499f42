package kubeapi

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// Connector serves the subresources that reach a node's kubelet: pods/log, pods/exec, pods/attach,
// pods/portforward and nodes/proxy, and those that reach a pod's port, pods/proxy and services/proxy
// (server/agentapi implements it, through the node's agent tunnel). The API has authenticated and authorized
// the request and read the pod or node before Connect runs; for services/proxy it has chosen one of the
// service's ready endpoints and hands over that endpoint's pod. Connect answers the request itself, or returns
// an error (an apierrors status error chooses the answer) before writing anything; the API writes that error
// as a Status.
type Connector interface {
	Connect(w http.ResponseWriter, r *http.Request, req ConnectRequest) error
}

// ConnectRequest is one request for a connect subresource.
type ConnectRequest struct {
	Cluster string
	User    User
	// Subresource is log, exec, attach, portforward (pods) or proxy (pods, services and nodes).
	Subresource string
	// Object is the *corev1.Pod or *corev1.Node named in the URL, as stored in Cluster; for services/proxy, the
	// *corev1.Pod of the endpoint chosen.
	Object runtime.Object
	// Path is the path below <name>/proxy. For nodes/proxy it starts with "/". For pods/proxy and
	// services/proxy it is "" when the URL ends at /proxy (upstream then redirects a GET or HEAD to /proxy/),
	// else the path cleaned as upstream cleans it (no "." or ".." segments, no empty ones), starting with "/"
	// and keeping a trailing "/".
	Path string
	// Proxy is where pods/proxy and services/proxy reach the pod (nil for the other subresources).
	Proxy *PodProxy
}

// PodProxy is the target of a pods/proxy or services/proxy request.
type PodProxy struct {
	// Scheme is "http" or "https" (upstream's: TLS without verifying the pod's certificate).
	Scheme string
	// Port is the pod's port: the one the URL names (a number, or for pods the name of a container port), a
	// service port's endpoint port, or for a pod URL without one its first container port (else the scheme's).
	Port int32
	// Prefix is the path of the proxy's root (".../pods/<name>/proxy") as the cluster's API lays it out, without
	// the server's /clusters/<id> prefix: the pod's absolute links and redirects are rewritten below it, as
	// upstream does, so that they work through kubectl proxy (which serves the cluster's API at its root) and
	// read what upstream's conformance tests expect.
	Prefix string
}

// connectSubresources are the subresources served by the Connector, per stored resource, with their verbs
// (upstream's: a GET of pods/exec is a websocket upgrade, a POST a SPDY one).
var connectSubresources = map[string]map[string][]string{
	"pods": {"log": {"get"}, "exec": {"create", "get"}, "attach": {"create", "get"},
		"portforward": {"create", "get"}, "proxy": proxyVerbs},
	"nodes":    {"proxy": proxyVerbs},
	"services": {"proxy": proxyVerbs},
}

// proxyVerbs are the verbs of the proxy subresources: their methods GET, POST, PUT, PATCH and DELETE (HEAD is
// get; OPTIONS has no verb, as upstream's, so only a rule for every verb allows it).
var proxyVerbs = []string{"create", "delete", "get", "patch", "update"}

// connectKinds are the discovery kinds of the connect subresources (upstream's option types), by
// resource/subresource.
var connectKinds = map[string]string{"pods/log": "Pod", "pods/exec": "PodExecOptions",
	"pods/attach": "PodAttachOptions", "pods/portforward": "PodPortForwardOptions", "pods/proxy": "PodProxyOptions",
	"nodes/proxy": "NodeProxyOptions", "services/proxy": "ServiceProxyOptions"}

// isConnect reports whether the request is for a connect subresource of its resource.
func (rq *request) isConnect() bool {
	_, ok := connectSubresources[rq.res.Storage][rq.info.subresource]
	return ok && rq.res.GVK.Group == ""
}

// isProxyOptions reports whether the request is an OPTIONS of a proxy subresource: the one method served
// without a verb (upstream's request info gives it none; its authorization then needs a rule for every verb).
func (rq *request) isProxyOptions() bool {
	return rq.r.Method == http.MethodOptions && rq.info.subresource == "proxy" && rq.isConnect()
}

// serveConnect hands a connect subresource to the Connector. A websocket upgrade of exec, attach or
// portforward is a GET, authorized as get by the pipeline; it needs create as well, as SPDY's POST does
// (upstream's AuthorizePodWebsocketUpgradeCreatePermission), so get alone never opens a shell.
func (rq *request) serveConnect() error {
	ri := rq.info
	if rq.api.cfg.Connector == nil {
		return notFoundPath()
	}
	if ri.verb == "get" && ri.subresource != "log" && ri.subresource != "proxy" && rq.res.Storage == "pods" &&
		isWebSocketUpgrade(rq.r) {
		if err := rq.authorize(Attributes{Verb: "create", Group: ri.gv.Group, Resource: ri.plural,
			Subresource: ri.subresource, Namespace: ri.namespace, Name: ri.name}); err != nil {
			return err
		}
	}
	if ri.subresource == "proxy" && rq.res.Storage != "nodes" {
		return rq.servePodProxy()
	}
	obj, _, err := rq.load(ri.namespace, ri.name)
	if err != nil {
		return err
	}
	req := ConnectRequest{Cluster: rq.cluster.ID, User: rq.user, Subresource: ri.subresource, Object: obj}
	if ri.subresource == "proxy" {
		rest, ok := strings.CutPrefix(rq.path, "/api/"+ri.gv.Version+"/nodes/"+ri.name+"/proxy")
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			return notFoundPath()
		}
		req.Path = "/" + strings.TrimPrefix(rest, "/")
	}
	if ri.subresource == "log" && isWebSocketUpgrade(rq.r) {
		return rq.serveLogWebSocket(req)
	}
	return rq.api.cfg.Connector.Connect(rq.w, rq.r, req)
}

// isWebSocketUpgrade reports whether r asks to switch to the websocket protocol.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
