package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The report's block in its file is everything between these markers, each on a line of its own.
const (
	BeginMarker = "<!-- conformance:begin -->"
	EndMarker   = "<!-- conformance:end -->"
)

// ErrMarkers is returned when a file's markers are not one begin marker followed by one end marker.
var ErrMarkers = errors.New("report: malformed conformance markers")

// newFileTitle starts a file that WriteFile creates.
const newFileTitle = "# Kubernetes conformance\n\n"

// Splice returns doc with the text between its markers replaced by block, and every byte outside them (the
// markers included) unchanged. A doc without markers gets the block, with markers, appended after a blank line;
// an empty doc becomes a new file with a title. Markers that are not exactly one begin marker before one end
// marker are an ErrMarkers: the file was edited in a way a program should not guess about.
func Splice(doc, block string) (string, error) {
	content := "\n" + strings.TrimRight(block, "\n") + "\n"
	nb, ne := strings.Count(doc, BeginMarker), strings.Count(doc, EndMarker)
	switch {
	case nb == 0 && ne == 0 && doc == "":
		return newFileTitle + BeginMarker + content + EndMarker + "\n", nil
	case nb == 0 && ne == 0:
		sep := "\n"
		if !strings.HasSuffix(doc, "\n") {
			sep = "\n\n"
		}
		return doc + sep + BeginMarker + content + EndMarker + "\n", nil
	case nb != 1 || ne != 1:
		return "", fmt.Errorf("%w: %d begin and %d end markers, want one of each", ErrMarkers, nb, ne)
	}
	i := strings.Index(doc, BeginMarker) + len(BeginMarker)
	j := strings.Index(doc, EndMarker)
	if j < i {
		return "", fmt.Errorf("%w: the end marker comes before the begin marker", ErrMarkers)
	}
	return doc[:i] + content + doc[j:], nil
}

// WriteFile renders s and meta (Render) into the block of the file at path (Splice), creating the file when it
// does not exist. The file is replaced atomically: the new text goes to a temporary file in the same directory,
// which is renamed over it, so a reader sees the old file or the new one, never a part. An existing file keeps
// its permissions.
func WriteFile(path string, s Summary, meta Meta) error {
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	doc, err := Splice(string(old), Render(s, meta))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeAtomic(path, []byte(doc), mode)
}

func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
