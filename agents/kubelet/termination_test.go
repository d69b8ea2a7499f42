package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestTerminationMessages: a container's termination message is what it wrote to its terminationMessagePath (a
// file of its own on the host, writable by any user); with FallbackToLogsOnError a failed container that wrote
// none gets the end of its log, and a succeeded one gets nothing.
func TestTerminationMessages(t *testing.T) {
	e := newPodEnv(t)
	ctx := t.Context()
	mk := func(name string, policy corev1.TerminationMessagePolicy) {
		e.create(simple(name, corev1.RestartPolicyNever, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
			TerminationMessagePath: "/dev/termination-custom-log", TerminationMessagePolicy: policy}))
	}
	// terminate makes pod's container exit with code after writing file (if any) and log lines (if any).
	terminate := func(pod string, code int32, file string, logLines ...string) string {
		t.Helper()
		e.until(pod+" running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, pod)
		id := e.running("app") // the pods run one after the other
		cfg := e.rt.config("app")
		var host string
		for _, m := range cfg.Mounts {
			if m.ContainerPath == "/dev/termination-custom-log" {
				host = m.HostPath
			}
		}
		if host == "" {
			t.Fatalf("%s: no mount at the termination message path: %v", pod, cfg.Mounts)
		}
		if st, err := os.Stat(host); err != nil || st.Mode().Perm() != 0o666 {
			t.Fatalf("%s: termination file %v %v, want mode 0666", pod, st, err)
		}
		if file != "" {
			if err := os.WriteFile(host, []byte(file), 0o666); err != nil {
				t.Fatal(err)
			}
		}
		st, err := e.rt.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(logLines) > 0 {
			if err := os.MkdirAll(filepath.Dir(st.Status.LogPath), 0o755); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, l := range logLines {
				b.WriteString("2026-12-06T01:02:03.000000000Z stdout F " + l + "\n")
			}
			if err := os.WriteFile(st.Status.LogPath, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.rt.Exit(id, code, "", ""); err != nil {
			t.Fatal(err)
		}
		var msg string
		e.until(pod+" terminated", func(p *corev1.Pod) bool {
			if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
				msg = cs[0].State.Terminated.Message
				return true
			}
			return false
		}, pod)
		return msg
	}

	mk("file", corev1.TerminationMessageReadFile)
	if got := terminate("file", 0, "DONE", "ignored"); got != "DONE" {
		t.Errorf("message from the file: %q", got)
	}
	mk("big", corev1.TerminationMessageReadFile)
	if got := terminate("big", 1, strings.Repeat("x", 5000)); len(got) != 4096 {
		t.Errorf("message from a 5000-byte file: %d bytes, want the first 4096", len(got))
	}
	mk("fallback", corev1.TerminationMessageFallbackToLogsOnError)
	if got := terminate("fallback", 1, "", "first", "DONE"); got != "first\nDONE\n" {
		t.Errorf("message from the log of a failed container: %q", got)
	}
	mk("fallback-file", corev1.TerminationMessageFallbackToLogsOnError)
	if got := terminate("fallback-file", 1, "from file", "from log"); got != "from file" {
		t.Errorf("a written message wins over the log: %q", got)
	}
	mk("succeeded", corev1.TerminationMessageFallbackToLogsOnError)
	if got := terminate("succeeded", 0, "", "DONE"); got != "" {
		t.Errorf("a succeeded container's message: %q, want none", got)
	}
	mk("many", corev1.TerminationMessageFallbackToLogsOnError)
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = strings.Repeat("y", 39) // 40 bytes with the newline: 80 lines are 3200 bytes
	}
	if got := terminate("many", 2, "", lines...); len(got) != 2048 {
		t.Errorf("message from a long log: %d bytes, want the last 2048", len(got))
	}
}
