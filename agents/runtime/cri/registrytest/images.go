package registrytest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// FromArchive reads the image tagged ref from a `docker save` archive (containerdtest.Image's Tar).
func FromArchive(path, ref string) (v1.Image, error) {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return nil, fmt.Errorf("registrytest: reading %s from %s: %w", ref, path, err)
	}
	return img, nil
}

// MustFromArchive is FromArchive for tests.
func MustFromArchive(t testing.TB, path, ref string) v1.Image {
	t.Helper()
	img, err := FromArchive(path, ref)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WithFiller returns base with n more layers of size bytes each: one file of random (incompressible) bytes per
// layer at /filler/<i>, so that pulls move that many bytes. seed makes the layers, and so the image's digest,
// reproducible; images with different seeds share no filler layer.
func WithFiller(base v1.Image, n int, size int64, seed uint64) (v1.Image, error) {
	img := base
	for i := range n {
		data := make([]byte, size)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		for j := 0; j < len(data); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && j+k < len(data); k++ {
				data[j+k] = byte(v >> (8 * k))
			}
		}
		tarball, err := fileTar(fmt.Sprintf("filler/%d", i), data)
		if err != nil {
			return nil, err
		}
		layer, err := layerFromBytes(tarball)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, fmt.Errorf("registrytest: %w", err)
		}
	}
	return img, nil
}

// layerFromBytes is a gzip-compressed layer of an uncompressed tar.
func layerFromBytes(b []byte) (v1.Layer, error) {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	return l, nil
}

// fileTar is a tar of one regular file (and its directory).
func fileTar(path string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := path[:bytes.LastIndexByte([]byte(path), '/')+1]
	if dir != "" {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: path, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
