package kubelet

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// t0 is the time of the first entry of the hand-written logs; entry i is i seconds later.
var t0 = time.Date(2025, 3, 1, 10, 0, 0, 123_000_000, time.UTC)

// cri writes CRI log lines, "<stream> <tag> <content>" each, timestamped t0+first s, t0+first+1 s, ...
func cri(first int, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%s %s\n", t0.Add(time.Duration(first+i)*time.Second).Format(time.RFC3339Nano), l)
	}
	return b.String()
}

func TestParseCRIEntry(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    criEntry
		wantErr bool
	}{
		{line: "2025-03-01T10:00:00.5Z stdout F hello world", want: criEntry{ts: t0.Add(377 * time.Millisecond), stream: "stdout", content: []byte("hello world")}},
		{line: "2025-03-01T10:00:00.5Z stderr P part", want: criEntry{ts: t0.Add(377 * time.Millisecond), stream: "stderr", partial: true, content: []byte("part")}},
		{line: "2025-03-01T10:00:00.5Z stdout F ", want: criEntry{ts: t0.Add(377 * time.Millisecond), stream: "stdout", content: []byte{}}},
		{line: "2025-03-01T10:00:00.5Z stdout P:x  two  spaces", want: criEntry{ts: t0.Add(377 * time.Millisecond), stream: "stdout", partial: true, content: []byte(" two  spaces")}},
		{line: "not-a-time stdout F x", wantErr: true},
		{line: "2025-03-01T10:00:00.5Z stdin F x", wantErr: true},
		{line: "2025-03-01T10:00:00.5Z stdout", wantErr: true},
		{line: "", wantErr: true},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseCRIEntry([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (!got.ts.Equal(tc.want.ts) || got.stream != tc.want.stream || got.partial != tc.want.partial || string(got.content) != string(tc.want.content)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTailOffset(t *testing.T) {
	log := cri(0, "stdout F a", "stdout P b1", "stderr F e", "stdout F b2", "stdout F c") + "garbage\n" + cri(5, "stdout P d")
	lines := strings.SplitAfter(log, "\n")
	offsetOf := func(line int) int64 { return int64(len(strings.Join(lines[:line], ""))) }
	for _, tc := range []struct {
		n, wantOff, wantCount int64
	}{
		{n: 0, wantOff: int64(len(log)), wantCount: 0},
		{n: 1, wantOff: offsetOf(5), wantCount: 1}, // the unfinished last line (the malformed one before is skipped)
		{n: 2, wantOff: offsetOf(4), wantCount: 2},
		{n: 3, wantOff: offsetOf(3), wantCount: 3},
		{n: 4, wantOff: offsetOf(1), wantCount: 4}, // a partial entry goes with the next full one, whatever its stream
		{n: 5, wantOff: 0, wantCount: 5},
		{n: 100, wantOff: 0, wantCount: 5}, // fewer lines than asked
	} {
		off, count, err := tailOffset(strings.NewReader(log), int64(len(log)), tc.n)
		if err != nil || off != tc.wantOff || count != tc.wantCount {
			t.Errorf("tail %d: offset %d count %d err %v; want %d %d", tc.n, off, count, err, tc.wantOff, tc.wantCount)
		}
	}
	// Lines longer than the scan buffer, and no final newline.
	long := strings.Repeat("x", 100<<10)
	log = cri(0, "stdout F "+long, "stdout F "+long, "stdout F end")
	log = log[:len(log)-1]
	off, count, err := tailOffset(strings.NewReader(log), int64(len(log)), 2)
	if want := int64(strings.Index(log, "\n") + 1); err != nil || off != want || count != 2 {
		t.Errorf("long lines: offset %d count %d err %v; want %d 2", off, count, err, want)
	}
}

func TestParseLogOptions(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		query   string
		want    logOptions
		wantErr string
	}{
		{query: "", want: logOptions{tail: -1, limit: -1}},
		{query: "follow=true&previous=1&timestamps=", want: logOptions{follow: true, previous: true, timestamps: true, tail: -1, limit: -1}},
		{query: "follow=false&timestamps=0", want: logOptions{tail: -1, limit: -1}},
		{query: "tailLines=3&limitBytes=10", want: logOptions{tail: 3, limit: 10}},
		{query: "tail=5", want: logOptions{tail: 5, limit: -1}},
		{query: "tail=all&tailLines=5", want: logOptions{tail: -1, limit: -1}},
		{query: "sinceSeconds=60", want: logOptions{tail: -1, limit: -1, since: now.Add(-time.Minute)}},
		{query: "sinceTime=2025-03-01T10:00:02Z", want: logOptions{tail: -1, limit: -1, since: t0.Add(2*time.Second - 123*time.Millisecond)}},
		{query: "tailLines=-1", wantErr: "tailLines: must be greater than or equal to 0"},
		{query: "tailLines=x", wantErr: `tailLines: "x" is not an integer`},
		{query: "limitBytes=0", wantErr: "limitBytes: must be greater than or equal to 1"},
		{query: "sinceSeconds=0", wantErr: "sinceSeconds: must be greater than or equal to 1"},
		{query: "sinceTime=yesterday", wantErr: `sinceTime: "yesterday" is not an RFC 3339 time`},
		{query: "sinceTime=2025-03-01T10:00:02Z&sinceSeconds=5", wantErr: "at most one of sinceTime or sinceSeconds may be specified"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := urlQuery(tc.query)
			got, err := parseLogOptions(q, now)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(logOptions{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerLogs(t *testing.T) {
	f := newAPIFixture(t)
	pod := testPod("web", "app")
	c := f.run(pod, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	long := strings.Repeat("x", 20)
	f.writeLog(c.LogPath+".20250301-100000", cri(0, "stdout F one", "stderr F two"))
	f.writeLog(c.LogPath+".20250301-100000-0001", cri(2, "stdout F three"))
	f.writeLog(c.LogPath+".notrotated", cri(0, "stdout F never"))
	f.writeLog(c.LogPath, cri(3, "stdout P "+long, "stdout F "+long, "not a CRI line", "stderr F four", "stdout F five"))
	stamp := func(i int) string { return t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " " }
	all := "one\ntwo\nthree\n" + long + long + "\nfour\nfive\n"
	for _, tc := range []struct {
		query, want string
	}{
		{query: "", want: all},
		{query: "timestamps=true", want: stamp(0) + "one\n" + stamp(1) + "two\n" + stamp(2) + "three\n" + stamp(3) + long + long + "\n" +
			stamp(6) + "four\n" + stamp(7) + "five\n"},
		{query: "tailLines=2", want: "four\nfive\n"},
		{query: "tailLines=3", want: long + long + "\nfour\nfive\n"},
		{query: "tailLines=4", want: "three\n" + long + long + "\nfour\nfive\n"},
		{query: "tailLines=5", want: "two\nthree\n" + long + long + "\nfour\nfive\n"},
		{query: "tailLines=50", want: all},
		{query: "tailLines=0", want: ""},
		{query: "sinceTime=2025-03-01T10:00:02Z", want: "three\n" + long + long + "\nfour\nfive\n"},
		{query: "sinceTime=2025-03-01T10:00:05Z&tailLines=3", want: "four\nfive\n"},
		{query: "limitBytes=6", want: "one\ntw"},
		{query: "limitBytes=8", want: "one\ntwo\n"},
		{query: "limitBytes=1000", want: all},
		{query: "timestamps=1&tailLines=1&limitBytes=10", want: stamp(7)[:10]},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, body := f.get("/containerLogs/default/web/app?" + tc.query)
			if code != http.StatusOK || body != tc.want {
				t.Errorf("got %d %q, want 200 %q", code, body, tc.want)
			}
		})
	}
	// sinceSeconds is relative to now: everything written an hour before is left out.
	if code, body := f.get("/containerLogs/default/web/app?sinceSeconds=3600"); code != http.StatusOK || body != "" {
		t.Errorf("sinceSeconds: %d %q", code, body)
	}
}

func TestContainerLogsInstances(t *testing.T) {
	f := newAPIFixture(t)
	pod := testPod("web", "app", "side")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	for attempt, want := range []string{"first\n", "second\n"} {
		c := f.run(pod, "app", uint32(attempt), runtimeapi.ContainerState_CONTAINER_EXITED)
		f.writeLog(c.LogPath, cri(attempt, "stdout F "+strings.TrimSuffix(want, "\n")))
	}
	c := f.run(pod, "app", 2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.writeLog(c.LogPath, cri(2, "stdout F third"))
	f.run(pod, "side", 0, runtimeapi.ContainerState_CONTAINER_CREATED)

	// Only the runtime knows the pod: the latest instance and the one before it.
	f.expect("/containerLogs/default/web/app", 200, "third\n")
	f.expect("/containerLogs/default/web/app?previous=true", 200, "second\n")
	f.expect("/containerLogs/default/web/side", 400, `container "side" in pod "web" is waiting to start: ContainerCreating`)
	f.expect("/containerLogs/default/web/side?previous=true", 400, `previous terminated container "side" in pod "web" not found`)
	f.expect("/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`)
	f.expect("/containerLogs/default/other/app", 404, `pod "other" does not exist`)
	f.expect("/containerLogs/other/web/app", 404, `pod "web" does not exist`)
	f.expect("/containerLogs/default/web/app?tailLines=x", 400, `tailLines: "x" is not an integer`)

	// Known to a worker: its spec names the containers, its status says why one waits, and a container that
	// exited to be restarted is both the current and the previous instance, as kubelet shows it.
	if err := f.rt.Exit(c.Id, 1, "", ""); err != nil {
		t.Fatal(err)
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	f.adopt(pod)
	f.expect("/containerLogs/default/web/app", 200, "third\n")
	f.expect("/containerLogs/default/web/app?previous=true", 200, "third\n")
	f.expect("/containerLogs/default/web/init", 400, `container "init" in pod "web" is waiting to start: PodInitializing`)
	f.expect("/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`)
	// With restartPolicy Never it stays terminated: previous is the one before.
	pod = pod.DeepCopy()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	f.adopt(pod)
	f.expect("/containerLogs/default/web/app?previous=true", 200, "second\n")
}

func TestContainerLogsFollow(t *testing.T) {
	f := newAPIFixture(t)
	pod := testPod("web", "app")
	c := f.run(pod, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.writeLog(c.LogPath, cri(0, "stdout F old", "stdout F last"))

	resp, err := http.Get(f.srv.URL + "/containerLogs/default/web/app?follow=true&tailLines=1&timestamps=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				if l != "" {
					lines <- l
				}
				done <- err
				return
			}
			lines <- l
		}
	}()
	expectLine := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("line %q, want %q", got, want)
			}
		case err := <-done:
			t.Fatalf("the stream ended (%v) before %q", err, want)
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q within 10s", want)
		}
	}
	stamp := func(i int) string { return t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " " }
	expectLine(stamp(1) + "last\n")

	// Appended lines, one of them written in two parts, the second part after the reader saw the first.
	f.appendLog(c.LogPath, cri(2, "stdout F new"))
	expectLine(stamp(2) + "new\n")
	half := cri(3, "stdout P half", "stdout F done")
	f.appendLog(c.LogPath, half[:10])
	f.appendLog(c.LogPath, half[10:])
	expectLine(stamp(3) + "halfdone\n")

	// Rotation: lines written to the old file just before it is renamed, then to the new file.
	f.appendLog(c.LogPath, cri(5, "stdout F before rotation"))
	if err := os.Rename(c.LogPath, c.LogPath+".20250301-100005"); err != nil {
		t.Fatal(err)
	}
	f.writeLog(c.LogPath, cri(6, "stdout F after rotation"))
	expectLine(stamp(5) + "before rotation\n")
	expectLine(stamp(6) + "after rotation\n")

	// The container exits: what it wrote last is sent, then the stream ends.
	f.appendLog(c.LogPath, cri(7, "stderr F bye"))
	if err := f.rt.Exit(c.Id, 0, "", ""); err != nil {
		t.Fatal(err)
	}
	expectLine(stamp(7) + "bye\n")
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("the stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after the container exited")
	}
}

func TestContainerLogsFollowEndsWithClient(t *testing.T) {
	f := newAPIFixture(t)
	c := f.run(testPod("web", "app"), "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	// No log file yet: the follower waits for it.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/containerLogs/default/web/app?follow=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	f.writeLog(c.LogPath, cri(0, "stdout F hello"))
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	resp.Body.Close() // the handler ends with the client; the server's Close would otherwise wait for it
	f.srv.Close()
}

func (f *apiFixture) writeLog(path, content string) {
	f.t.Helper()
	writeFile(f.t, path, content)
}

func (f *apiFixture) appendLog(path, content string) {
	f.t.Helper()
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteString(content); err != nil {
		f.t.Fatal(err)
	}
}
