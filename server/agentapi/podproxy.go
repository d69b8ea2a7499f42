package agentapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// ProxyErrorHeader marks an answer of an agent's pod proxy as the agent's own (it could not or would not reach
// the pod), with the reason as its value: agents/kubelet.ProxyErrorHeader, which an agent strips from pods'
// own answers.
const ProxyErrorHeader = "X-Wheelhouse-Proxy-Error"

// connectPod serves pods/proxy and services/proxy: the request goes through the tunnel of the pod's node to its
// agent's /podProxy endpoint, which dials the pod's address (and only an address of that pod; see
// agents/kubelet/api_podproxy.go). As upstream's proxy handler: a GET or HEAD of the proxy's root without its
// slash is redirected to it; the pod's absolute links in HTML and its redirects are rewritten below the proxy's
// prefix; its CORS headers are dropped (a pod must not open the API's origin to other sites); a pod that cannot
// be reached is a 503.
func (a *API) connectPod(w http.ResponseWriter, r *http.Request, req kubeapi.ConnectRequest) error {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("agentapi: proxy to a %T", req.Object)
	}
	addr, ok := podAddr(pod)
	if !ok {
		return apierrors.NewBadRequest("address not allowed")
	}
	if pod.Spec.NodeName == "" {
		return noHost(pod)
	}
	if req.Path == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		loc := r.URL.EscapedPath() + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusMovedPermanently)
		return nil
	}
	if peer, ok := a.tunnelPeer(r, req.Cluster, pod.Spec.NodeName); ok {
		return a.forward(w, r, peer, pod.Spec.NodeName)
	}
	return a.proxyPod(w, r, req.Cluster, pod, addr, req)
}

// podAddr is the pod's primary address when the proxy may go there: a global unicast address (upstream's rule:
// never the loopback, link-local or unspecified address a forged status could name).
func podAddr(pod *corev1.Pod) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || addr.Zone() != "" || !addr.IsGlobalUnicast() {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// agentRefusal is an answer the agent's pod proxy gave itself (ProxyErrorHeader).
type agentRefusal struct{ reason string }

func (e *agentRefusal) Error() string { return e.reason }

// proxyPod reverse-proxies r to the pod through its node's agent, streaming both ways.
func (a *API) proxyPod(w http.ResponseWriter, r *http.Request, cluster string, pod *corev1.Pod, addr netip.Addr,
	req kubeapi.ConnectRequest) error {
	t, node := req.Proxy, pod.Spec.NodeName
	target := req.Path
	if target == "" {
		target = "/"
	}
	agentPath := "/podProxy/" + pod.Namespace + "/" + pod.Name + "/" + string(pod.UID) + "/" + t.Scheme + "/" +
		addr.String() + "/" + strconv.Itoa(int(t.Port)) + target
	forwardedURI := path.Join(t.Prefix, req.Path)
	if strings.HasSuffix(req.Path, "/") {
		forwardedURI += "/"
	}
	links := newLinkRewriter(t.Prefix, r.Host, t.Scheme, addr, t.Port)
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: "kubelet", Path: agentPath, RawQuery: pr.In.URL.RawQuery}
			// The pod sees the Host the client asked for (upstream's proxy keeps it), and where the request came from.
			pr.Out.Host = pr.In.Host
			stripCredentials(pr.Out.Header)
			pr.Out.Header.Del(ForwardedHeader)
			pr.Out.Header.Set("X-Forwarded-For", clientAddr(pr.In))
			pr.Out.Header.Set("X-Forwarded-Uri", forwardedURI)
		},
		ModifyResponse: func(resp *http.Response) error {
			if reason := resp.Header.Get(ProxyErrorHeader); reason != "" {
				return &agentRefusal{reason: reason}
			}
			for _, h := range []string{"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
				"Access-Control-Allow-Methods", "Access-Control-Allow-Origin"} {
				resp.Header.Del(h)
			}
			links.response(resp)
			return nil
		},
		Transport:     a.cfg.Tunnels.Transport(cluster, node),
		FlushInterval: -1,
		ErrorHandler:  func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	defer func() {
		// A streamed answer that breaks off (either side went away) can only end.
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	rp.ServeHTTP(w, r)
	var refusal *agentRefusal
	switch {
	case proxyErr == nil:
		return nil
	case errors.Is(proxyErr, tunnel.ErrNotConnected):
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's agent is not connected", node))
	case errors.As(proxyErr, &refusal):
		return apierrors.NewServiceUnavailable("error trying to reach service: " + refusal.reason)
	case r.Context().Err() != nil:
		return r.Context().Err()
	}
	a.log.WarnContext(r.Context(), "proxying to a pod through its node's agent failed", "cluster", cluster,
		"node", node, "pod", pod.Namespace+"/"+pod.Name, "err", proxyErr)
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the connection to node %s's agent failed", node))
}

// clientAddr is the address the request came from (behind trusted proxies, the one they forwarded).
func clientAddr(r *http.Request) string {
	if ip := clientip.Of(r); ip != "" {
		return ip
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
