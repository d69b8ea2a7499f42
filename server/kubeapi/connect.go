package kubeapi

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// Connector serves the subresources that reach a node's kubelet: pods/log, pods/exec, pods/attach,
// pods/portforward and nodes/proxy (server/agentapi implements it, through the node's agent tunnel). The API
// has authenticated and authorized the request and read the pod or node before Connect runs. Connect answers
// the request itself, or returns an error (an apierrors status error chooses the answer) before writing
// anything; the API writes that error as a Status.
type Connector interface {
	Connect(w http.ResponseWriter, r *http.Request, req ConnectRequest) error
}

// ConnectRequest is one request for a connect subresource.
type ConnectRequest struct {
	Cluster string
	User    User
	// Subresource is log, exec, attach, portforward (pods) or proxy (nodes).
	Subresource string
	// Object is the *corev1.Pod or *corev1.Node named in the URL, as stored in Cluster.
	Object runtime.Object
	// Path is the path below nodes/<name>/proxy, starting with "/" (nodes/proxy only).
	Path string
}

// connectSubresources are the subresources served by the Connector, per stored resource, with their verbs
// (upstream's: a GET of pods/exec is a websocket upgrade, a POST a SPDY one).
var connectSubresources = map[string]map[string][]string{
	"pods": {"log": {"get"}, "exec": {"create", "get"}, "attach": {"create", "get"},
		"portforward": {"create", "get"}},
	"nodes": {"proxy": {"create", "delete", "get", "patch", "update"}},
}

// connectKinds are the discovery kinds of the connect subresources (upstream's option types).
var connectKinds = map[string]string{"log": "Pod", "exec": "PodExecOptions", "attach": "PodAttachOptions",
	"portforward": "PodPortForwardOptions", "proxy": "NodeProxyOptions"}

// isConnect reports whether the request is for a connect subresource of its resource.
func (rq *request) isConnect() bool {
	_, ok := connectSubresources[rq.res.Storage][rq.info.subresource]
	return ok && rq.res.GVK.Group == ""
}

// serveConnect hands a connect subresource to the Connector. A websocket upgrade of exec, attach or
// portforward is a GET, authorized as get by the pipeline; it needs create as well, as SPDY's POST does
// (upstream's AuthorizePodWebsocketUpgradeCreatePermission), so get alone never opens a shell.
func (rq *request) serveConnect() error {
	ri := rq.info
	if rq.api.cfg.Connector == nil {
		return notFoundPath()
	}
	if ri.verb == "get" && ri.subresource != "log" && rq.res.Storage == "pods" && isWebSocketUpgrade(rq.r) {
		if err := rq.authorize(Attributes{Verb: "create", Group: ri.gv.Group, Resource: ri.plural,
			Subresource: ri.subresource, Namespace: ri.namespace, Name: ri.name}); err != nil {
			return err
		}
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
