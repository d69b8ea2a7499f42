package report

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.md from the current rendering")

const golden = "testdata/report.golden.md"

var testMeta = Meta{
	Date:     "2026-12-06 14:03 UTC",
	Suite:    "k8s.io/kubernetes v1.37.2 e2e.test, ginkgo v2.32.0",
	Command:  `ginkgo -p e2e.test -- --ginkgo.focus='\[Conformance\]' --ginkgo.skip='\[Serial\]|\[Flaky\]' --report-dir=.cache/conformance/parallel`,
	Machine:  "2 × AMD EPYC 7B13 @ 2.45 GHz, 7.8 GiB, Debian 13 (kernel 6.12)",
	Duration: "parallel 27m33s, serial 6m43s, rerun 3s",
	Nodes:    "1 server, 2 agents (containerd 2.1)",
	Extra:    []Field{{"commit", "4f1c2ab"}},
}

// TestRenderGolden compares the block with the reviewed one in testdata; run with -update after a deliberate change
// and review the diff.
func TestRenderGolden(t *testing.T) {
	got := Render(testSummary(t), testMeta)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Render (-%s +got):\n%s", golden, diff)
	}
	if again := Render(testSummary(t), testMeta); again != got {
		t.Errorf("a second Render differs")
	}
}

func TestRenderNoFailures(t *testing.T) {
	run := Run{Tests: []Result{{Name: nameDNS, SIG: "sig-network", Status: StatusPassed}}}
	got := Render(Summarize(run, nil, Causes{}), Meta{})
	for _, want := range []string{
		"**1 of 1 [Conformance] tests pass (100.0 %)**; of the 1 whose features exist today, 1 passes; 0 need features later issues bring\n",
		"| time in tests | 0s (the sum of the tests' durations) |\n",
		"## Failures\n\nNo [Conformance] test failed.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"| date |", "Suite-level failures", "### unclassified"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("unexpected %q in:\n%s", unwanted, got)
		}
	}
}

func TestFirstLine(t *testing.T) {
	long := strings.Repeat("é", maxMessage+10)
	tests := []struct{ msg, want string }{
		{"[FAILED] pods \"x\" is forbidden\nIn [It] at: k8s.io/kubernetes/test/e2e/node/pods.go:1 @ 12/05/26", `pods "x" is forbidden`},
		{"\n\n  [TIMEDOUT] A spec timeout occurred\nIn [It] at: x.go:1", "[TIMEDOUT] A spec timeout occurred"},
		{"[PANICKED] Test Panicked\nIn [It] at: /usr/local/go/src/runtime/panic.go:262 @ 12/05/26\n\nruntime error: invalid memory address\n\nFull Stack Trace", "[PANICKED] runtime error: invalid memory address"},
		{"[PANICKED] Test Panicked", "[PANICKED] Test Panicked"},
		{"[FAILED] " + long, strings.Repeat("é", maxMessage-1) + "…"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := firstLine(tt.msg); got != tt.want {
			t.Errorf("firstLine(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestCodeSpanAndCell(t *testing.T) {
	tests := []struct{ in, span, cell string }{
		{"plain", "`plain`", "`plain`"},
		{"a | b", "`a | b`", "`a \\| b`"},
		{"if `immutable` field", "``if `immutable` field``", "``if `immutable` field``"},
		{"`x` and ``y``", "``` `x` and ``y`` ```", "``` `x` and ``y`` ```"},
		{"two\nlines  and\tspaces", "`two lines and spaces`", "`two lines and spaces`"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := codeSpan(tt.in); got != tt.span {
			t.Errorf("codeSpan(%q) = %q, want %q", tt.in, got, tt.span)
		}
		if got := cell(codeSpan(tt.in)); got != tt.cell {
			t.Errorf("cell(codeSpan(%q)) = %q, want %q", tt.in, got, tt.cell)
		}
	}
}

func TestSplice(t *testing.T) {
	const block = "**1 of 1**\n\n## Run\n"
	const inner = BeginMarker + "\n" + block + EndMarker
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr bool
	}{
		{"replaces the block, keeps the rest byte for byte",
			"# Title\r\n\nhand-written  \n" + BeginMarker + "\nold\nblock\n" + EndMarker + "\n\n## History\nno newline at end",
			"# Title\r\n\nhand-written  \n" + inner + "\n\n## History\nno newline at end", false},
		{"markers mid-line", "text " + BeginMarker + "old" + EndMarker + " more", "text " + inner + " more", false},
		{"empty block between markers", BeginMarker + EndMarker, inner, false},
		{"no file", "", "# Kubernetes conformance\n\n" + inner + "\n", false},
		{"no markers: the block is appended", "# Mine\n\nnotes\n", "# Mine\n\nnotes\n\n" + inner + "\n", false},
		{"no markers, no final newline", "# Mine", "# Mine\n\n" + inner + "\n", false},
		{"begin only", "a\n" + BeginMarker + "\nb\n", "", true},
		{"end only", "a\n" + EndMarker + "\n", "", true},
		{"two blocks", inner + "\n" + inner + "\n", "", true},
		{"end before begin", EndMarker + "\n" + BeginMarker + "\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Splice(tt.doc, block)
			if tt.wantErr {
				if !errors.Is(err, ErrMarkers) {
					t.Fatalf("error = %v, want ErrMarkers", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			again, err := Splice(got, block)
			if err != nil || again != got {
				t.Errorf("a second Splice changed the text (err %v):\n%s", err, again)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	s := testSummary(t)
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	const before = "# Kubernetes conformance\n\nHow to run it: `make conformance`.  \n\n"
	const after = "\n\n## Reading\n\nWritten by hand; kept as it is.\n\n| date | passed |\n|---|---|\n| 2026-12-01 | 301 |"
	tests := []struct {
		name string
		old  *string // nil: no file
		want string
	}{
		{"existing file with markers", ptr(before + BeginMarker + "\nstale\n" + EndMarker + after),
			before + BeginMarker + "\n" + string(want) + EndMarker + after},
		{"no file", nil, "# Kubernetes conformance\n\n" + BeginMarker + "\n" + string(want) + EndMarker + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "conformance.md")
			if tt.old != nil {
				if err := os.WriteFile(path, []byte(*tt.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, s, testMeta); err != nil {
				t.Fatal(err)
			}
			first := readFile(t, path)
			if diff := cmp.Diff(tt.want, first); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := WriteFile(path, s, testMeta); err != nil {
				t.Fatal(err)
			}
			if second := readFile(t, path); second != first {
				t.Errorf("a second WriteFile changed the file:\n%s", cmp.Diff(first, second))
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if wantMode := map[bool]os.FileMode{true: 0o600, false: 0o644}[tt.old != nil]; fi.Mode().Perm() != wantMode {
				t.Errorf("mode = %v, want %v", fi.Mode().Perm(), wantMode)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d files, want only the report (no temporary file left)", len(entries))
			}
		})
	}
}

func TestWriteFileBadMarkersKeepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conformance.md")
	const doc = "# Kubernetes conformance\n\n" + BeginMarker + "\nno end marker\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, testSummary(t), testMeta); !errors.Is(err, ErrMarkers) {
		t.Fatalf("error = %v, want ErrMarkers", err)
	}
	if got := readFile(t, path); got != doc {
		t.Errorf("file changed to:\n%s", got)
	}
}

func ptr[T any](v T) *T { return &v }

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
