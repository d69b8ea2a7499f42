package agentapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// Connect proxies an authorized connect subresource to the kubelet API of the node it concerns, through that
// node's tunnel (pods/proxy and services/proxy to the agent's pod proxy: podproxy.go). Errors before anything is
// written are returned for the Kubernetes API to answer: 400 for a pod without a node or a container that cannot
// be chosen, 503 when the node's agent is not connected.
func (a *API) Connect(w http.ResponseWriter, r *http.Request, req kubeapi.ConnectRequest) error {
	if req.Proxy != nil {
		return a.connectPod(w, r, req)
	}
	t, err := kubeletTarget(req, r.URL.Query(), r.URL.RawQuery)
	if err != nil {
		return err
	}
	if t.noContent {
		w.WriteHeader(http.StatusNoContent) // upstream: the logs of a pod without a node are an empty stream
		return nil
	}
	if peer, ok := a.tunnelPeer(r, req.Cluster, t.node); ok {
		return a.forward(w, r, peer, t.node)
	}
	if p := tunnelingProtocol(r); p != "" && req.Subresource == "portforward" {
		return a.tunnelSPDY(w, r, req.Cluster, t, p)
	}
	return a.proxy(w, r, req.Cluster, t)
}

// proxy reverse-proxies r to t on node's kubelet, upgrades included.
func (a *API) proxy(w http.ResponseWriter, r *http.Request, cluster string, t target) (err error) {
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: "kubelet", Path: t.path, RawQuery: t.query}
			pr.Out.Host = "kubelet"
			stripCredentials(pr.Out.Header)
		},
		Transport:     a.cfg.Tunnels.Transport(cluster, t.node),
		FlushInterval: -1, // logs with follow, and any other stream, reach the client as they come
		ErrorHandler:  func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	defer func() {
		// The copy of a streaming answer fails when either side goes away; nothing more can be said to the
		// client then, so the stream just ends.
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	rp.ServeHTTP(w, r)
	switch {
	case proxyErr == nil:
		return nil
	case errors.Is(proxyErr, tunnel.ErrNotConnected):
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's agent is not connected", t.node))
	case r.Context().Err() != nil:
		return r.Context().Err()
	}
	a.log.WarnContext(r.Context(), "proxying to a node's agent failed", "cluster", cluster, "node", t.node,
		"path", t.path, "err", proxyErr)
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the connection to node %s's agent failed", t.node))
}

// stripCredentials removes the caller's credentials: a node never sees them.
func stripCredentials(h http.Header) {
	for k := range h {
		if k == "Authorization" || k == "Cookie" || k == "Proxy-Authorization" || strings.HasPrefix(k, "Impersonate-") ||
			strings.HasPrefix(k, "X-Remote-") {
			delete(h, k)
		}
	}
}

// target is a request on a node's kubelet API.
type target struct {
	node        string
	path, query string
	noContent   bool // answer 204 without asking the kubelet
}

// kubeletTarget is the kubelet request kube-apiserver would make for req (with the caller's query q, raw
// rawQuery): the path and parameters of pkg/registry/core/pod's LogLocation, ExecLocation, AttachLocation
// and PortForwardLocation, and the node proxy's path.
func kubeletTarget(req kubeapi.ConnectRequest, q url.Values, rawQuery string) (target, error) {
	if node, ok := req.Object.(*corev1.Node); ok {
		if req.Subresource != "proxy" {
			return target{}, apierrors.NewNotFound(corev1.Resource("nodes/"+req.Subresource), node.Name)
		}
		return target{node: node.Name, path: req.Path, query: rawQuery}, nil
	}
	pod, ok := req.Object.(*corev1.Pod)
	if !ok {
		return target{}, fmt.Errorf("agentapi: %s of a %T", req.Subresource, req.Object)
	}
	t := target{node: pod.Spec.NodeName}
	base := "/" + pod.Namespace + "/" + pod.Name
	if req.Subresource == "portforward" {
		if t.node == "" {
			return target{}, noHost(pod)
		}
		t.path, t.query = "/portForward"+base, portForwardQuery(q).Encode()
		return t, nil
	}
	container, err := chooseContainer(pod, q.Get("container"))
	if err != nil {
		return target{}, err
	}
	base += "/" + container
	switch req.Subresource {
	case "log":
		params, err := logQuery(pod.Name, q)
		if err != nil {
			return target{}, err
		}
		t.path, t.query, t.noContent = "/containerLogs"+base, params.Encode(), t.node == ""
		return t, nil
	case "exec", "attach":
		if t.node == "" {
			return target{}, noHost(pod)
		}
		t.path, t.query = "/"+req.Subresource+base, streamQuery(q, req.Subresource == "exec").Encode()
		return t, nil
	}
	return target{}, apierrors.NewNotFound(corev1.Resource("pods/"+req.Subresource), pod.Name)
}

func noHost(pod *corev1.Pod) error {
	return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
}
