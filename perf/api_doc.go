package perf

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// docs/perf.md holds two generated reports: storeperf's owns the file, apiperf's owns the block between these
// markers at its end. Each writer keeps the other's part.
const (
	apiBegin = "<!-- apiperf:begin -->"
	apiEnd   = "<!-- apiperf:end -->"
)

// spliceAPISection returns doc with the apiperf block replaced by section (which carries no markers), or with
// the block appended at the end when doc has none. Nothing outside the block changes.
func spliceAPISection(doc, section string) string {
	block := apiBegin + "\n" + strings.TrimRight(section, "\n") + "\n" + apiEnd + "\n"
	i := strings.Index(doc, apiBegin)
	j := strings.Index(doc, apiEnd)
	if i >= 0 && j > i {
		rest := strings.TrimPrefix(doc[j+len(apiEnd):], "\n")
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

// apiBlock is doc's apiperf block, markers included, or "" when it has none.
func apiBlock(doc string) string {
	i := strings.Index(doc, apiBegin)
	j := strings.Index(doc, apiEnd)
	if i < 0 || j < i {
		return ""
	}
	return doc[i:j+len(apiEnd)] + "\n"
}

// WriteAPIReport replaces the apiperf block of the markdown file at path with section (creating the file, or
// appending the block, when needed).
func WriteAPIReport(path, section string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(path, []byte(spliceAPISection(string(doc), section)), 0o644)
}

// WriteStoreReport writes storeperf's report md to path, keeping at its end the apiperf block the file already
// has, so that re-running either harness never erases the other's numbers.
func WriteStoreReport(path, md string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if block := apiBlock(string(old)); block != "" {
		md = strings.TrimRight(md, "\n") + "\n\n" + block
	}
	return os.WriteFile(path, []byte(md), 0o644)
}
