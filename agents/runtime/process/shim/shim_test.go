package shim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// fakeClock advances one millisecond per reading.
func fakeClock() func() time.Time {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	return func() time.Time {
		now = now.Add(time.Millisecond)
		return now
	}
}

func TestCRILogRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app", "0.log")
	l, err := openCRILog(path, 1024, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.now = fakeClock()
	var input strings.Builder
	for i := range 200 {
		fmt.Fprintf(&input, "line %03d\n", i)
	}
	if err := l.copyFrom("stdout", strings.NewReader(input.String())); err != nil {
		t.Fatal(err)
	}
	l.Close()

	files, _ := filepath.Glob(path + "*")
	sort.Strings(files)
	if len(files) != 3 {
		t.Fatalf("files %v, want 0.log and 2 rotated", files)
	}
	// Oldest rotated first, then the live file: the lines continue across them.
	ordered := append(files[1:], files[0])
	var lines []string
	for _, f := range ordered {
		if st, _ := os.Stat(f); st.Size() > 1024 {
			t.Errorf("%s has %d bytes, over the 1024 limit", f, st.Size())
		}
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) != 4 || parts[1] != "stdout" || parts[2] != "F" {
				t.Fatalf("bad entry %q", line)
			}
			if _, err := time.Parse(time.RFC3339Nano, parts[0]); err != nil {
				t.Fatalf("bad timestamp in %q", line)
			}
			lines = append(lines, parts[3])
		}
	}
	if lines[len(lines)-1] != "line 199" {
		t.Errorf("last line %q, want line 199", lines[len(lines)-1])
	}
	for i := 1; i < len(lines); i++ {
		if lines[i] <= lines[i-1] {
			t.Fatalf("lines out of order at %d: %q after %q", i, lines[i], lines[i-1])
		}
	}
	if !strings.HasPrefix(filepath.Base(files[1]), "0.log.20260102-150405") {
		t.Errorf("rotated name %q, want 0.log.<kubelet timestamp>", files[1])
	}
}

func TestCRILogSplitsLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	l, err := openCRILog(path, 10<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 2*maxLogLine+100)
	if err := l.copyFrom("stderr", strings.NewReader(long+"\nshort\nno newline at end")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, _ := os.Open(path)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var tags, contents []string
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		tags = append(tags, parts[2])
		contents = append(contents, parts[3])
	}
	if got := strings.Join(tags, ""); got != "PPFFF" {
		t.Errorf("tags %q, want PPFFF", got)
	}
	if got := strings.Join(contents[:3], ""); got != long {
		t.Errorf("partial entries do not join back to the line (%d bytes)", len(got))
	}
	if contents[3] != "short" || contents[4] != "no newline at end" {
		t.Errorf("tail entries %q", contents[3:])
	}
}

func TestProcIdentityRejectsReusedPID(t *testing.T) {
	self, err := Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Fatal("this process is not alive by its own identity")
	}
	reused := Identity{PID: self.PID, Start: self.Start + 1}
	if reused.Alive() {
		t.Error("a PID with another start time counts as alive")
	}
	if _, err := reused.PidFD(); err == nil {
		t.Error("pidfd opened on a process with another start time")
	}
}
