package containerdtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PauseImage is the name of the pause image Pause builds, and the sandbox image Start configures by default.
const PauseImage = "wheelhouse.test/pause:1"

// ServerImage is the name of the image Server builds: cmd/wheelhouse/testdata/podserver as /podserver, its
// entrypoint, with ["serve"] as the default arguments (HTTP on :8080; see that program for the others).
const ServerImage = "wheelhouse.test/podserver:1"

// Image is an image archive on disk in the format `docker save` writes (a manifest.json naming the image and
// its tag), which `ctr images import` reads.
type Image struct {
	// Name is the image's reference as CRI lists it, e.g. PauseImage.
	Name string
	// Tar is the path of the archive.
	Tar string
}

// imageSpec says how to build an image: one static Go binary at /<bin> as its entrypoint.
type imageSpec struct {
	name string   // image reference
	pkg  string   // the program's directory, relative to the module root
	bin  string   // binary name, also its path in the image
	cmd  []string // default arguments
}

// lazyImage is an image built at most once per test process.
type lazyImage struct {
	spec imageSpec
	once sync.Once
	img  Image // valid after once, if err is nil
	err  error
}

var (
	pauseImage = &lazyImage{spec: imageSpec{
		name: PauseImage, pkg: "agents/runtime/cri/containerdtest/testdata/pause", bin: "pause",
	}}
	serverImage = &lazyImage{spec: imageSpec{
		name: ServerImage, pkg: "cmd/wheelhouse/testdata/podserver", bin: "podserver", cmd: []string{"serve"},
	}}
)

// BuildPause returns the pause image (containerdtest/testdata/pause: waits for SIGTERM, reaps zombies),
// building it on first use in the process; later calls return the first one's result, error included. The
// build runs in the wheelhouse module (found with `go list -m`, so from any module that requires it too) with
// the go command on the PATH, and is cached under os.TempDir() by the hash of the program's sources and the Go
// version, so later processes reuse it. ctx's values and deadline apply but not its cancellation, as the build
// is shared by every caller of the process: it is bounded by 5 minutes.
func BuildPause(ctx context.Context) (Image, error) {
	return pauseImage.get(ctx)
}

// BuildServer returns ServerImage, built like BuildPause's.
func BuildServer(ctx context.Context) (Image, error) {
	return serverImage.get(ctx)
}

// Pause is BuildPause for a test, failing it if the build fails.
func Pause(t testing.TB) Image {
	t.Helper()
	return mustImage(t, pauseImage)
}

// Server is BuildServer for a test, failing it if the build fails.
func Server(t testing.TB) Image {
	t.Helper()
	return mustImage(t, serverImage)
}

func mustImage(t testing.TB, l *lazyImage) Image {
	t.Helper()
	began := time.Now()
	img, err := l.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("containerdtest: image %s at %s in %s", img.Name, img.Tar, time.Since(began).Round(time.Millisecond))
	return img
}

// get builds the image once; every caller gets that build's result.
func (l *lazyImage) get(ctx context.Context) (Image, error) {
	l.once.Do(func() {
		// Not the caller's cancellation: the build is shared with every other caller of the process (the other
		// tests), which must not see it cancelled because the first one to ask has ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		l.img, l.err = buildImage(ctx, l.spec)
		if l.err != nil {
			l.err = fmt.Errorf("containerdtest: build %s: %w", l.spec.name, l.err)
		}
	})
	return l.img, l.err
}

// Import imports the images with `ctr images import` into the CRI plugin's namespace, unpacked for its
// snapshotter, and waits until CRI's ImageStatus finds each of them (CRI learns of them asynchronously, from
// containerd's events). It stops at the first image that fails.
func (c *Containerd) Import(ctx context.Context, images ...Image) error {
	for _, img := range images {
		out, err := exec.CommandContext(ctx, "ctr", "--address", c.Socket, "-n", Namespace,
			"images", "import", "--no-unpack=false", "--snapshotter", snapshotter, img.Tar).CombinedOutput()
		if err != nil {
			return fmt.Errorf("containerdtest: ctr images import %s: %w\n%s", img.Tar, err, out)
		}
		if err := c.waitImage(ctx, img.Name); err != nil {
			return fmt.Errorf("containerdtest: import %s: %w", img.Name, err)
		}
	}
	return nil
}

// ImportImages is Import for a test, failing it if an import fails.
func (c *Containerd) ImportImages(t testing.TB, images ...Image) {
	t.Helper()
	for _, img := range images {
		began := time.Now()
		if err := c.Import(t.Context(), img); err != nil {
			t.Fatal(err)
		}
		t.Logf("containerdtest: imported %s in %s", img.Name, time.Since(began).Round(time.Millisecond))
	}
}

// waitImage polls CRI's ImageStatus until it finds the image, for 10 s: CRI learns of images ctr imports
// from containerd's events, asynchronously.
func (c *Containerd) waitImage(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err == nil && st.Image != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("CRI ImageStatus does not find it")
			}
			return err
		case <-tick.C:
		}
	}
}

// buildImage builds spec's binary and writes its image archive to the cache, unless it is there already.
func buildImage(ctx context.Context, spec imageSpec) (Image, error) {
	goBin, err := goTool()
	if err != nil {
		return Image{}, err
	}
	env, err := goEnv(ctx, goBin)
	if err != nil {
		return Image{}, err
	}
	modRoot, err := moduleRoot(ctx, goBin)
	if err != nil {
		return Image{}, err
	}
	src := filepath.Join(modRoot, spec.pkg)
	key, err := cacheKey(spec, src, env["GOVERSION"])
	if err != nil {
		return Image{}, err
	}
	cache := filepath.Join(os.TempDir(), "wheelhouse-containerdtest")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Image{}, err
	}
	img := Image{Name: spec.name, Tar: filepath.Join(cache, spec.bin+"-"+key+".tar")}
	if _, err := os.Stat(img.Tar); err == nil {
		return img, nil
	}
	bin, err := goBuild(ctx, goBin, modRoot, spec.pkg)
	if err != nil {
		return Image{}, err
	}
	return img, writeImage(img, spec, bin)
}

// goTool is the go command of the toolchain running the tests: `go test` puts its $GOROOT/bin first in the
// test binary's PATH.
func goTool() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command: %w", err)
	}
	return p, nil
}

// goEnv reads GOVERSION from `go env`.
func goEnv(ctx context.Context, goBin string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "-json", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	return env, nil
}

// wheelhouseModule is the path of the module whose programs the images hold.
const wheelhouseModule = "github.com/wheelhouse-dev/wheelhouse"

// moduleRoot is the directory of the wheelhouse module as the go command resolves it from the working
// directory: the main module in its own tests, the replacement directory from a module that requires it
// (the perf harness, with a replace directive).
func moduleRoot(ctx context.Context, goBin string) (string, error) {
	out, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Dir}}", wheelhouseModule).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return "", fmt.Errorf("go list -m %s (run from that module or one that requires it): %w", wheelhouseModule, err)
	}
	dir := string(bytes.TrimSpace(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: the module has no directory (not downloaded)", wheelhouseModule)
	}
	return dir, nil
}

// cacheKey hashes what the image depends on: the spec, the Go version and architecture, and the files of the
// program's directory (its packages import only the standard library).
func cacheKey(spec imageSpec, src, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "containerdtest image v1\n%s\n%s\n%q\n%s/%s\n", spec.name, spec.bin, spec.cmd, goVersion, runtime.GOARCH)
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// goBuild builds the package at pkg (relative to modRoot) as a static, stripped linux binary and returns it.
func goBuild(ctx context.Context, goBin, modRoot, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "containerdtest-build")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+pkg)
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./%s: %w\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}

// writeImage writes an image of one layer holding bin at /<spec.bin> (mode 0755, owned by root) to img.Tar,
// through a temporary file renamed into place, so concurrent builders never see half an archive.
func writeImage(img Image, spec imageSpec, bin []byte) error {
	layerTar, err := singleFileTar(spec.bin, bin)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/" + spec.bin}, Cmd: spec.cmd, Env: []string{"PATH=/"}, WorkingDir: "/"}
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(spec.name)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", img.Tar, os.Getpid())
	if err := tarball.WriteToFile(tmp, tag, image); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, img.Tar)
}

// singleFileTar is a tar archive of one executable file at name, with a fixed time so builds are reproducible.
func singleFileTar(name string, content []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o755,
		Size:     int64(len(content)),
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
