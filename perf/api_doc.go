package perf

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// docs/perf.md holds the generated reports of every harness, each in a block between its markers, and
// hand-written text around them (a contents table, readings, histories of earlier runs). Each writer replaces only its
// own block (appending it when the file has none) and keeps everything else. storeperf's report came first and once
// owned the whole file: when the file has no storeperf block (a file written before the block existed), storeperf
// still rewrites the file, its report first and every other block carried over after it, and the hand-written
// text is dropped; from then on the file has the block.
const (
	storeBegin = "<!-- storeperf:begin -->"
	storeEnd   = "<!-- storeperf:end -->"
	apiBegin   = "<!-- apiperf:begin -->"
	apiEnd     = "<!-- apiperf:end -->"
	schedBegin = "<!-- schedperf:begin -->"
	schedEnd   = "<!-- schedperf:end -->"
	agentBegin = "<!-- agentperf:begin -->"
	agentEnd   = "<!-- agentperf:end -->"
)

// docBlock is one harness's marked block of docs/perf.md.
type docBlock struct{ begin, end string }

var (
	storeBlockMarkers = docBlock{storeBegin, storeEnd}
	apiBlockMarkers   = docBlock{apiBegin, apiEnd}
	schedBlockMarkers = docBlock{schedBegin, schedEnd}
	agentBlockMarkers = docBlock{agentBegin, agentEnd}
	// allBlocks are the blocks storeperf keeps when it rewrites the file.
	allBlocks = []docBlock{apiBlockMarkers, schedBlockMarkers, agentBlockMarkers, dashBlockMarkers}
)

// splice returns doc with the block replaced by section (which carries no markers), or with the block appended
// at the end when doc has none. Nothing outside the block changes.
func (m docBlock) splice(doc, section string) string {
	block := m.begin + "\n" + strings.TrimRight(section, "\n") + "\n" + m.end + "\n"
	i, j := m.find(doc)
	if i >= 0 {
		rest := strings.TrimPrefix(doc[j+len(m.end):], "\n")
		return doc[:i] + block + rest
	}
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	if doc != "" {
		doc += "\n"
	}
	return doc + block
}

// find returns the offsets of the block's begin and end markers in doc, or -1, -1.
func (m docBlock) find(doc string) (int, int) {
	i := strings.Index(doc, m.begin)
	if i < 0 {
		return -1, -1
	}
	j := strings.Index(doc[i:], m.end)
	if j < 0 {
		return -1, -1
	}
	return i, i + j
}

// block is doc's block, markers included, or "" when it has none.
func (m docBlock) block(doc string) string {
	i, j := m.find(doc)
	if i < 0 {
		return ""
	}
	return doc[i:j+len(m.end)] + "\n"
}

// write replaces the block of the markdown file at path with section (creating the file, or appending the
// block, when needed).
func (m docBlock) write(path, section string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeReport(path, m.splice(string(doc), section))
}

// writeReport writes a markdown report, creating its directory when needed (results/ is not checked in).
func writeReport(path, md string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(md), 0o644)
}

// spliceAPISection returns doc with the apiperf block replaced by section (see docBlock.splice).
func spliceAPISection(doc, section string) string { return apiBlockMarkers.splice(doc, section) }

// WriteAPIReport replaces the apiperf block of the markdown file at path with section (creating the file, or
// appending the block, when needed); the rest of the file is kept.
func WriteAPIReport(path, section string) error { return apiBlockMarkers.write(path, section) }

// WriteSchedReport replaces the schedperf block of the markdown file at path with section (creating the file,
// or appending the block, when needed); the rest of the file is kept.
func WriteSchedReport(path, section string) error { return schedBlockMarkers.write(path, section) }

// WriteAgentReport replaces the agentperf block of the markdown file at path with section (creating the file,
// or appending the block, when needed); the rest of the file is kept.
func WriteAgentReport(path, section string) error { return agentBlockMarkers.write(path, section) }

// WriteStoreReport writes storeperf's report md to the markdown file at path. When the file has a storeperf block
// it replaces only that block, like every other harness. Otherwise (no file, or one from before the block) it
// writes the report in its block and then the other harnesses' blocks the file already has, in their order, so
// that re-running any harness never erases another's numbers.
func WriteStoreReport(path, md string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if i, _ := storeBlockMarkers.find(string(old)); i >= 0 {
		return writeReport(path, storeBlockMarkers.splice(string(old), md))
	}
	type kept struct {
		at    int
		block string
	}
	var blocks []kept
	for _, m := range allBlocks {
		if i, _ := m.find(string(old)); i >= 0 {
			blocks = append(blocks, kept{i, m.block(string(old))})
		}
	}
	slices.SortFunc(blocks, func(a, b kept) int { return a.at - b.at })
	doc := storeBlockMarkers.splice("", md)
	for _, b := range blocks {
		doc += "\n" + b.block
	}
	return writeReport(path, doc)
}
