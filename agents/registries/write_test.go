package registries

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func mirrorsOf(hosts ...string) *Config {
	c := &Config{Mirrors: map[string]Mirror{}}
	for _, h := range hosts {
		c.Mirrors[h] = Mirror{Endpoints: []string{"https://cache.example.com"}}
	}
	return c
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteHostsDirReplaces checks that a second write leaves exactly the second configuration: registries no
// longer configured and anything else put in the directory are gone, and nothing is left beside it.
func TestWriteHostsDirReplaces(t *testing.T) {
	for _, withExchange := range []bool{true, false} {
		name := "exchange"
		if !withExchange {
			name = "no exchange"
		}
		t.Run(name, func(t *testing.T) {
			var exchanged []error
			if withExchange {
				saved := exchange
				exchange = func(a, b string) error {
					err := saved(a, b)
					exchanged = append(exchanged, err)
					return err
				}
				t.Cleanup(func() { exchange = saved })
			} else {
				withoutExchange(t)
			}
			parent := t.TempDir()
			dir := filepath.Join(parent, "hosts.d")
			if err := mirrorsOf("a.example.com", "b.example.com", "*").WriteHostsDir(dir); err != nil {
				t.Fatal(err)
			}
			if got, want := dirNames(t, dir), []string{"_default", "a.example.com", "b.example.com"}; !slices.Equal(got, want) {
				t.Fatalf("after the first write: %q, want %q", got, want)
			}
			// Things someone else put there.
			writeTestFile(t, filepath.Join(dir, "b.example.com", "ca.crt"), []byte("x"))
			writeTestFile(t, filepath.Join(dir, "stray"), []byte("x"))
			if err := os.Mkdir(filepath.Join(dir, "c.example.com"), 0o700); err != nil {
				t.Fatal(err)
			}

			if err := mirrorsOf("b.example.com", "c.example.com").WriteHostsDir(dir); err != nil {
				t.Fatal(err)
			}
			if diff := slices.Compare(slices.Sorted(maps.Keys(readHostsDir(t, dir))), []string{"b.example.com", "c.example.com"}); diff != 0 {
				t.Errorf("after the second write: %q, want b.example.com and c.example.com only", dirNames(t, dir))
			}
			if got := dirNames(t, parent); !slices.Equal(got, []string{"hosts.d"}) {
				t.Errorf("beside the hosts directory: %q, want nothing else", got)
			}

			if err := (&Config{}).WriteHostsDir(dir); err != nil {
				t.Fatal(err)
			}
			if got := dirNames(t, dir); len(got) != 0 {
				t.Errorf("after writing an empty configuration: %q, want an empty directory", got)
			}
			if withExchange && (len(exchanged) != 2 || errors.Join(exchanged...) != nil) {
				// The test's filesystem should have RENAME_EXCHANGE (ext4, xfs, btrfs, tmpfs, overlayfs do).
				t.Errorf("RENAME_EXCHANGE: %v, want two successful exchanges", exchanged)
			}
		})
	}
}

// withoutExchange makes WriteHostsDir take the path of filesystems without RENAME_EXCHANGE for one test.
func withoutExchange(t *testing.T) {
	saved := exchange
	exchange = func(a, b string) error { return &os.LinkError{Op: "renameat2", Old: a, New: b, Err: unix.EINVAL} }
	t.Cleanup(func() { exchange = saved })
}

func TestWriteHostsDirModes(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := filepath.Join(t.TempDir(), "hosts.d")
	if err := mirrorsOf("a.example.com").WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{
		dir:                                 0o755 | fs.ModeDir,
		filepath.Join(dir, "a.example.com"): 0o755 | fs.ModeDir,
		filepath.Join(dir, "a.example.com", "hosts.toml"): 0o644,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
}

// TestWriteHostsDirUnchanged checks that writing the configuration a directory already holds leaves it alone,
// and that a change of mode or content is repaired.
func TestWriteHostsDirUnchanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts.d")
	c := mirrorsOf("a.example.com", "b.example.com")
	if err := c.WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("writing the same configuration again replaced the directory")
	}

	file := filepath.Join(dir, "a.example.com", "hosts.toml")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []func() error{
		func() error { return os.WriteFile(file, []byte("server = \"https://elsewhere\"\n"), 0o644) },
		func() error { return os.Chmod(file, 0o600) },
		func() error { return os.Chmod(filepath.Join(dir, "b.example.com"), 0o700) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteHostsDir(dir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		bi, err := os.Stat(filepath.Join(dir, "b.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || fi.Mode() != 0o644 || bi.Mode().Perm() != 0o755 {
			t.Errorf("not repaired: mode %v, b's mode %v, content:\n%s", fi.Mode(), bi.Mode(), got)
		}
	}
}

// TestWriteHostsDirLeftovers checks that what an interrupted write left beside the directory is removed, and
// nothing else there.
func TestWriteHostsDirLeftovers(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "hosts.d")
	for _, p := range []string{".hosts.d.new-123", ".hosts.d.new-456.old", ".other.new-1", "hosts.d.new-2"} {
		if err := os.MkdirAll(filepath.Join(parent, p, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := mirrorsOf("a.example.com").WriteHostsDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, parent), []string{".other.new-1", "hosts.d", "hosts.d.new-2"}; !slices.Equal(got, want) {
		t.Errorf("beside the hosts directory: %q, want %q", got, want)
	}
}

func TestWriteHostsDirErrors(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	writeTestFile(t, file, []byte("x"))
	valid := mirrorsOf("a.example.com")
	for _, tt := range []struct {
		name, dir string
		c         *Config
		want      string
	}{
		{"relative", "hosts.d", valid, "absolute path"},
		{"root", "/", valid, "absolute path"},
		{"not a directory", file, valid, "not a directory"},
		{"parent missing", filepath.Join(parent, "missing", "hosts.d"), valid, "no such file"},
		{"invalid configuration", filepath.Join(parent, "hosts.d"), &Config{Mirrors: map[string]Mirror{"a.example.com": {Endpoints: []string{"ftp://x"}}}}, "http:// or https://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.WriteHostsDir(tt.dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WriteHostsDir(%q) = %v, want an error saying %q", tt.dir, err, tt.want)
			}
			if tt.name == "invalid configuration" && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
		})
	}
	if got := dirNames(t, parent); !slices.Equal(got, []string{"file"}) {
		t.Errorf("after failed writes, the parent holds %q, want only file", got)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("the file at the hosts directory's place was changed: %q, %v", b, err)
	}
}
