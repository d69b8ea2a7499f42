package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// fsEntry is one entry of a layer: a directory, a regular file (from data or from a host file) or a symlink.
type fsEntry struct {
	mode     int64  // permission bits (and setuid etc.)
	data     []byte // a regular file's contents, when from is ""
	from     string // a host file whose contents to copy (following symlinks)
	linkname string // a symlink's target
	dir      bool
}

// tree is the contents of one layer, keyed by absolute path in the image. Parent directories are added when the
// layer is written, so a tree lists only what matters.
type tree map[string]fsEntry

func (t tree) file(p string, mode int64, data []byte) { t[p] = fsEntry{mode: mode, data: data} }
func (t tree) hostFile(p string, mode int64, from string) {
	t[p] = fsEntry{mode: mode, from: from}
}
func (t tree) symlink(p, target string) { t[p] = fsEntry{linkname: target} }
func (t tree) dir(p string, mode int64) { t[p] = fsEntry{dir: true, mode: mode} }

// layer writes the tree as a layer: entries in path order, every parent directory before its children (0755,
// root-owned), fixed times, so the same tree gives the same digest.
func (t tree) layer() (v1.Layer, error) {
	all := map[string]fsEntry{}
	for p, e := range t {
		p = path.Clean("/" + p)
		all[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				if _, ok := t[d]; !ok {
					all[d] = fsEntry{dir: true, mode: 0o755}
				}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := all[p]
		name := strings.TrimPrefix(p, "/")
		h := &tar.Header{Name: name, Mode: e.mode, Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case e.linkname != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.linkname, 0o777
		default:
			data := e.data
			if e.from != "" {
				var err error
				if data, err = os.ReadFile(e.from); err != nil {
					return nil, fmt.Errorf("images: %s: %w", p, err)
				}
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return l, nil
}

// addProgram adds a dynamically linked host program at dst with every shared library it loads (as ldd resolves
// them on this machine) at the path ldd names, and the dynamic loader: the program runs in the image as it runs
// here. A static program is added alone.
func (t tree) addProgram(ctx context.Context, dst, src string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	t.hostFile(dst, 0o755, src)
	libs, err := sharedLibraries(ctx, src)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		t.hostFile(lib, 0o755, lib)
	}
	return nil
}

// sharedLibraries lists the absolute paths of the libraries ldd says program loads, the loader included; none
// for a static program.
func sharedLibraries(ctx context.Context, program string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", program).Output()
	if err != nil {
		// ldd exits 1 for a static binary ("not a dynamic executable").
		var ee *exec.ExitError
		if errors.As(err, &ee) && (bytes.Contains(ee.Stderr, []byte("not a dynamic executable")) ||
			bytes.Contains(out, []byte("statically linked"))) {
			return nil, nil
		}
		return nil, fmt.Errorf("images: ldd %s: %w", program, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
		// "linux-vdso.so.1 (0x...)" (the kernel's: no file), "statically linked".
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>":
			if f[2] == "not" {
				return nil, fmt.Errorf("images: %s needs %s, which this machine lacks", program, f[0])
			}
			if filepath.IsAbs(f[2]) {
				libs = append(libs, f[2])
			}
		case len(f) >= 1 && filepath.IsAbs(f[0]):
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}
