package images

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestBuild builds every image from this machine's Debian packages and runs the programs the suite's tests run in
// them, each in its image's extracted root (chroot), so a missing library or file shows here rather than as a
// failing conformance test. testdata/agnhost, a script, stands in for agnhost: what matters is that the program
// lands at /agnhost.
func TestBuild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running programs in an image's root needs chroot(2), which needs root (CAP_SYS_CHROOT)")
	}
	nginx, err := DebianNginx(t.Context(), filepath.Join(os.TempDir(), "wheelhouse-conformance-nginx"))
	if err != nil {
		t.Fatal(err)
	}
	built, err := Build(t.Context(), Options{
		Agnhost: "testdata/agnhost", Nonewprivs: "testdata/agnhost", KubernetesSource: "testdata/k8s", Nginx: nginx, Pause: empty.Image,
	})
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]v1.Image{}
	for _, img := range built {
		byRef[img.Ref] = img.Image
	}
	want := []string{
		"e2e-test-images/agnhost:2.66.1", "e2e-test-images/agnhost:2.55", "e2e-test-images/busybox:1.37.0-2",
		"e2e-test-images/glibc-dns-testing:2.1.1", "e2e-test-images/nginx:1.27.0-2", "e2e-test-images/nginx:1.28.0-2",
		"e2e-test-images/kitten:1.8", "e2e-test-images/nautilus:1.8", "e2e-test-images/nonroot:1.5", "e2e-test-images/nonewprivs:1.4", "pause:3.10.2",
	}
	var got []string
	for ref := range byRef {
		got = append(got, ref)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("built %v, want %v", got, want)
	}

	cases := []struct {
		ref        string
		entrypoint []string
		cmd        []string
		user       string
		runs       [][]string // each run in the image's root; its output must contain the last element
	}{
		{ref: "e2e-test-images/busybox:1.37.0-2", cmd: []string{"sh"}, runs: [][]string{
			{"/bin/sh", "-c", "echo hello from $(id -un) | tr a-z A-Z", "HELLO FROM ROOT"},
			{"/bin/sh", "-c", "ls /bin/wget /bin/nslookup /bin/sleep && echo found", "found"},
			// The shell passes on variables whose names are not shell names, as busybox 1.37's ash does.
			{"/bin/env", "data-1=value-1", "/bin/sh", "-c", "env", "data-1=value-1"},
		}},
		{ref: "e2e-test-images/agnhost:2.66.1", entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}, runs: [][]string{
			{"/agnhost", "echo", "agnhost-ran", "agnhost-ran"},
			{"/agnhost-2", "echo", "via-link", "via-link"},
			{"/usr/bin/dig", "-v", "DiG 9."},
			{"/usr/bin/curl", "--version", "curl 7."},
			{"/bin/sh", "-c", "nc -h 2>&1", "OpenBSD netcat"},
			{"/usr/bin/socat", "-V", "socat version"},
			{"/bin/bash", "-c", "echo $BASH_VERSION", "5."},
			{"/usr/sbin/ip", "-V", "iproute2"},
			{"/usr/bin/ss", "-V", "iproute2"},
			{"/usr/bin/getent", "group", "group-defined-in-image", "group-defined-in-image:x:50000:user-defined-in-image"},
			{"/bin/sh", "-c", "id user-defined-in-image", "uid=1000(user-defined-in-image)"},
			{"/bin/sh", "-c", "test -d /uploads && cat /localhost.crt", "not a real certificate"},
		}},
		{ref: "e2e-test-images/kitten:1.8", entrypoint: []string{"/agnhost"}, cmd: []string{"test-webserver"}, runs: [][]string{
			{"/bin/cat", "/kitten.jpg", "/data.json", `"image": "kitten"`},
		}},
		{ref: "e2e-test-images/glibc-dns-testing:2.1.1", cmd: []string{"bash"}, runs: [][]string{
			{"/usr/bin/dig", "-v", "DiG 9."},
			{"/usr/bin/getent", "passwd", "nobody", "nobody:x:65534"},
		}},
		{ref: "e2e-test-images/nginx:1.27.0-2", cmd: []string{"nginx", "-g", "daemon off;"}, runs: [][]string{
			{"/usr/sbin/nginx", "-t", "test is successful"},
			{"/bin/cat", "/usr/share/nginx/html/index.html", "Welcome to nginx!"},
		}},
		{ref: "e2e-test-images/nonroot:1.5", cmd: []string{"sh"}, user: "1234", runs: [][]string{
			{"/bin/sh", "-c", "echo ok", "ok"},
		}},
		{ref: "e2e-test-images/nonewprivs:1.4", cmd: []string{"nnp"}, runs: [][]string{
			{"/usr/local/bin/nnp", "echo", "nnp-ran", "nnp-ran"}, // the test stand-in of nnp is agnhost's
		}},
	}
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			img := byRef[c.ref]
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, c.entrypoint) || !slices.Equal(cf.Config.Cmd, c.cmd) || cf.Config.User != c.user {
				t.Errorf("config: entrypoint %q cmd %q user %q, want %q %q %q",
					cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User, c.entrypoint, c.cmd, c.user)
			}
			if cf.OS != "linux" || !slices.Contains(cf.Config.Env, pathEnv) {
				t.Errorf("config: os %q env %q", cf.OS, cf.Config.Env)
			}
			root := extract(t, img)
			for _, run := range c.runs {
				args, want := run[:len(run)-1], run[len(run)-1]
				cmd := exec.CommandContext(t.Context(), "chroot", append([]string{root}, args...)...)
				cmd.Env = []string{pathEnv}
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), want) {
					t.Errorf("%q in the image: %v, output %q, want it to contain %q", args, err, out, want)
				}
			}
		})
	}

	// nnp is setuid root, as upstream's Dockerfile makes it (extract above keeps permission bits only).
	rc := mutate.Extract(byRef["e2e-test-images/nonewprivs:1.4"])
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no /usr/local/bin/nnp in nonewprivs: %v", err)
		}
		if h.Name == "usr/local/bin/nnp" {
			if h.Mode != 0o4755 || h.Uid != 0 {
				t.Errorf("nnp: mode %o uid %d, want 4755 and root", h.Mode, h.Uid)
			}
			break
		}
	}

	// The two nginx tags are different images (a rollout from one to the other changes something).
	d1, _ := byRef["e2e-test-images/nginx:1.27.0-2"].Digest()
	d2, _ := byRef["e2e-test-images/nginx:1.28.0-2"].Digest()
	if d1 == d2 {
		t.Errorf("nginx 1.27.0-2 and 1.28.0-2 are the same image %s", d1)
	}
}

// TestBuildIsReproducible: two builds give the same digests, so pushing them again changes nothing.
func TestBuildIsReproducible(t *testing.T) {
	base1, err := busyboxTree(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	base2, _ := busyboxTree(t.Context())
	l1, err := base1.layer()
	if err != nil {
		t.Fatal(err)
	}
	l2, err := base2.layer()
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l1.Digest()
	d2, _ := l2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the busybox layer: %s and %s", d1, d2)
	}
}

// TestSharedLibraries: a dynamic program's libraries include libc and the loader; a static one has none; a missing
// file is an error.
func TestSharedLibraries(t *testing.T) {
	sh, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	libs, err := sharedLibraries(t.Context(), sh)
	if err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for _, l := range libs {
		libc = libc || strings.Contains(filepath.Base(l), "libc.so")
		loader = loader || strings.HasPrefix(filepath.Base(l), "ld-linux")
	}
	if !libc || !loader {
		t.Errorf("bash's libraries %q: want libc and the loader", libs)
	}
	if bb, err := exec.LookPath("busybox"); err == nil {
		if libs, err := sharedLibraries(t.Context(), bb); err != nil || len(libs) != 0 {
			t.Errorf("static busybox: %q, %v; want none", libs, err)
		}
	}
	if _, err := sharedLibraries(t.Context(), "testdata/no-such-program"); err == nil {
		t.Error("ldd of a missing file: no error")
	}
}

// extract unpacks img's flattened filesystem into a temporary directory.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink(h.Linkname, p); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&os.ModePerm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}
