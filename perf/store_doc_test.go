package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteStoreReportKeepsHandWrittenText: once docs/perf.md has a storeperf block, storeperf replaces only that
// block, and the hand-written text before, between and after the blocks survives.
func TestWriteStoreReportKeepsHandWrittenText(t *testing.T) {
	doc := func(store string) string {
		return "# Performance\n\n| part | run |\n|---|---|\n\n" +
			storeBegin + "\n" + store + "\n" + storeEnd + "\n\n## Store: earlier runs\n\nby hand\n\n" +
			apiBegin + "\n# API\n" + apiEnd + "\n\n## Reading the API numbers\n\n" +
			agentBegin + "\n# Agent\n" + agentEnd + "\n\ntrailing notes\n"
	}
	path := filepath.Join(t.TempDir(), "perf.md")
	if err := os.WriteFile(path, []byte(doc("# Store v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"# Store v2\n\nnumbers\n\n", "# Store v3\n"} {
		if err := WriteStoreReport(path, v); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(doc(strings.TrimRight(v, "\n")), string(got)); diff != "" {
			t.Errorf("after writing %q (-want +got):\n%s", v, diff)
		}
	}
}

// TestWriteStoreReportOldFile: a file from before the storeperf block is rewritten as it always was (the report
// first, then the other blocks in their order, hand-written text dropped), and the report gets its block.
func TestWriteStoreReportOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.md")
	old := "# Old store report\n\nby hand\n\n" + agentBegin + "\n# Agent\n" + agentEnd + "\n\nreading\n\n" +
		apiBegin + "\n# API\n" + apiEnd + "\ntrailing\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteStoreReport(path, "# Store\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := storeBegin + "\n# Store\n" + storeEnd + "\n\n" + agentBegin + "\n# Agent\n" + agentEnd + "\n\n" +
		apiBegin + "\n# API\n" + apiEnd + "\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPerfDocStoreBlock: the checked-in docs/perf.md has storeperf's block, so that `make perf` keeps its
// contents table, readings and histories; everything outside the block survives a rewrite.
func TestPerfDocStoreBlock(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "docs", "perf.md"))
	if err != nil {
		t.Fatal(err)
	}
	i, j := storeBlockMarkers.find(string(src))
	if i < 0 {
		t.Fatalf("docs/perf.md has no %s … %s block", storeBegin, storeEnd)
	}
	path := filepath.Join(t.TempDir(), "perf.md")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteStoreReport(path, "# Store\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := string(src[:i]) + storeBegin + "\n# Store\n" + string(src[j:])
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("outside the store block (-want +got):\n%s", diff)
	}
}
