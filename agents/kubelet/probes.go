package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// probes runs a pod's startup, liveness and readiness probes, one goroutine per (container instance, kind),
// with upstream's timing: initialDelaySeconds, then every periodSeconds, each try bounded by timeoutSeconds; a
// result flips after failureThreshold failures or successThreshold successes in a row. Liveness and readiness
// wait for the startup probe to succeed. Results are read by the worker at its next sync; a flip pokes it.
type probes struct {
	w *worker

	mu      sync.Mutex // guards runners
	runners map[probeKey]*prober
}

type probeKind string

const (
	startupProbe   probeKind = "Startup"
	livenessProbe  probeKind = "Liveness"
	readinessProbe probeKind = "Readiness"
)

type probeKey struct {
	container string
	kind      probeKind
}

// prober is one probe loop of one container instance.
type prober struct {
	id     string // the container instance probed
	cancel context.CancelFunc

	mu      sync.Mutex // guards ok
	ok      bool       // the current result
	decided bool       // a result has been reached (liveness: failure only counts once decided)
}

func (pr *prober) result() (ok, decided bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.ok, pr.decided
}

func newProbes(w *worker) *probes { return &probes{w: w, runners: map[probeKey]*prober{}} }

// sync starts probers for running container instances that have probes and stops those of instances gone.
func (ps *probes) sync(pod *corev1.Pod, ob observed) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	live := map[probeKey]bool{}
	for _, c := range allContainers(pod) {
		cur := ob.containers[c.Name].latest()
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		for kind, p := range map[probeKind]*corev1.Probe{startupProbe: c.StartupProbe, livenessProbe: c.LivenessProbe, readinessProbe: c.ReadinessProbe} {
			if p == nil {
				continue
			}
			k := probeKey{c.Name, kind}
			live[k] = true
			if r, ok := ps.runners[k]; ok && r.id == cur.Id {
				continue
			} else if ok {
				r.cancel()
			}
			ctx, cancel := context.WithCancel(context.Background())
			r := &prober{id: cur.Id, cancel: cancel, ok: kind == livenessProbe}
			ps.runners[k] = r
			go ps.run(ctx, pod, c, kind, p, r, ob.podIP)
		}
	}
	for k, r := range ps.runners {
		if !live[k] {
			r.cancel()
			delete(ps.runners, k)
		}
	}
}

func (ps *probes) stopAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, r := range ps.runners {
		r.cancel()
		delete(ps.runners, k)
	}
}

// results maps container names to the current result of a kind of probe (absent: no such probe).
func (ps *probes) results(kind probeKind) map[string]bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[string]bool{}
	for k, r := range ps.runners {
		if k.kind == kind {
			out[k.container], _ = r.result()
		}
	}
	return out
}

func (ps *probes) readiness() map[string]bool { return ps.results(readinessProbe) }
func (ps *probes) startup() map[string]bool   { return ps.results(startupProbe) }

// livenessFailed reports whether the container instance's liveness probe has failed.
func (ps *probes) livenessFailed(container, id string) bool {
	ps.mu.Lock()
	r, ok := ps.runners[probeKey{container, livenessProbe}]
	ps.mu.Unlock()
	if !ok || r.id != id {
		return false
	}
	res, decided := r.result()
	return decided && !res
}

// started reports whether the container's startup probe (if any) has succeeded.
func (ps *probes) started(container string) bool {
	ps.mu.Lock()
	r, ok := ps.runners[probeKey{container, startupProbe}]
	ps.mu.Unlock()
	if !ok {
		return true
	}
	res, _ := r.result()
	return res
}

func (ps *probes) run(ctx context.Context, pod *corev1.Pod, c *corev1.Container, kind probeKind, p *corev1.Probe, r *prober, podIP string) {
	clk := ps.w.p.cfg.Clock
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	failureThreshold, successThreshold := max(p.FailureThreshold, 1), max(p.SuccessThreshold, 1)
	if p.InitialDelaySeconds > 0 {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(time.Duration(p.InitialDelaySeconds) * time.Second):
		}
	}
	t := clk.NewTicker(period)
	defer t.Stop()
	var fails, successes int32
	for {
		if kind == startupProbe || ps.started(c.Name) {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			out, err := ps.w.probe(pctx, pod, c, r.id, &p.ProbeHandler, podIP)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				fails, successes = 0, successes+1
			} else {
				fails, successes = fails+1, 0
				ps.w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, strings.TrimSpace(out+" "+err.Error()))
			}
			r.mu.Lock()
			changed := false
			switch {
			case successes >= successThreshold && (!r.ok || !r.decided):
				r.ok, r.decided, changed = true, true, true
			case fails >= failureThreshold && (r.ok || !r.decided):
				r.ok, r.decided, changed = false, true, true
			}
			r.mu.Unlock()
			if changed {
				ps.w.poke()
			}
			if kind == startupProbe && successes >= successThreshold {
				return // a startup probe stops once it succeeded
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// probe runs one try of a probe handler; out is what an exec probe printed.
func (w *worker) probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, h *corev1.ProbeHandler, podIP string) (string, error) {
	switch {
	case w.p.cfg.HandlersSucceed:
		return "", nil
	case h.Exec != nil:
		timeout := time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		stdout, stderr, err := w.p.cfg.Runtime.ExecSync(ctx, id, h.Exec.Command, timeout)
		return strings.TrimSpace(string(stdout) + string(stderr)), err
	case h.HTTPGet != nil:
		return "", httpGet(ctx, c, h.HTTPGet, podIP)
	case h.TCPSocket != nil:
		port, err := resolvePort(h.TCPSocket.Port, c)
		if err != nil {
			return "", err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return "", err
		}
		return "", conn.Close()
	case h.GRPC != nil:
		return "", grpcHealth(ctx, podIP, h.GRPC)
	}
	return "", errors.New("the probe has no handler")
}

// runHandler runs a lifecycle hook (exec, httpGet or sleep).
func (w *worker) runHandler(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, h *corev1.LifecycleHandler) error {
	switch {
	case w.p.cfg.HandlersSucceed:
		return nil
	case h.Exec != nil:
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		_, _, err := w.p.cfg.Runtime.ExecSync(ctx, id, h.Exec.Command, timeout)
		return err
	case h.HTTPGet != nil:
		ob, _ := w.observe(ctx, pod)
		return httpGet(ctx, c, h.HTTPGet, ob.podIP)
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.p.cfg.Clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		}
	}
	return errors.New("the lifecycle hook has no handler")
}

// resolvePort turns a port number or a container port name into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

// httpGet is an HTTP probe: a status from 200 to 399 succeeds (redirects to other hosts are not followed).
func httpGet(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction, podIP string) error {
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if path, query, ok := strings.Cut(g.Path, "?"); ok {
		u.Path, u.RawQuery = path, query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/wheelhouse")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
		} else {
			req.Header.Add(h.Name, h.Value)
		}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, // as kubelet: probes skip verification
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if r.URL.Hostname() != host {
				return http.ErrUseLastResponse
			}
			return nil
		}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

func grpcHealth(ctx context.Context, podIP string, g *corev1.GRPCAction) error {
	conn, err := grpc.NewClient(net.JoinHostPort(podIP, strconv.Itoa(int(g.Port))), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return nil
}
