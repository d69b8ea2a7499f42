package agentapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/server/agentapi"
)

// fakeKubelet serves the kubelet API paths the proxy uses, with the upstream streaming server's exec, attach
// and port-forward handlers (SPDY and websocket) over fake containers, and records what reached it.
type fakeKubelet struct {
	name   string          // "<cluster>/<node>", in every answer
	follow chan string     // further log lines for a following reader
	mu     sync.Mutex      // guards seen and pods
	seen   []*http.Request // requests received (URL and headers)
	// pods are the test servers standing for the pods' ports this kubelet runs, by pod "ip:port".
	pods map[string]string
	mux  *http.ServeMux
}

func newFakeKubelet(name string) *fakeKubelet {
	k := &fakeKubelet{name: name, follow: make(chan string), pods: map[string]string{}}
	k.mux = http.NewServeMux()
	k.mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.logs)
	k.mux.HandleFunc("/exec/{ns}/{pod}/{container}", k.exec)
	k.mux.HandleFunc("/attach/{ns}/{pod}/{container}", k.attach)
	k.mux.HandleFunc("/portForward/{ns}/{pod}", k.portForward)
	k.mux.HandleFunc("/podProxy/{ns}/{pod}/{uid}/{scheme}/{ip}/{port}/{path...}", k.podProxy)
	k.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proxy %s %s %s?%s", k.name, r.Method, r.URL.Path, r.URL.RawQuery)
	})
	return k
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.seen = append(k.seen, r.Clone(context.Background()))
	k.mu.Unlock()
	k.mux.ServeHTTP(w, r)
}

// last is the last request the kubelet received.
func (k *fakeKubelet) last() *http.Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.seen) == 0 {
		return nil
	}
	return k.seen[len(k.seen)-1]
}

// servePod makes the test server at host serve the pod port ip:port.
func (k *fakeKubelet) servePod(ipPort, host string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[ipPort] = host
}

// podProxy stands for the agent's pod proxy (agents/kubelet/api_podproxy.go, whose own tests dial real pods):
// it forwards the request to the test server serving the pod's ip:port, or refuses as the agent does.
func (k *fakeKubelet) podProxy(w http.ResponseWriter, r *http.Request) {
	ipPort := net.JoinHostPort(r.PathValue("ip"), r.PathValue("port"))
	k.mu.Lock()
	host, ok := k.pods[ipPort]
	k.mu.Unlock()
	if !ok {
		msg := "dial tcp " + ipPort + ": connect: connection refused"
		w.Header().Set(agentapi.ProxyErrorHeader, msg)
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: host, Path: "/" + r.PathValue("path"), RawQuery: pr.In.URL.RawQuery}
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				pr.Out.Header[h] = pr.In.Header[h]
			}
		},
		FlushInterval: -1,
	}
	rp.ServeHTTP(w, r)
}

func (k *fakeKubelet) logs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	who := r.PathValue("ns") + "/" + r.PathValue("pod") + "/" + r.PathValue("container")
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(w, "%s %s line %d\n", k.name, who, i)
	}
	if r.URL.Query().Get("follow") != "true" {
		return
	}
	http.NewResponseController(w).Flush()
	for {
		select {
		case l := <-k.follow:
			fmt.Fprintln(w, l)
			http.NewResponseController(w).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (k *fakeKubelet) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, r, k, r.PathValue("pod"), "", r.PathValue("container"), r.URL.Query()["command"], opts,
		time.Minute, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (k *fakeKubelet) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeAttach(w, r, k, r.PathValue("pod"), "", r.PathValue("container"), opts, time.Minute,
		30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (k *fakeKubelet) portForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, k, r.PathValue("pod"), "", opts, time.Minute, 30*time.Second,
		portforward.SupportedProtocols)
}

// ExecInContainer runs the fake commands: cat (stdin to stdout), echo, whoami, fail (exit code 3).
func (k *fakeKubelet) ExecInContainer(_ context.Context, pod, _, container string, cmd []string, in io.Reader,
	out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	switch cmd[0] {
	case "cat":
		_, err := io.Copy(out, in)
		return err
	case "echo":
		_, err := io.WriteString(out, strings.Join(cmd[1:], " ")+"\n")
		return err
	case "whoami":
		_, err := fmt.Fprintf(out, "%s %s/%s\n", k.name, pod, container)
		return err
	case "fail":
		return utilexec.CodeExitError{Err: errors.New("command failed"), Code: 3}
	}
	return fmt.Errorf("%s: command not found", cmd[0])
}

// AttachContainer greets, then echoes stdin until it ends.
func (k *fakeKubelet) AttachContainer(_ context.Context, _, _, container string, in io.Reader, out, _ io.WriteCloser,
	_ bool, _ <-chan remotecommand.TerminalSize) error {
	if _, err := fmt.Fprintf(out, "attached %s\n", container); err != nil {
		return err
	}
	_, err := io.Copy(out, in)
	return err
}

// PortForward answers each line sent to port with "<port>:<line>".
func (k *fakeKubelet) PortForward(_ context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	br := bufio.NewReader(stream)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil
		}
		if _, err := fmt.Fprintf(stream, "%d:%s", port, line); err != nil {
			return err
		}
	}
}
