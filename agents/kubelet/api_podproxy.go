package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The pod proxy: the server's pods/proxy and services/proxy (server/agentapi) reach a pod's port through the
// node's tunnel and this endpoint, which dials the pod from the node, since the server has no route to pods.
//
//	GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS /podProxy/{namespace}/{pod}/{uid}/{scheme}/{ip}/{port}/{path...}
//
// forwards the request to scheme://ip:port/path with the caller's query, body and headers, and streams the
// pod's answer back (upgrades included). It only dials an address of the pod named, one of this node's pods
// (the sandbox's addresses as the runtime reports them; the node's address for a pod on the host's network),
// and only the port named: a caller cannot use it to reach anything else on the node's network. https is TLS
// without verifying the pod's certificate, as upstream's API server does.
//
// The agent's own refusals and failures (no such pod, an address that is not the pod's, a pod that does not
// answer) carry ProxyErrorHeader with the reason, so the server can tell them from the pod's own answers; a
// pod's answer never carries it.

// ProxyErrorHeader marks an answer of the pod proxy as the agent's own, with the reason as its value.
const ProxyErrorHeader = "X-Wheelhouse-Proxy-Error"

const podProxyPattern = "/podProxy/{namespace}/{pod}/{uid}/{scheme}/{ip}/{port}/{path...}"

// proxyMethods are the methods pods/proxy serves (upstream's).
var proxyMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

// Timeouts of the pod proxy's connections, upstream's API server's: a pod that does not accept or finish a TLS
// handshake in time is an error; an answer may take as long as the caller waits (long polls, streams), and the
// caller going away ends it.
const (
	podDialTimeout      = 30 * time.Second
	podTLSTimeout       = 10 * time.Second
	podIdleConnsTimeout = 30 * time.Second
)

// newPodTransport is the transport to pods: no proxy from the environment, compression left to the two ends,
// certificates not verified (a pod's is for its clients, not for the node).
func newPodTransport() *http.Transport {
	d := &net.Dialer{Timeout: podDialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSHandshakeTimeout: podTLSTimeout,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     podIdleConnsTimeout,
	}
}

// podTarget is where one pod proxy request goes.
type podTarget struct {
	namespace, name string
	uid             types.UID
	scheme          string
	addr            netip.Addr
	port            int
	path            string // absolute, clean, with the caller's trailing slash
}

func (a *api) podProxy(w http.ResponseWriter, r *http.Request) {
	if err := a.servePodProxy(w, r); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			a.log.WarnContext(r.Context(), "pod proxy request failed", "path", r.URL.Path, "err", err)
			ae = &apiError{code: http.StatusInternalServerError, msg: "internal error"}
		}
		w.Header().Set(ProxyErrorHeader, headerSafe(ae.msg))
		a.writeError(w, r, ae)
	}
}

func (a *api) servePodProxy(w http.ResponseWriter, r *http.Request) error {
	if !slices.Contains(proxyMethods, r.Method) {
		return errorf(http.StatusMethodNotAllowed, "method %s is not proxied", r.Method)
	}
	t, err := parsePodTarget(r)
	if err != nil {
		return err
	}
	ref, err := a.findPod(r.Context(), t.namespace, t.name, t.uid)
	if err != nil {
		return err
	}
	addrs, err := a.podAddrs(r.Context(), ref)
	if err != nil {
		return err
	}
	if !slices.Contains(addrs, t.addr) {
		return errorf(http.StatusForbidden, "%s is not an address of pod %q", t.addr, t.name)
	}
	return a.proxyToPod(w, r, t)
}

// parsePodTarget reads the target from the request's path.
func parsePodTarget(r *http.Request) (podTarget, error) {
	t := podTarget{namespace: r.PathValue("namespace"), name: r.PathValue("pod"), uid: types.UID(r.PathValue("uid")),
		scheme: r.PathValue("scheme")}
	if t.scheme != "http" && t.scheme != "https" {
		return t, errorf(http.StatusBadRequest, "scheme %q is not http or https", t.scheme)
	}
	addr, err := netip.ParseAddr(r.PathValue("ip"))
	if err != nil || addr.Zone() != "" {
		return t, errorf(http.StatusBadRequest, "%q is not an IP address", r.PathValue("ip"))
	}
	t.addr = addr.Unmap()
	port, err := strconv.ParseUint(r.PathValue("port"), 10, 16)
	if err != nil || port == 0 {
		return t, errorf(http.StatusBadRequest, "port %q is not a valid port number", r.PathValue("port"))
	}
	t.port = int(port)
	rest := r.PathValue("path")
	t.path = path.Clean("/" + rest)
	if strings.HasSuffix(rest, "/") && !strings.HasSuffix(t.path, "/") {
		t.path += "/"
	}
	return t, nil
}

// podAddrs are the addresses the pod can be reached at: those of its ready sandbox as the runtime reports them,
// and the node's when the pod shares the host's network.
func (a *api) podAddrs(ctx context.Context, ref podRef) ([]netip.Addr, error) {
	sb, err := a.readySandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	st, err := a.rt.PodSandboxStatus(ctx, sb.Id, false)
	if err != nil {
		return nil, a.runtimeError(ctx, err, "pod "+strconv.Quote(ref.name))
	}
	var ips []string
	if n := st.GetStatus().GetNetwork(); n != nil {
		ips = append(ips, n.Ip)
		for _, ip := range n.AdditionalIps {
			ips = append(ips, ip.GetIp())
		}
	}
	hostNetwork := st.GetStatus().GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNetwork || (ref.pod != nil && ref.pod.Spec.HostNetwork) {
		ips = append(ips, a.p.cfg.NodeIP())
	}
	var out []netip.Addr
	for _, ip := range ips {
		if addr, err := netip.ParseAddr(ip); err == nil && addr.Zone() == "" {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// proxyToPod forwards r to t and streams the answer back. The caller's X-Forwarded-* headers (which the
// server sets) pass; hop-by-hop headers do not (ReverseProxy); the pod's answer cannot pose as the agent's.
func (a *api) proxyToPod(w http.ResponseWriter, r *http.Request, t podTarget) error {
	host := net.JoinHostPort(t.addr.String(), strconv.Itoa(t.port))
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: t.scheme, Host: host, Path: t.path, RawQuery: pr.In.URL.RawQuery}
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					pr.Out.Header[h] = slices.Clone(v)
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del(ProxyErrorHeader)
			return nil
		},
		Transport:     a.podTransport,
		FlushInterval: -1, // streams (logs, events) reach the caller as they come
		ErrorHandler:  func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
	if proxyErr == nil || r.Context().Err() != nil {
		return nil
	}
	return errorf(http.StatusBadGateway, "%s", proxyErr.Error())
}

// headerSafe makes msg a header value: control characters (a line break would end the header) become spaces.
func headerSafe(msg string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}
