package kubelet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errSubPathEscapes is a sub path that resolves outside its volume.
var errSubPathEscapes = errors.New("the subPath resolves outside the volume")

// subPathIn returns the host path of sub inside the volume at root. Missing directories are created one by one
// with the mode of the volume's root (its setgid bit with an fsGroup, tmpfs's sticky bit), and so with its group,
// as upstream's kubelet creates them; nothing is created through a symlink leading out of the volume, and a sub
// path that resolves outside it (a symlink a container made) is refused.
func subPathIn(root, sub string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	// inside reports whether p, resolved, is in the volume (a path that cannot be resolved is not).
	inside := func(p string) bool {
		real, err := filepath.EvalSymlinks(p)
		return err == nil && (real == realRoot || strings.HasPrefix(real, realRoot+string(filepath.Separator)))
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	rootSt, err := r.Stat(".")
	if err != nil {
		return "", err
	}
	parts := strings.Split(filepath.Clean(sub), string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		switch err := r.Mkdir(p, 0o700); {
		case err == nil:
			if err := r.Chmod(p, rootSt.Mode()); err != nil { // past the umask, with setgid and sticky
				return "", err
			}
		case errors.Is(err, fs.ErrExist):
		case !inside(filepath.Join(root, filepath.Join(parts[:i]...))):
			return "", errSubPathEscapes // the root refused to follow a symlink out
		default:
			return "", err
		}
	}
	host := filepath.Join(root, sub)
	if !inside(host) {
		return "", errSubPathEscapes
	}
	return host, nil
}
