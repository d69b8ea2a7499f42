package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// init lets the test binary serve as the "serve" container program (WH_TEST_PROGRAM=serve <port>: print
// "listening", then answer each connection's first line with "echo <line>"); it serves as the process
// runtime's helpers through the shim package's init. It is init rather than TestMain (node_test.go has that).
func init() {
	if os.Getenv("WH_TEST_PROGRAM") == "serve" && len(os.Args) > 1 {
		os.Exit(serveProgram(os.Args[1]))
	}
}

func serveProgram(port string) int {
	l, err := net.Listen("tcp4", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "echo %s", line)
		}()
	}
}

// apiFixture serves the API of a pod manager that is not running: the test puts sandboxes and containers in
// the fake runtime itself, and hands pods to workers with adopt.
type apiFixture struct {
	t         *testing.T
	p         *Pods
	rt        *fake.Runtime
	srv       *httptest.Server
	sandboxes map[types.UID]string
}

func newAPIFixture(t *testing.T) *apiFixture {
	rt := fake.New()
	p, err := NewPods(nil, PodsConfig{NodeName: "n1", Runtime: rt, DataDir: t.TempDir(), NodeIP: func() string { return "10.0.0.5" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.APIHandler())
	t.Cleanup(srv.Close)
	return &apiFixture{t: t, p: p, rt: rt, srv: srv, sandboxes: map[types.UID]string{}}
}

func testPod(name string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "busybox", Command: []string{"sleep", "300"}})
	}
	return pod
}

// run creates an instance of the pod's container in the runtime (and the pod's sandbox first), as a worker
// would, and brings it to state.
func (f *apiFixture) run(pod *corev1.Pod, name string, attempt uint32, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	f.t.Helper()
	ctx := f.t.Context()
	sbc := sandboxConfig(pod, 0, f.p.logDir())
	sb, ok := f.sandboxes[pod.UID]
	if !ok {
		sb = must(f.rt.RunPodSandbox(ctx, sbc, ""))(f.t)
		f.sandboxes[pod.UID] = sb
	}
	var spec *corev1.Container
	for _, c := range slices.Concat(allContainers(pod), ephemeralContainerSpecs(pod)) {
		if c.Name == name {
			spec = c
		}
	}
	id := must(f.rt.CreateContainer(ctx, sb, containerConfig(pod, spec, attempt, nil, nil), sbc))(f.t)
	if state != runtimeapi.ContainerState_CONTAINER_CREATED {
		if err := f.rt.StartContainer(ctx, id); err != nil {
			f.t.Fatal(err)
		}
	}
	if state == runtimeapi.ContainerState_CONTAINER_EXITED {
		if err := f.rt.Exit(id, 0, "", ""); err != nil {
			f.t.Fatal(err)
		}
	}
	return must(f.rt.ContainerStatus(ctx, id, false))(f.t).Status
}

// adopt makes pod one a worker runs (its goroutine is not started).
func (f *apiFixture) adopt(pod *corev1.Pod) {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	w, ok := f.p.workers[pod.UID]
	if !ok {
		w = newWorker(f.p, pod.UID)
		f.p.workers[pod.UID] = w
	}
	w.set(pod)
}

func (f *apiFixture) get(path string) (int, string) {
	f.t.Helper()
	return httpDo(f.t, http.MethodGet, f.srv.URL+path)
}

func (f *apiFixture) expect(path string, code int, body string) {
	f.t.Helper()
	if gotCode, gotBody := f.get(path); gotCode != code || gotBody != body {
		f.t.Errorf("GET %s: %d %q, want %d %q", path, gotCode, gotBody, code, body)
	}
}

func httpDo(t *testing.T, method, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func urlQuery(s string) (url.Values, error) { return url.ParseQuery(s) }

// must turns (value, error) into a value, failing the test on an error: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestHealthzAndRoutes(t *testing.T) {
	f := newAPIFixture(t)
	f.expect("/healthz", 200, "ok")
	if code, _ := httpDo(t, http.MethodPost, f.srv.URL+"/containerLogs/default/web/app"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST containerLogs: %d, want 405", code)
	}
	if code, _ := f.get("/stats/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", code)
	}
}

// TestAPIWithPodManager runs pods with a real API and the pod manager's workers (fake runtime): logs and their
// errors come from what the workers run.
func TestAPIWithPodManager(t *testing.T) {
	api, _ := apitest.New(t)
	e := &podEnv{t: t, admin: apitest.Admin(t, api, "c1"), node: nodeClient(t, api, "n1"), clk: clocktesting.NewFakeClock(time.Now()), dir: t.TempDir()}
	e.rt = newRecording(fake.New(fake.WithClock(e.clk.Now)))
	n := must(NewNode(e.node, NodeConfig{Name: "n1", Host: newFakeHost().read}))(t)
	if err := n.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := must(NewPods(e.node, PodsConfig{NodeName: "n1", Runtime: e.rt, Images: e.rt, DataDir: e.dir, Clock: e.clk,
		NodeIP: func() string { return "10.0.0.5" }, Resync: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}))(t)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	srv := httptest.NewServer(p.APIHandler())
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) { return httpDo(t, http.MethodGet, srv.URL+path) }

	e.create(simple("web", corev1.RestartPolicyAlways))
	e.create(simple("broken", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"x"},
		Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}}))
	apitest.Eventually(t, "web running", func() bool { return e.running("app") != "" })
	first := must(e.rt.ContainerStatus(t.Context(), e.running("app"), false))(t).Status
	writeFile(t, first.LogPath, cri(0, "stdout F from the first"))
	if code, body := get("/containerLogs/default/web/app"); code != 200 || body != "from the first\n" {
		t.Fatalf("logs: %d %q", code, body)
	}
	if code, body := get("/containerLogs/default/web/app?previous=true"); code != 400 || body != `previous terminated container "app" in pod "web" not found` {
		t.Errorf("logs --previous before a restart: %d %q", code, body)
	}

	// The first exit restarts at once: previous is the exited instance.
	if err := e.rt.Exit(first.Id, 1, "", ""); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, "restarted", func() bool { id := e.running("app"); return id != "" && id != first.Id })
	second := must(e.rt.ContainerStatus(t.Context(), e.running("app"), false))(t).Status
	writeFile(t, second.LogPath, cri(1, "stdout F from the second"))
	for path, want := range map[string]string{"": "from the second\n", "?previous=1": "from the first\n"} {
		if code, body := get("/containerLogs/default/web/app" + path); code != 200 || body != want {
			t.Errorf("logs%s: %d %q, want %q", path, code, body, want)
		}
	}
	for path, want := range map[string]string{
		"/containerLogs/default/web/nope": `container "nope" not found in pod "web"`,
		"/containerLogs/default/gone/app": `pod "gone" does not exist`,
	} {
		if code, body := get(path); code != 404 || body != want {
			t.Errorf("%s: %d %q, want 404 %q", path, code, body, want)
		}
	}
	// A container that cannot be created waits, for the reason its status gives.
	apitest.Eventually(t, "the reason in the log error", func() bool {
		code, body := get("/containerLogs/default/broken/app")
		return code == 400 && body == `container "app" in pod "broken" is waiting to start: CreateContainerConfigError`
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// procFixture serves the API of a pod manager on a real process runtime, with one pod "web" running a
// container "app" (sleep) and a container "server" (the serve program on port 8080).
type procFixture struct {
	p   *Pods
	rt  *process.Runtime
	srv *httptest.Server
	pod *corev1.Pod
}

const servePort = 8080

func newProcFixture(t *testing.T) *procFixture {
	rt := processRuntime(t)
	p := must(NewPods(nil, PodsConfig{NodeName: "n1", Runtime: rt, DataDir: t.TempDir(), NodeIP: func() string { return "10.0.0.5" }}))(t)
	self := must(os.Executable())(t)
	pod := testPod("web", "app")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "server", Image: "test", Command: []string{self, strconv.Itoa(servePort)}},
		corev1.Container{Name: "done", Image: "busybox", Command: []string{"true"}},
		corev1.Container{Name: "repl", Image: "busybox", Stdin: true, Command: []string{"sh", "-c", `while read l; do echo "got $l"; done`}})
	ctx := t.Context()
	sbc := sandboxConfig(pod, 0, p.logDir())
	sb := must(rt.RunPodSandbox(ctx, sbc, ""))(t)
	ids := map[string]string{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		var env []*runtimeapi.KeyValue
		if c.Name == "server" {
			env = []*runtimeapi.KeyValue{{Key: "WH_TEST_PROGRAM", Value: []byte("serve")}}
		}
		ids[c.Name] = must(rt.CreateContainer(ctx, sb, containerConfig(pod, c, 0, env, nil), sbc))(t)
		if err := rt.StartContainer(ctx, ids[c.Name]); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(p.APIHandler())
	t.Cleanup(srv.Close)
	f := &procFixture{p: p, rt: rt, srv: srv, pod: pod}
	apitest.Eventually(t, "the server listening and the short container done", func() bool {
		code, body := httpDo(t, http.MethodGet, srv.URL+"/containerLogs/default/web/server")
		st, err := rt.ContainerStatus(ctx, ids["done"], false)
		return code == 200 && body == "listening\n" && err == nil && st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	return f
}

// processRuntime opens a process runtime on a fresh state dir with a cgroup root below the test's cgroup,
// serves its streaming server, and removes everything when the test ends.
func processRuntime(t *testing.T) *process.Runtime {
	t.Helper()
	dir := t.TempDir()
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := process.Config{StateDir: filepath.Join(dir, "state"), CgroupRoot: "wheelhouse-test-" + hex.EncodeToString(b[:]),
		StopGrace: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	rt := must(process.New(cfg))(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rt.Start(ctx) }()
	t.Cleanup(func() {
		bg := context.Background()
		sbs, _ := rt.ListPodSandbox(bg, nil)
		for _, s := range sbs {
			if err := rt.RemovePodSandbox(bg, s.Id); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		cancel()
		if err := <-served; err != nil {
			t.Errorf("streaming server: %v", err)
		}
		_ = unix.Unmount(filepath.Join(cfg.StateDir, "netns"), unix.MNT_DETACH)
		removeCgroupRoot(cfg.CgroupRoot)
	})
	return rt
}

// removeCgroupRoot removes the test's relative cgroup root in every hierarchy.
func removeCgroupRoot(rel string) {
	own, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			_ = os.Remove(filepath.Join("/sys/fs/cgroup", parts[2], rel))
			_ = os.Remove(filepath.Join("/sys/fs/cgroup/unified", parts[2], rel))
			continue
		}
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], rel))
	}
}

// execURL is the API's exec URL for cmd with kubelet's stream parameters.
func (f *procFixture) execURL(container string, cmd []string, stdin, tty bool) string {
	q := url.Values{"command": cmd, "output": {"1"}}
	if stdin {
		q.Set("input", "1")
	}
	if tty {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	return f.srv.URL + "/exec/default/web/" + container + "?" + q.Encode()
}

func TestExecThroughAPI(t *testing.T) {
	f := newProcFixture(t)
	executors := map[string]func(u string) (remotecommand.Executor, error){
		"spdy": func(u string) (remotecommand.Executor, error) {
			pu, err := url.Parse(u)
			if err != nil {
				return nil, err
			}
			return remotecommand.NewSPDYExecutor(&rest.Config{Host: f.srv.URL}, "POST", pu)
		},
		"websocket": func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(&rest.Config{Host: f.srv.URL}, "GET", u) // v5.channel.k8s.io
		},
	}
	for name, newExecutor := range executors {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name, stdin, wantOut, wantErr string
				cmd                           []string
				tty                           bool
				wantCode                      int
			}{
				{name: "streams", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, wantOut: "out\n", wantErr: "err\n", wantCode: 3},
				{name: "stdin", cmd: []string{"cat"}, stdin: "ping\n", wantOut: "ping\n"},
				{name: "tty", cmd: []string{"sh", "-c", "test -t 0 && test -t 1 && echo tty"}, tty: true, wantOut: "tty\r\n"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ex := must(newExecutor(f.execURL("app", tc.cmd, tc.stdin != "", tc.tty)))(t)
					var stdout, stderr bytes.Buffer
					opts := remotecommand.StreamOptions{Stdout: &stdout, Tty: tc.tty}
					if !tc.tty {
						opts.Stderr = &stderr
					}
					if tc.stdin != "" {
						opts.Stdin = strings.NewReader(tc.stdin)
					}
					err := ex.StreamWithContext(t.Context(), opts)
					var exitErr utilexec.ExitError
					switch {
					case tc.wantCode == 0 && err != nil:
						t.Fatalf("stream: %v", err)
					case tc.wantCode != 0 && (!errors.As(err, &exitErr) || exitErr.ExitStatus() != tc.wantCode):
						t.Fatalf("stream: %v, want exit code %d", err, tc.wantCode)
					}
					if stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
						t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tc.wantOut, tc.wantErr)
					}
				})
			}
		})
	}
}

// TestAttachThroughAPI: kubectl attach's path, with both of client-go's
// stream protocols: what a session writes reaches the container's stdin,
// the container's answer reaches the session, and stdin stays open for the
// next session (the container is not StdinOnce).
func TestAttachThroughAPI(t *testing.T) {
	f := newProcFixture(t)
	executors := map[string]func(u string) (remotecommand.Executor, error){
		"spdy": func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(&rest.Config{Host: f.srv.URL}, "POST", must(url.Parse(u))(t))
		},
		"websocket": func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(&rest.Config{Host: f.srv.URL}, "GET", u)
		},
	}
	for _, name := range []string{"spdy", "websocket"} {
		t.Run(name, func(t *testing.T) {
			ex := must(executors[name](f.srv.URL + "/attach/default/web/repl?input=1&output=1&error=1"))(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			in, inW := io.Pipe()
			out := &lockedBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: out, Stderr: io.Discard})
			}()
			_, _ = io.WriteString(inW, name+"\n")
			apitest.Eventually(t, "the container's answer", func() bool { return out.String() == "got "+name+"\n" })
			cancel()
			<-done
		})
	}
}

// lockedBuffer is a bytes.Buffer for one streaming goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStreamingErrors(t *testing.T) {
	f := newProcFixture(t)
	for _, tc := range []struct {
		name, method, path string
		code               int
		body               string
	}{
		{"no command", "POST", "/exec/default/web/app?output=1", 400, "you must specify at least one command for the container"},
		{"no stream", "POST", "/exec/default/web/app?command=true", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"bad flag", "POST", "/exec/default/web/app?command=true&output=maybe", 400, `output: "maybe" is not a boolean`},
		{"unknown pod", "POST", "/exec/default/nope/app?command=true&output=1", 404, `pod "nope" does not exist`},
		{"unknown container", "POST", "/exec/default/web/nope?command=true&output=1", 404, `container "nope" not found in pod "web"`},
		{"wrong uid", "POST", "/exec/default/web/uid-other/app?command=true&output=1", 404, `pod "web" does not exist`},
		{"exited container", "POST", "/exec/default/web/done?command=true&output=1", 400, `container "done" in pod "web" is not running`},
		{"attach to an exited container", "POST", "/attach/default/web/done?output=1", 400, `container "done" in pod "web" is not running`},
		{"attach without streams", "POST", "/attach/default/web/repl", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"port-forward to an unknown pod", "POST", "/portForward/default/nope", 404, `pod "nope" does not exist`},
		{"bad port", "GET", "/portForward/default/web?port=99999", 400, `port "99999" is not a valid port number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := httpDo(t, tc.method, f.srv.URL+tc.path); code != tc.code || body != tc.body {
				t.Errorf("%d %q, want %d %q", code, body, tc.code, tc.body)
			}
		})
	}
	// The UID form of the path reaches the same container.
	ex := must(remotecommand.NewSPDYExecutor(&rest.Config{Host: f.srv.URL}, "POST",
		must(url.Parse(f.srv.URL+"/exec/default/web/uid-web/app?command=echo&command=hi&output=1"))(t)))(t)
	var out bytes.Buffer
	if err := ex.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "hi\n" {
		t.Errorf("exec by UID: %q, %v", out.String(), err)
	}
}

func TestPortForwardThroughAPI(t *testing.T) {
	f := newProcFixture(t)
	transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", must(url.Parse(f.srv.URL+"/portForward/default/web"))(t))
	stop, ready := make(chan struct{}), make(chan struct{})
	// The forwarder reports each connection from its own goroutine: no shared buffer.
	pf := must(portforward.New(dialer, []string{fmt.Sprintf("0:%d", servePort)}, stop, ready, io.Discard, io.Discard))(t)
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	defer func() {
		close(stop)
		<-done
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	}
	local := must(pf.GetPorts())(t)[0].Local
	for i := range 2 { // two connections over one forward
		conn := must(net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(local)))))(t)
		fmt.Fprintf(conn, "hi %d\n", i)
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if want := fmt.Sprintf("echo hi %d\n", i); err != nil || line != want {
			t.Errorf("through the forward: %q, %v; want %q", line, err, want)
		}
	}
}

// TestStatsSummary: the Summary API reports the node's CPU, memory and filesystem, and the running containers'
// usage read from their cgroups, with CPU rates from the second summary on.
func TestStatsSummary(t *testing.T) {
	f := newProcFixture(t)
	get := func(query string) statsv1.Summary {
		t.Helper()
		code, body := httpDo(t, http.MethodGet, f.srv.URL+"/stats/summary"+query)
		if code != http.StatusOK {
			t.Fatalf("GET /stats/summary%s: %d %s", query, code, body)
		}
		var s statsv1.Summary
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("decode the summary: %v\n%s", err, body)
		}
		return s
	}
	first := get("")
	n := first.Node
	if n.NodeName != "n1" || n.CPU == nil || n.CPU.UsageCoreNanoSeconds == nil || *n.CPU.UsageCoreNanoSeconds == 0 ||
		n.Memory == nil || n.Memory.WorkingSetBytes == nil || *n.Memory.WorkingSetBytes == 0 ||
		n.Fs == nil || n.Fs.CapacityBytes == nil || *n.Fs.CapacityBytes == 0 || n.StartTime.IsZero() {
		t.Fatalf("node stats %+v", n)
	}
	if n.CPU.UsageNanoCores != nil {
		t.Errorf("the first summary has a CPU rate (%d) with nothing to compare with", *n.CPU.UsageNanoCores)
	}
	// A later summary has CPU rates: poll until the clock has moved between two readings.
	var second statsv1.Summary
	apitest.Eventually(t, "a summary with the node's CPU rate", func() bool {
		second = get("?only_cpu_and_memory=true")
		return second.Node.CPU != nil && second.Node.CPU.UsageNanoCores != nil
	})
	if second.Node.Fs != nil {
		t.Error("only_cpu_and_memory still reports the filesystem")
	}
	if len(second.Pods) != 1 || second.Pods[0].PodRef.Name != "web" || second.Pods[0].PodRef.Namespace != "default" {
		t.Fatalf("pods %+v, want web", second.Pods)
	}
	pod := second.Pods[0]
	var names []string
	for _, c := range pod.Containers {
		names = append(names, c.Name)
		if c.Name != "server" {
			continue
		}
		if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || *c.CPU.UsageCoreNanoSeconds == 0 || c.CPU.UsageNanoCores == nil {
			t.Errorf("server's CPU %+v: a Go program that has run uses CPU time", c.CPU)
		}
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 {
			t.Errorf("server's memory %+v", c.Memory)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"app", "repl", "server"}) {
		t.Errorf("containers %v: the running ones (done has exited)", names)
	}
	if pod.Memory == nil || pod.Memory.WorkingSetBytes == nil || pod.CPU == nil || pod.CPU.UsageCoreNanoSeconds == nil {
		t.Errorf("pod totals %+v %+v", pod.CPU, pod.Memory)
	}
}
