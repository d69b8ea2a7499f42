package process_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// execFixture is a running container with an env var, a working directory
// and a mount, to exec into.
type execFixture struct {
	rt      *process.Runtime
	sb, id  string
	wd, dst string
}

func newExecFixture(t *testing.T) execFixture {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("exec")
	sb := runSandbox(t, rt, sbCfg)
	src, wd := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "mnt")
	cc := containerConfig("app", "sleep", "300")
	cc.Envs = []*runtimeapi.KeyValue{{Key: "FOO", Value: []byte("bar")}}
	cc.WorkingDir = wd
	cc.Mounts = []*runtimeapi.Mount{{HostPath: src, ContainerPath: dst, Readonly: true}}
	return execFixture{rt: rt, sb: sb, id: startContainer(t, rt, sb, sbCfg, cc), wd: wd, dst: dst}
}

func TestExecSync(t *testing.T) {
	f := newExecFixture(t)
	ctx := t.Context()
	script := `echo $FOO; pwd; cat ` + f.dst + `/secret; echo; sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '; echo problem >&2; exit 4`
	stdout, stderr, err := f.rt.ExecSync(ctx, f.id, []string{"sh", "-c", script}, 10*time.Second)
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 4 {
		t.Fatalf("err = %v, want exit code 4", err)
	}
	if want := "bar\n" + f.wd + "\ns3cret\nlo\n"; string(stdout) != want {
		t.Errorf("stdout %q, want %q (env, working dir, mount, netns of the container)", stdout, want)
	}
	if string(stderr) != "problem\n" {
		t.Errorf("stderr %q", stderr)
	}

	if _, _, err := f.rt.ExecSync(ctx, f.id, []string{"true"}, 0); err != nil {
		t.Errorf("exec true: %v", err)
	}
	_, _, err = f.rt.ExecSync(ctx, f.id, []string{"sleep", "30"}, 200*time.Millisecond)
	if !errors.Is(err, runtime.ErrCommandTimedOut) {
		t.Errorf("exec past its timeout: %v, want ErrCommandTimedOut", err)
	}
	if _, _, err := f.rt.ExecSync(ctx, f.id, []string{"no-such-command-wh"}, time.Second); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("exec of a missing command: %v", err)
	}
	if _, _, err := f.rt.ExecSync(ctx, "nope", []string{"true"}, time.Second); !runtime.IsNotFound(err) {
		t.Errorf("exec in unknown container: %v, want NotFound", err)
	}
}

func TestStreamingExec(t *testing.T) {
	f := newExecFixture(t)
	executors := map[string]func(u string) (remotecommand.Executor, error){
		"spdy": func(u string) (remotecommand.Executor, error) {
			pu, err := url.Parse(u)
			if err != nil {
				return nil, err
			}
			return remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", pu)
		},
		"websocket": func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(&rest.Config{}, "GET", u) // v5.channel.k8s.io
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
				{name: "streams", cmd: []string{"sh", "-c", "echo $FOO; echo err >&2; exit 3"}, wantOut: "bar\n", wantErr: "err\n", wantCode: 3},
				{name: "stdin", cmd: []string{"cat"}, stdin: "ping\n", wantOut: "ping\n"},
				{name: "tty", cmd: []string{"sh", "-c", "test -t 0 && test -t 1 && echo tty"}, tty: true, wantOut: "tty\r\n"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					req := &runtimeapi.ExecRequest{ContainerId: f.id, Cmd: tc.cmd, Stdout: true, Stderr: !tc.tty, Stdin: tc.stdin != "", Tty: tc.tty}
					resp := must(f.rt.Exec(t.Context(), req))(t)
					ex := must(newExecutor(resp.Url))(t)
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

func TestPortForward(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("pf")
	sb := runSandbox(t, rt, sbCfg)
	const port = 8080
	id := startContainer(t, rt, sb, sbCfg, testProgramConfig(t, "server", "serve", strconv.Itoa(port)))
	st := status(t, rt, id)
	eventually(t, 10*time.Second, "the server to listen", func() bool {
		return logText(readLog(t, st.LogPath), "stdout") == "listening\n"
	})

	resp := must(rt.PortForward(t.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{port}}))(t)
	u := must(url.Parse(resp.Url))(t)
	transport, upgrader := must2(spdy.RoundTripperFor(&rest.Config{}))(t)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var out, errOut bytes.Buffer
	pf := must(portforward.New(dialer, []string{fmt.Sprintf("0:%d", port)}, stop, ready, &out, &errOut))(t)
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
	ports := must(pf.GetPorts())(t)
	conn := must(net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))))(t)
	defer conn.Close()
	fmt.Fprintln(conn, "hi")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "echo hi\n" {
		t.Errorf("through the forward: %q, %v; want the server's echo", line, err)
	}
}

// must2 is must for calls returning two values and an error.
func must2[A, B any](a A, b B, err error) func(testing.TB) (A, B) {
	return func(t testing.TB) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}
