package vmtest

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// cpioWriter writes a newc ("070701") cpio archive, the format of the kernel's initramfs.
type cpioWriter struct {
	w   *bufio.Writer
	ino int
	err error
}

func newCPIO(w io.Writer) *cpioWriter { return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20)} }

// header writes an entry's header and name; size bytes of data follow.
func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor int) {
	if c.err != nil {
		return
	}
	c.ino++
	name = strings.TrimPrefix(name, "/")
	_, c.err = fmt.Fprintf(c.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	if c.err == nil {
		_, c.err = c.w.WriteString(name + "\x00")
	}
	c.pad(110 + len(name) + 1)
}

func (c *cpioWriter) pad(n int) {
	if c.err == nil && n%4 != 0 {
		_, c.err = c.w.Write(make([]byte, 4-n%4))
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0, 0, 0) }

func (c *cpioWriter) symlink(name, target string) {
	c.header(name, 0o120777, int64(len(target)), 0, 0)
	if c.err == nil {
		_, c.err = c.w.WriteString(target)
	}
	c.pad(len(target))
}

func (c *cpioWriter) charDev(name string, major, minor int) {
	c.header(name, 0o020600, 0, major, minor)
}

func (c *cpioWriter) file(name string, mode uint32, data []byte) {
	c.header(name, 0o100000|mode, int64(len(data)), 0, 0)
	if c.err == nil {
		_, c.err = c.w.Write(data)
	}
	c.pad(len(data))
}

// copyFile adds the file at path as name.
func (c *cpioWriter) copyFile(name string, mode uint32, path string) {
	if c.err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		c.err = err
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.err = err
		return
	}
	c.header(name, 0o100000|mode, st.Size(), 0, 0)
	if c.err == nil {
		_, c.err = io.Copy(c.w, f)
	}
	c.pad(int(st.Size() % 4))
}

func (c *cpioWriter) close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.err
}

// busyboxApplets are the commands the guest's /init and tests may run.
var busyboxApplets = []string{"sh", "mount", "insmod", "poweroff", "ip", "cat", "echo", "ls", "sysctl", "mkdir"}

// modules finds kernel modules by name in a tree of .ko (or .ko.xz, .ko.zst) files.
type modules struct {
	files map[string]string // module name (underscores) → path
}

func findModules(dir string) (*modules, error) {
	m := &modules{files: map[string]string{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		for _, ext := range []string{".ko", ".ko.xz", ".ko.zst"} {
			if base, ok := strings.CutSuffix(name, ext); ok {
				m.files[strings.ReplaceAll(base, "-", "_")] = path
			}
		}
		return nil
	})
	return m, err
}

// load reads module name (decompressed: busybox's insmod takes plain ELF).
func (m *modules) load(name string) ([]byte, error) {
	path, ok := m.files[name]
	if !ok {
		return nil, fmt.Errorf("no kernel module %s", name)
	}
	switch {
	case strings.HasSuffix(path, ".xz"):
		return exec.Command("xz", "-dc", path).Output()
	case strings.HasSuffix(path, ".zst"):
		return exec.Command("zstd", "-dc", path).Output()
	}
	return os.ReadFile(path)
}

// order is the modules to load for names, each after the modules it depends on (the depends= of its .modinfo).
func (m *modules) order(names []string) ([]string, map[string][]byte, error) {
	var out []string
	data := map[string][]byte{}
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		if _, done := data[name]; done {
			return nil
		}
		for _, p := range path {
			if p == name {
				return fmt.Errorf("modules depend on each other: %v", append(path, name))
			}
		}
		b, err := m.load(name)
		if err != nil {
			return err
		}
		deps, err := dependsOf(b)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		for _, d := range deps {
			if err := visit(d, append(path, name)); err != nil {
				return err
			}
		}
		data[name] = b
		out = append(out, name)
		return nil
	}
	for _, n := range names {
		if err := visit(strings.ReplaceAll(n, "-", "_"), nil); err != nil {
			return nil, nil, err
		}
	}
	return out, data, nil
}

// dependsOf is the depends= list of a module's .modinfo section.
func dependsOf(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	info, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// isStatic reports whether the ELF file at path has no interpreter (runs without a dynamic loader).
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
