package install

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// binaries finds the agent binary of an arch and keeps the checksums of the files it served.
type binaries struct {
	dir      string
	explicit map[string]string
	// own is the server's executable, "" when it is not a Linux one (or cannot be found).
	own string

	mu sync.Mutex // guards sums
	// sums holds a file's checksum with the size and modification time it was computed at.
	sums map[string]fileSum
}

type fileSum struct {
	size  int64
	mtime time.Time
	sum   string
}

func newBinaries(dir string, explicit map[string]string) *binaries {
	b := &binaries{dir: dir, explicit: explicit, sums: map[string]fileSum{}}
	if runtime.GOOS == "linux" {
		if exe, err := os.Executable(); err == nil {
			b.own = exe
		}
	}
	return b
}

// path is the file to serve for arch: an explicit one, the server's own executable for its own arch, or
// <dir>/wheelhouse-linux-<arch>. arch must already be a plain word (no separators).
func (b *binaries) path(arch string) (string, bool) {
	if p, ok := b.explicit[arch]; ok {
		return p, true
	}
	if arch == runtime.GOARCH && b.own != "" {
		return b.own, true
	}
	if b.dir == "" {
		return "", false
	}
	p := filepath.Join(b.dir, "wheelhouse-linux-"+arch)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	return p, true
}

// sum is the lower-case hex SHA-256 of the file at path, from the cache while the file's size and modification
// time are those it was computed at. Concurrent first calls may each compute it; the results are equal.
func (b *binaries) sum(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	cached, ok := b.sums[path]
	b.mu.Unlock()
	if ok && cached.size == st.Size() && cached.mtime.Equal(st.ModTime()) {
		return cached.sum, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// The size and time recorded are those of the file hashed (a rename over path is seen next time).
	if st, err = f.Stat(); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	fs := fileSum{size: st.Size(), mtime: st.ModTime(), sum: hex.EncodeToString(h.Sum(nil))}
	b.mu.Lock()
	b.sums[path] = fs
	b.mu.Unlock()
	return fs.sum, nil
}
