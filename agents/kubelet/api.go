package kubelet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// APIHandler returns the kubelet's HTTP API, with kubelet's paths and semantics:
//
//	GET  /healthz                                          "ok"
//	GET  /containerLogs/{namespace}/{pod}/{container}      the container's log (api_logs.go)
//	GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}   ?command=…&input=1&output=1&error=1&tty=1
//	GET|POST /attach/{namespace}/{pod}[/{uid}]/{container} the same without command
//	GET|POST /portForward/{namespace}/{pod}[/{uid}]        ?port=… (websocket; SPDY names ports per stream)
//	GET  /stats/summary                                    the Summary API: node, pod and container usage (api_stats.go)
//	*    /podProxy/{namespace}/{pod}/{uid}/{scheme}/{ip}/{port}/{path...}
//	                                                       the request to the pod's ip:port, for pods/proxy and
//	                                                       services/proxy (api_podproxy.go)
//
// Exec, attach and port-forward ask the runtime for a URL of its streaming server and reverse-proxy the request
// there, upgrade included (SPDY/3.1 or websocket channel protocols pass through untouched). The stream flags
// are read under kubelet's names (input, output, error, tty: what the API server sends) and under kubectl's
// (stdin, stdout, stderr), as booleans ("1", "true").
//
// The handler does no authentication or authorization: the agent serves it only through its tunnel, on which
// the API server has already authorized the caller. Errors are plain text, as kubelet's: 404 for a pod or
// container that is not on this node, 400 for a bad query or a container in the wrong state, 501 for what the
// runtime does not support, 500 when the runtime fails (with the runtime's message), 502 when its streaming
// server cannot be reached.
//
// A pod is looked up among the pods this node's workers run; a pod only the runtime knows (the agent has just
// restarted, or the pod is being torn down) is found by its sandboxes' labels.
func (p *Pods) APIHandler() http.Handler {
	a := &api{p: p, rt: p.cfg.Runtime, log: p.log, podTransport: newPodTransport()}
	a.transport = streamTransport(p.cfg.Runtime)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	mux.HandleFunc("GET /stats/summary", a.statsSummary)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", a.exec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", a.exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", a.attach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", a.attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", a.portForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", a.portForward)
	}
	mux.HandleFunc(podProxyPattern, a.podProxy)
	return mux
}

// api serves APIHandler's requests.
type api struct {
	p         *Pods
	rt        runtime.Runtime
	log       *slog.Logger
	transport http.RoundTripper // to the runtime's streaming server
	// podTransport dials pods for the pod proxy (api_podproxy.go).
	podTransport http.RoundTripper
}

// apiError is an answer other than 200: an HTTP status and a plain-text message for the caller.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// writeError answers err: an apiError as it says, anything else as a 500 that does not show it.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		a.log.WarnContext(r.Context(), "kubelet API request failed", "path", r.URL.Path, "err", err)
		ae = &apiError{code: http.StatusInternalServerError, msg: "internal error"}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ae.code)
	_, _ = w.Write([]byte(ae.msg))
}

// runtimeError turns a runtime's error about what into an apiError by its gRPC code; other failures are a
// 500 with the runtime's message (without the gRPC decoration).
func (a *api) runtimeError(ctx context.Context, err error, what string) error {
	msg := status.Convert(err).Message()
	switch status.Code(err) {
	case codes.NotFound:
		return errorf(http.StatusNotFound, "%s: %s", what, msg)
	case codes.InvalidArgument, codes.FailedPrecondition:
		return errorf(http.StatusBadRequest, "%s: %s", what, msg)
	case codes.Unimplemented:
		return errorf(http.StatusNotImplemented, "%s: %s", what, msg)
	}
	a.log.WarnContext(ctx, "the runtime failed a kubelet API request", "what", what, "err", err)
	return errorf(http.StatusInternalServerError, "%s: the container runtime failed: %s", what, msg)
}

// podRef is a pod of this node as the API found it.
type podRef struct {
	namespace, name string
	uid             types.UID
	pod             *corev1.Pod // spec and status; nil when only the runtime knows the pod
}

// findPod finds the pod namespace/name (of that UID unless uid is empty) among the workers' pods, else among
// the runtime's sandboxes.
func (a *api) findPod(ctx context.Context, namespace, name string, uid types.UID) (podRef, error) {
	if pod := a.p.podByName(namespace, name); pod != nil && (uid == "" || pod.UID == uid) {
		return podRef{namespace: namespace, name: name, uid: pod.UID, pod: pod}, nil
	}
	sel := map[string]string{labelPodNamespace: namespace, labelPodName: name}
	if uid != "" {
		sel[labelPodUID] = string(uid)
	}
	sbs, err := a.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return podRef{}, a.runtimeError(ctx, err, fmt.Sprintf("pod %q", name))
	}
	if len(sbs) == 0 {
		return podRef{}, errorf(http.StatusNotFound, "pod %q does not exist", name)
	}
	newest := slices.MaxFunc(sbs, func(x, y *runtimeapi.PodSandbox) int { return cmp.Compare(x.CreatedAt, y.CreatedAt) })
	return podRef{namespace: namespace, name: name, uid: types.UID(newest.Labels[labelPodUID])}, nil
}

// podByName is the pod namespace/name among those the workers run (the newest, when a deleted pod and its
// replacement of the same name are both still there), or nil. Lock order: p.mu, then a worker's mu, as in
// update.
func (p *Pods) podByName(namespace, name string) *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var found *corev1.Pod
	for _, w := range p.workers {
		w.mu.Lock()
		pod, removed := w.pod, w.removed
		w.mu.Unlock()
		if removed || pod == nil || pod.Namespace != namespace || pod.Name != name {
			continue
		}
		if found == nil || found.CreationTimestamp.Before(&pod.CreationTimestamp) {
			found = pod
		}
	}
	return found
}

// containerInstances returns the runtime's instances of one of ref's containers, newest first; 404 when the
// pod has no such container.
func (a *api) containerInstances(ctx context.Context, ref podRef, container string) (instances, error) {
	if ref.pod != nil && !hasContainer(ref.pod, container) {
		return nil, errorf(http.StatusNotFound, "container %q not found in pod %q", container, ref.name)
	}
	list, err := a.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		labelPodUID: string(ref.uid), labelContainerName: container}})
	if err != nil {
		return nil, a.runtimeError(ctx, err, fmt.Sprintf("container %q in pod %q", container, ref.name))
	}
	var in instances
	for _, c := range list {
		if st, err := a.rt.ContainerStatus(ctx, c.Id, false); err == nil {
			in = append(in, st.Status)
		}
	}
	slices.SortFunc(in, func(x, y *runtimeapi.ContainerStatus) int {
		return cmp.Or(cmp.Compare(y.Metadata.GetAttempt(), x.Metadata.GetAttempt()), cmp.Compare(y.CreatedAt, x.CreatedAt))
	})
	if ref.pod == nil && len(in) == 0 {
		return nil, errorf(http.StatusNotFound, "container %q not found in pod %q", container, ref.name)
	}
	return in, nil
}

// hasContainer reports whether the pod has a container, init container or ephemeral container named name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return true
		}
	}
	return slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == name })
}

// runningContainer is the running instance of a container, for exec and attach.
func (a *api) runningContainer(r *http.Request) (podRef, *runtimeapi.ContainerStatus, error) {
	ref, err := a.findPod(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		return ref, nil, err
	}
	name := r.PathValue("container")
	in, err := a.containerInstances(r.Context(), ref, name)
	if err != nil {
		return ref, nil, err
	}
	cur := in.latest()
	if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return ref, nil, errorf(http.StatusBadRequest, "container %q in pod %q is not running", name, ref.name)
	}
	return ref, cur, nil
}

// streamFlags are the stdio flags of an exec or attach.
type streamFlags struct{ stdin, stdout, stderr, tty bool }

// parseStreamFlags reads the flags as kubelet does: at least one stream; no separate stderr with a tty.
func parseStreamFlags(q url.Values) (streamFlags, error) {
	var f streamFlags
	for _, p := range []struct {
		dst   *bool
		names []string
	}{{&f.stdin, []string{"input", "stdin"}}, {&f.stdout, []string{"output", "stdout"}},
		{&f.stderr, []string{"error", "stderr"}}, {&f.tty, []string{"tty"}}} {
		for _, n := range p.names {
			if v := q.Get(n); v != "" {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return f, errorf(http.StatusBadRequest, "%s: %q is not a boolean", n, v)
				}
				*p.dst = *p.dst || b
			}
		}
	}
	if f.tty {
		f.stderr = false // a terminal merges stderr into stdout
	}
	if !f.stdin && !f.stdout && !f.stderr {
		return f, errorf(http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr")
	}
	return f, nil
}

func (a *api) exec(w http.ResponseWriter, r *http.Request) {
	if err := a.serveExec(w, r); err != nil {
		a.writeError(w, r, err)
	}
}

func (a *api) serveExec(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	flags, err := parseStreamFlags(q)
	if err != nil {
		return err
	}
	cmd := q["command"]
	if len(cmd) == 0 {
		return errorf(http.StatusBadRequest, "you must specify at least one command for the container")
	}
	ref, c, err := a.runningContainer(r)
	if err != nil {
		return err
	}
	resp, err := a.rt.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: c.Id, Cmd: cmd,
		Stdin: flags.stdin, Stdout: flags.stdout, Stderr: flags.stderr, Tty: flags.tty})
	if err != nil {
		return a.runtimeError(r.Context(), err, fmt.Sprintf("exec in container %q of pod %q", r.PathValue("container"), ref.name))
	}
	return a.proxy(w, r, resp.Url)
}

func (a *api) attach(w http.ResponseWriter, r *http.Request) {
	if err := a.serveAttach(w, r); err != nil {
		a.writeError(w, r, err)
	}
}

func (a *api) serveAttach(w http.ResponseWriter, r *http.Request) error {
	flags, err := parseStreamFlags(r.URL.Query())
	if err != nil {
		return err
	}
	ref, c, err := a.runningContainer(r)
	if err != nil {
		return err
	}
	resp, err := a.rt.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: c.Id,
		Stdin: flags.stdin, Stdout: flags.stdout, Stderr: flags.stderr, Tty: flags.tty})
	if err != nil {
		return a.runtimeError(r.Context(), err, fmt.Sprintf("attach to container %q of pod %q", r.PathValue("container"), ref.name))
	}
	return a.proxy(w, r, resp.Url)
}

func (a *api) portForward(w http.ResponseWriter, r *http.Request) {
	if err := a.servePortForward(w, r); err != nil {
		a.writeError(w, r, err)
	}
}

func (a *api) servePortForward(w http.ResponseWriter, r *http.Request) error {
	ports, err := parsePorts(r.URL.Query()["port"])
	if err != nil {
		return err
	}
	ref, err := a.findPod(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		return err
	}
	sb, err := a.readySandbox(r.Context(), ref)
	if err != nil {
		return err
	}
	resp, err := a.rt.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sb.Id, Port: ports})
	if err != nil {
		return a.runtimeError(r.Context(), err, fmt.Sprintf("port-forward to pod %q", ref.name))
	}
	return a.proxy(w, r, resp.Url)
}

// readySandbox is the pod's ready sandbox (its newest attempt); 400 when it has none, as the pod is not running.
func (a *api) readySandbox(ctx context.Context, ref podRef) (*runtimeapi.PodSandbox, error) {
	sbs, err := a.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: string(ref.uid)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, a.runtimeError(ctx, err, fmt.Sprintf("pod %q", ref.name))
	}
	if len(sbs) == 0 {
		return nil, errorf(http.StatusBadRequest, "pod %q is not running", ref.name)
	}
	return slices.MaxFunc(sbs, func(x, y *runtimeapi.PodSandbox) int {
		return cmp.Compare(x.Metadata.GetAttempt(), y.Metadata.GetAttempt())
	}), nil
}

// parsePorts reads port parameters ("8080", "8080,9090", repeated).
func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
			if err != nil || n == 0 {
				return nil, errorf(http.StatusBadRequest, "port %q is not a valid port number", s)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}

// proxy reverse-proxies r to the runtime's streaming URL, upgrades included. Errors before anything reached
// the client are returned; once the connection is upgraded, its end is the stream's end.
func (a *api) proxy(w http.ResponseWriter, r *http.Request, streamURL string) error {
	u, err := url.Parse(streamURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("kubelet: the runtime returned the streaming URL %q: %w", streamURL, err)
	}
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
			pr.Out.Host = u.Host
		},
		Transport:     a.transport,
		FlushInterval: -1,
		ErrorHandler:  func(_ http.ResponseWriter, _ *http.Request, err error) { proxyErr = err },
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
	if proxyErr != nil && r.Context().Err() == nil {
		a.log.WarnContext(r.Context(), "proxying to the runtime's streaming server failed", "path", r.URL.Path, "err", proxyErr)
		return errorf(http.StatusBadGateway, "the container runtime's streaming server could not be reached")
	}
	return nil
}

// streamAddresser is a runtime that tells where its streaming server listens (the process runtime): a unix
// socket's URLs name no dialable host.
type streamAddresser interface {
	StreamAddr() net.Addr
}

// streamTransport is the transport to rt's streaming server.
func streamTransport(rt runtime.Runtime) http.RoundTripper {
	t := &http.Transport{DisableCompression: true} // no proxy from the environment: the server is local
	if sa, ok := rt.(streamAddresser); ok {
		if addr := sa.StreamAddr(); addr != nil && addr.Network() == "unix" {
			var d net.Dialer
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", addr.String())
			}
		}
	}
	return t
}
