package pgserver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// ErrNoBinaries means no PostgreSQL server binaries were found on this machine.
var ErrNoBinaries = errors.New("pgserver: no PostgreSQL server binaries found (looked in PATH and /usr/lib/postgresql/*/bin); " +
	"install them with: apt-get install -y postgresql (Debian/Ubuntu), or pass --database-url")

// FindBinDir returns a directory holding initdb and postgres.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

// versionOf extracts N from /usr/lib/postgresql/N/bin; non-numeric versions sort first.
func versionOf(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
