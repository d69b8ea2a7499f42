package registries

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Modes of what WriteHostsDir writes: containerd only reads them, and nothing in them is secret (credentials
// never go into hosts.toml).
const (
	dirMode  fs.FileMode = 0o755
	fileMode fs.FileMode = 0o644
)

// hostsFileName is the file containerd reads in a host directory.
const hostsFileName = "hosts.toml"

// WriteHostsDir makes dir the hosts directory of c, for containerd's CRI plugin to read as its registry
// config_path: one <host>/hosts.toml per registry that has mirrors, TLS settings or credentials, and
// _default/hosts.toml for the wildcard's mirrors (see the package documentation). dir belongs to the caller's
// agent alone: everything else in it is removed.
//
// The change is atomic: the new directory is written beside dir (as .<name>.new-*, in dir's parent) and
// exchanged with it in one rename (RENAME_EXCHANGE), so containerd reads either the old configuration or the new
// one. On a filesystem without RENAME_EXCHANGE, dir is moved aside and the new one renamed into place; a pull in
// between sees no configuration. When dir already holds exactly c's files, nothing is written. Directories are
// created 0755, files 0644, whatever the umask.
//
// dir must be an absolute path below /, its parent must exist, and c must be valid (Validate runs first; its error is returned as is). Calls for
// one dir must not overlap: each removes the leftovers of interrupted calls. Other errors are I/O errors, with the
// path involved; after one, dir is unchanged, except when the error says the new directory is in place and only
// the old content could not be removed (the next call removes it).
func (c *Config) WriteHostsDir(dir string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return fmt.Errorf("registries: hosts directory %q: give an absolute path below /", dir)
	}
	files := c.hostsFiles()
	same, err := holds(dir, files)
	if err != nil || same {
		return err
	}
	parent := filepath.Dir(dir)
	prefix := "." + filepath.Base(dir) + ".new-"
	if err := removeLeftovers(parent, prefix); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return fmt.Errorf("registries: %w", err)
	}
	if err := fill(tmp, files); err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	old, err := replace(tmp, dir)
	if err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("registries: the new hosts directory is in place, but the old one is left: %w", err)
		}
	}
	return nil
}

// holds reports whether dir holds exactly files, with the modes WriteHostsDir gives them. A missing dir holds
// nothing; anything at dir other than a directory is an error.
func holds(dir string, files []hostsFile) (bool, error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("registries: %w", err)
	case !fi.IsDir():
		return false, fmt.Errorf("registries: %s is not a directory", dir)
	case fi.Mode().Perm() != dirMode:
		return false, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("registries: %w", err)
	}
	if len(ents) != len(files) {
		return false, nil
	}
	for _, f := range files {
		if !holdsFile(filepath.Join(dir, f.dir), f.render()) {
			return false, nil
		}
	}
	return true, nil
}

// holdsFile reports whether hostDir is a directory holding only a hosts.toml with content want.
func holdsFile(hostDir string, want []byte) bool {
	fi, err := os.Lstat(hostDir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != dirMode {
		return false
	}
	ents, err := os.ReadDir(hostDir)
	if err != nil || len(ents) != 1 || ents[0].Name() != hostsFileName || !ents[0].Type().IsRegular() {
		return false
	}
	p := filepath.Join(hostDir, hostsFileName)
	fi, err = os.Lstat(p)
	if err != nil || fi.Mode().Perm() != fileMode {
		return false
	}
	got, err := os.ReadFile(p)
	return err == nil && bytes.Equal(got, want)
}

// removeLeftovers removes what interrupted calls left in parent: entries whose names start with prefix.
func removeLeftovers(parent, prefix string) error {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("registries: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return fmt.Errorf("registries: removing a leftover: %w", err)
			}
		}
	}
	return nil
}

// fill writes files into the empty directory root, and flushes them to disk.
func fill(root string, files []hostsFile) error {
	if err := os.Chmod(root, dirMode); err != nil {
		return fmt.Errorf("registries: %w", err)
	}
	for _, f := range files {
		hostDir := filepath.Join(root, f.dir)
		if err := os.Mkdir(hostDir, dirMode); err != nil {
			return fmt.Errorf("registries: %w", err)
		}
		if err := os.Chmod(hostDir, dirMode); err != nil {
			return fmt.Errorf("registries: %w", err)
		}
		if err := writeFile(filepath.Join(hostDir, hostsFileName), f.render()); err != nil {
			return err
		}
		if err := syncDir(hostDir); err != nil {
			return err
		}
	}
	return syncDir(root)
}

// writeFile creates path with content b, mode fileMode, and flushes it.
func writeFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return fmt.Errorf("registries: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(fileMode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("registries: writing %s: %w", path, err)
	}
	return nil
}

// syncDir flushes a directory's entries to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("registries: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("registries: syncing %s: %w", dir, err)
	}
	return nil
}

// exchange swaps two paths atomically (renameat2 RENAME_EXCHANGE, Linux 3.15). A variable so that tests can take
// the path of filesystems without it.
var exchange = func(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return &os.LinkError{Op: "renameat2 RENAME_EXCHANGE", Old: a, New: b, Err: err}
	}
	return nil
}

// replace puts the directory tmp at dir. It returns where dir's old content went ("" when there was none), for
// the caller to remove; after an error, dir is as it was.
func replace(tmp, dir string) (old string, err error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, dir); err != nil {
			return "", fmt.Errorf("registries: %w", err)
		}
		return "", nil
	}
	err = exchange(tmp, dir)
	if err == nil {
		return tmp, nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return "", fmt.Errorf("registries: %w", err)
	}
	// No RENAME_EXCHANGE on this filesystem: move dir aside, then tmp in.
	old = tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return "", fmt.Errorf("registries: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", errors.Join(fmt.Errorf("registries: %w", err), os.Rename(old, dir))
	}
	return old, nil
}
