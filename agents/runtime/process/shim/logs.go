package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// CRI log format, as kubelet reads it (and containerd writes it): one entry
// per line, "<RFC3339Nano timestamp> <stream> <tag> <content>\n", where tag
// is F for a full line and P for a part of a line longer than maxLogLine.
const (
	logTagFull       = "F"
	logTagPartial    = "P"
	maxLogLine       = 16 << 10
	rotatedTimestamp = "20060102-150405" // kubelet's suffix for rotated logs
)

// criLog appends CRI-format entries to a file and rotates it by size: the
// live file keeps its name (0.log), rotated ones get a timestamp suffix
// (0.log.20250102-150405) and only the newest maxFiles-1 are kept.
type criLog struct {
	path     string
	maxBytes int64
	maxFiles int
	now      func() time.Time

	mu   sync.Mutex // guards f and size; entries of stdout and stderr interleave whole
	f    *os.File
	size int64
}

func openCRILog(path string, maxBytes int64, maxFiles int) (*criLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	l := &criLog{path: path, maxBytes: maxBytes, maxFiles: maxFiles, now: time.Now}
	return l, l.open()
}

func (l *criLog) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Close closes the live file.
func (l *criLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// copyFrom writes r's lines as entries of stream until r ends.
func (l *criLog) copyFrom(stream string, r io.Reader) error {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		tag := logTagFull
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			tag = logTagPartial
		case len(line) > 0 && line[len(line)-1] == '\n':
			line = line[:len(line)-1]
		}
		if len(line) > 0 || err == nil {
			if werr := l.writeEntry(stream, tag, line); werr != nil {
				return werr
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// writeEntry appends one entry, rotating first if it would not fit.
func (l *criLog) writeEntry(stream, tag string, content []byte) error {
	buf := make([]byte, 0, len(content)+64)
	buf = l.now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, content...)
	buf = append(buf, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(buf)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(buf)
	l.size += int64(n)
	return err
}

// rotate renames the live file aside and opens a new one; l.mu must be held.
func (l *criLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if l.maxFiles > 1 {
		dst := l.path + "." + l.now().UTC().Format(rotatedTimestamp)
		for i := 1; fileExists(dst); i++ {
			dst = fmt.Sprintf("%s.%s-%04d", l.path, l.now().UTC().Format(rotatedTimestamp), i)
		}
		if err := os.Rename(l.path, dst); err != nil {
			return err
		}
	} else if err := os.Remove(l.path); err != nil {
		return err
	}
	l.prune()
	return l.open()
}

// prune removes the oldest rotated files beyond maxFiles-1.
func (l *criLog) prune() {
	rotated, _ := filepath.Glob(l.path + ".*")
	sort.Strings(rotated) // timestamps sort chronologically
	for len(rotated) > l.maxFiles-1 {
		_ = os.Remove(rotated[0])
		rotated = rotated[1:]
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
