package process_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

func TestLifecycleEnvArgsWorkingDirAndLogs(t *testing.T) {
	rt, cfg := testRuntime(t)
	ctx := t.Context()
	sbCfg := sandboxConfig("web")
	sb := runSandbox(t, rt, sbCfg)

	sbStatus := must(rt.PodSandboxStatus(ctx, sb, false))(t).Status
	if sbStatus.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox state = %s, want READY", sbStatus.State)
	}
	if diff := cmp.Diff(sbCfg.Labels, sbStatus.Labels); diff != "" {
		t.Errorf("sandbox labels (-want +got):\n%s", diff)
	}

	wd := t.TempDir()
	cc := containerConfig("app", "sh", "-c", `echo "$GREETING $1"; pwd; echo oops >&2`, "sh", "world")
	cc.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hello")}}
	cc.WorkingDir = wd
	id := must(rt.CreateContainer(ctx, sb, cc, sbCfg))(t)
	if st := status(t, rt, id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("state after create = %s, want CREATED", st.State)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); !runtime.IsFailedPrecondition(err) {
		t.Errorf("second StartContainer: got %v, want FailedPrecondition", err)
	}
	st := waitExited(t, rt, id)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("exit = %d %q, want 0 Completed", st.ExitCode, st.Reason)
	}
	if st.StartedAt == 0 || st.FinishedAt < st.StartedAt || st.CreatedAt > st.StartedAt {
		t.Errorf("times created %d started %d finished %d", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	if st.Image.GetImage() != cc.Image.Image || st.ImageRef != cc.Image.Image {
		t.Errorf("image %v ref %q, want %q", st.Image, st.ImageRef, cc.Image.Image)
	}
	if diff := cmp.Diff(cc.Labels, st.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cc.Annotations, st.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	wantLog := filepath.Join(cfg.LogDir, sb, "app", "0.log")
	if st.LogPath != wantLog {
		t.Errorf("log path %q, want %q", st.LogPath, wantLog)
	}
	entries := readLog(t, st.LogPath)
	if got, want := logText(entries, "stdout"), "hello world\n"+wd+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := logText(entries, "stderr"); got != "oops\n" {
		t.Errorf("stderr %q, want oops", got)
	}

	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ContainerStatus(ctx, id, false); !runtime.IsNotFound(err) {
		t.Errorf("status after remove: %v, want NotFound", err)
	}
	if _, err := rt.PodSandboxStatus(ctx, sb, false); !runtime.IsNotFound(err) {
		t.Errorf("sandbox status after remove: %v, want NotFound", err)
	}
	for _, p := range []string{st.LogPath, filepath.Join(cfg.StateDir, "netns", sb), filepath.Join(cfg.StateDir, "containers", id)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after RemovePodSandbox (%v)", p, err)
		}
	}
	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Errorf("second RemovePodSandbox: %v", err)
	}
}

func TestExitCodesAndReasons(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("exits")
	sb := runSandbox(t, rt, sbCfg)
	for _, tc := range []struct {
		name, script string
		code         int32
		reason       string
	}{
		{"success", "exit 0", 0, "Completed"},
		{"failure", "exit 3", 3, "Error"},
		{"killed", "kill -KILL $$", 137, "Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := startContainer(t, rt, sb, sbCfg, containerConfig(tc.name, "sh", "-c", tc.script))
			st := waitExited(t, rt, id)
			if st.ExitCode != tc.code || st.Reason != tc.reason {
				t.Errorf("exit %d %q, want %d %q", st.ExitCode, st.Reason, tc.code, tc.reason)
			}
		})
	}
}

func TestStartErrorIsRecorded(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("broken")
	sb := runSandbox(t, rt, sbCfg)
	id := must(rt.CreateContainer(t.Context(), sb, containerConfig("nope", "no-such-program-wh"), sbCfg))(t)
	err := rt.StartContainer(t.Context(), id)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("StartContainer = %v, want executable not found", err)
	}
	st := status(t, rt, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" {
		t.Errorf("status %s %q, want EXITED StartError", st.State, st.Reason)
	}
}

func TestListFilters(t *testing.T) {
	rt, _ := testRuntime(t)
	ctx := t.Context()
	aCfg, bCfg := sandboxConfig("a"), sandboxConfig("b")
	a, b := runSandbox(t, rt, aCfg), runSandbox(t, rt, bCfg)
	ca := startContainer(t, rt, a, aCfg, containerConfig("run", "sleep", "300"))
	cb := must(rt.CreateContainer(ctx, b, containerConfig("idle", "true"), bCfg))(t)
	if err := rt.StopPodSandbox(ctx, b); err != nil {
		t.Fatal(err)
	}

	ids := func(list []*runtimeapi.Container) []string {
		var out []string
		for _, c := range list {
			out = append(out, c.Id)
		}
		return out
	}
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"by sandbox", &runtimeapi.ContainerFilter{PodSandboxId: b}, []string{cb}},
		{"by id", &runtimeapi.ContainerFilter{Id: ca}, []string{ca}},
		{"by state", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: running}}, []string{ca}},
		{"by label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "idle"}}, []string{cb}},
		{"no match", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"x": "y"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(must(rt.ListContainers(ctx, tc.filter))(t))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	notReady := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}
	sbs := must(rt.ListPodSandbox(ctx, notReady))(t)
	if len(sbs) != 1 || sbs[0].Id != b {
		t.Errorf("NOTREADY sandboxes = %v, want [%s]", sbs, b)
	}
	byUID := &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-a"}}
	if sbs := must(rt.ListPodSandbox(ctx, byUID))(t); len(sbs) != 1 || sbs[0].Id != a {
		t.Errorf("sandboxes of uid-a = %v, want [%s]", sbs, a)
	}
	if _, err := rt.CreateContainer(ctx, b, containerConfig("late", "true"), bCfg); !runtime.IsFailedPrecondition(err) {
		t.Errorf("create in NOTREADY sandbox: %v, want FailedPrecondition", err)
	}
}

func TestContainerLogRotates(t *testing.T) {
	_, cfg := testRuntime(t)
	cfg.LogMaxBytes, cfg.LogMaxFiles = 4096, 3
	rt := openRuntime(t, cfg)
	sbCfg := sandboxConfig("chatty")
	sb := runSandbox(t, rt, sbCfg)
	cc := containerConfig("app", "sh", "-c", `i=0; while [ $i -lt 400 ]; do echo "line $i"; i=$((i+1)); done`)
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, cc))
	rotated, _ := filepath.Glob(st.LogPath + ".*")
	if len(rotated) != 2 {
		t.Fatalf("rotated files %v, want 2 (LogMaxFiles 3)", rotated)
	}
	for _, f := range append(rotated, st.LogPath) {
		if fi, err := os.Stat(f); err != nil || fi.Size() > 4096 {
			t.Errorf("%s: %v, size over 4096", f, err)
		}
	}
	lines := strings.Split(strings.TrimSpace(logText(readLog(t, st.LogPath), "stdout")), "\n")
	if lines[len(lines)-1] != "line 399" {
		t.Errorf("live log ends with %q, want line 399", lines[len(lines)-1])
	}
}

func TestStreamServerOnUnixSocket(t *testing.T) {
	_, cfg := testRuntime(t)
	sock := filepath.Join(t.TempDir(), "stream.sock")
	cfg.StreamAddr = "unix:" + sock
	rt := openRuntime(t, cfg)
	if rt.StreamAddr().String() != sock {
		t.Fatalf("listening on %s, want %s", rt.StreamAddr(), sock)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := client.Get("http://localhost/exec/unknown-token")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown token: %d, want 404", resp.StatusCode)
	}
}
