package kubelet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Termination messages, as kubelet keeps them: each container instance gets a file of its own on the host,
// mounted at its terminationMessagePath, which it may write before it exits; the kubelet reads it into the
// container's terminated state. With terminationMessagePolicy FallbackToLogsOnError, a container that failed
// without writing one gets the end of its log instead.

// Upstream's limits: the file's first 4 KiB; from the log, its last 80 lines and of those the last 2 KiB.
const (
	maxTerminationMessage     = 4 << 10
	maxTerminationLogLines    = 80
	maxTerminationLogMessages = 2 << 10
)

// terminationFile is the host file behind an instance's terminationMessagePath.
func (v volumes) terminationFile(pod *corev1.Pod, container string, attempt uint32) string {
	return filepath.Join(v.podsDir, string(pod.UID), "containers", container, strconv.FormatUint(uint64(attempt), 10)+"-termination-log")
}

// terminationMount creates the instance's empty termination file — writable by any user, since the container
// may run as anyone — and returns its mount; nil when the container has no terminationMessagePath.
func (v volumes) terminationMount(pod *corev1.Pod, c *corev1.Container, attempt uint32) (*runtimeapi.Mount, error) {
	if c.TerminationMessagePath == "" {
		return nil, nil
	}
	file := v.terminationFile(pod, c.Name, attempt)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		return nil, err
	}
	if err := os.Chmod(file, 0o666); err != nil { // past the umask
		return nil, err
	}
	return &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: file}, nil
}

// terminationMessages fills in the message of every exited container instance of ob that has none from the
// runtime, remembering each by instance so that a file or log is read once.
func (w *worker) terminationMessages(ctx context.Context, pod *corev1.Pod, ob observed) {
	specs := map[string]*corev1.Container{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			specs[list[i].Name] = &list[i]
		}
	}
	seen := map[string]bool{}
	for name, in := range ob.containers {
		c := specs[name]
		for _, s := range in {
			seen[s.Id] = true
			if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.Message != "" || c == nil {
				continue
			}
			msg, ok := w.messages[s.Id]
			if !ok {
				msg = w.p.vols.terminationMessage(ctx, pod, c, s)
				w.messages[s.Id] = msg
			}
			s.Message = msg
		}
	}
	for id := range w.messages {
		if !seen[id] { // the instance was removed
			delete(w.messages, id)
		}
	}
}

// terminationMessage reads an exited instance's message: its file, else (FallbackToLogsOnError, a failure) the
// end of its log.
func (v volumes) terminationMessage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, s *runtimeapi.ContainerStatus) string {
	if c.TerminationMessagePath != "" {
		if f, err := os.Open(v.terminationFile(pod, c.Name, s.Metadata.GetAttempt())); err == nil {
			b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
			f.Close()
			if len(b) > 0 {
				return string(b)
			}
		}
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || s.ExitCode == 0 || s.LogPath == "" {
		return ""
	}
	var out bytes.Buffer
	err := streamLog(ctx, &out, func() error { return nil }, s.LogPath, logOptions{tail: maxTerminationLogLines, limit: -1}, nil)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	b := out.Bytes()
	if len(b) > maxTerminationLogMessages {
		b = b[len(b)-maxTerminationLogMessages:]
	}
	return string(b)
}
