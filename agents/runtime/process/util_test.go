package process_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// must turns (value, error) into a value, failing the test on an error:
// must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// runSandbox runs a sandbox for name.
func runSandbox(t *testing.T, rt *process.Runtime, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	return must(rt.RunPodSandbox(t.Context(), cfg, ""))(t)
}

// startContainer creates and starts a container in sandbox sb.
func startContainer(t *testing.T, rt *process.Runtime, sb string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	id := must(rt.CreateContainer(t.Context(), sb, cfg, sbCfg))(t)
	if err := rt.StartContainer(t.Context(), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

func status(t *testing.T, rt *process.Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	return must(rt.ContainerStatus(context.Background(), id, true))(t).Status
}

// waitExited waits until container id has exited and returns its status.
func waitExited(t *testing.T, rt *process.Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	eventually(t, 20*time.Second, "container to exit", func() bool {
		st = status(t, rt, id)
		return st.State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	return st
}

var criLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

// logEntry is one parsed CRI log line.
type logEntry struct {
	stream, tag, content string
}

// readLog parses the CRI log at path, failing on any malformed line.
func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []logEntry
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		m := criLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("malformed CRI log line %q", line)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Fatalf("bad timestamp in %q: %v", line, err)
		}
		out = append(out, logEntry{m[2], m[3], m[4]})
	}
	return out
}

// logText returns the content of a stream's entries, one per line.
func logText(entries []logEntry, stream string) string {
	var b strings.Builder
	for _, e := range entries {
		if e.stream == stream {
			b.WriteString(e.content + "\n")
		}
	}
	return b.String()
}
