package kubelet

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/fakecri"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// gcEnv is a criEnv whose image filesystem has the capacity the test sets; fakecri's images use it.
type gcEnv struct {
	*criEnv
	capacity atomic.Uint64
}

func newGCEnv(t *testing.T, policy ImageGCPolicy) *gcEnv {
	g := &gcEnv{}
	g.capacity.Store(1000)
	g.criEnv = newCRIEnv(t, func(ce *criEnv, c *PodsConfig) {
		policy.FsStat = func(mountpoint string) (uint64, uint64, error) {
			if mountpoint != "/fake/images" {
				return 0, 0, errors.New("statfs of an unexpected mountpoint " + mountpoint)
			}
			used := usedBytes(ce.srv)
			capacity := g.capacity.Load()
			return capacity, capacity - min(used, capacity), nil
		}
		if policy.Period == 0 {
			policy.Period = 24 * time.Hour
		}
		c.ImageGC = policy
	})
	return g
}

func usedBytes(s *fakecri.Server) uint64 {
	info, err := s.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		panic(err)
	}
	return info.ImageFilesystems[0].UsedBytes.Value
}

// images are fakecri's images by first tag.
func (g *gcEnv) images() []string {
	resp, err := g.srv.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, img := range resp.Images {
		out = append(out, img.RepoTags[0])
	}
	slices.Sort(out)
	return out
}

func (g *gcEnv) id(ref string) string {
	resp, err := g.srv.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil || resp.Image == nil {
		g.t.Fatalf("no image %s: %v", ref, err)
	}
	return resp.Image.Id
}

func (g *gcEnv) collect() error {
	return g.pods.images.gc.collect(g.t.Context())
}

// TestImageGC: past the high threshold, unused images go least recently used first until usage is at the low
// threshold; images in use, the sandbox image and images younger than MinAge stay; when not enough can be freed
// the Node gets FreeDiskSpaceFailed (and ImageGCFailed when it happens again).
func TestImageGC(t *testing.T) {
	g := newGCEnv(t, ImageGCPolicy{SandboxImage: "registry.k8s.io/pause:3.10"})
	gc := g.pods.images.gc
	for ref, size := range map[string]uint64{"registry.k8s.io/pause:3.10": 100, "example.test/used:1": 100,
		"example.test/old:1": 150, "example.test/mid:1": 150, "example.test/new:1": 150} {
		g.srv.AddImage(ref, size)
	}
	g.create(imagePod("user", "example.test/used:1", corev1.PullIfNotPresent))
	g.until("running", isRunning, "user")
	if _, err := gc.detect(t.Context(), g.clk.Now()); err != nil { // first seen now
		t.Fatal(err)
	}
	// The container start counted as a use of its image.
	gc.mu.Lock()
	if r := gc.records[g.id("example.test/used:1")]; r == nil || r.lastUsed.IsZero() {
		t.Errorf("the started container's image has no use recorded: %+v", r)
	}
	gc.mu.Unlock()
	// Uses in the order mid, old, new (old was used again later than mid: LRU, not first seen).
	for _, ref := range []string{"example.test/mid:1", "example.test/old:1", "example.test/new:1"} {
		g.clk.Step(time.Minute)
		gc.used(g.id(ref))
	}
	g.srv.AddImage("example.test/young:1", 200)

	// 850 of 1000 bytes: 85 %, the high threshold: 50 bytes must go to get to 80 %; mid is the least recently
	// used.
	if err := g.collect(); err != nil {
		t.Fatal(err)
	}
	want := []string{"example.test/new:1", "example.test/old:1", "example.test/used:1", "example.test/young:1", "registry.k8s.io/pause:3.10"}
	if got := g.images(); !slices.Equal(got, want) {
		t.Fatalf("after the first collection: %q, want %q", got, want)
	}
	// 700 of 1000: below; nothing goes.
	if err := g.collect(); err != nil || len(g.images()) != 5 {
		t.Fatalf("below the threshold: %v, %q", err, g.images())
	}
	// 700 of 750 (93 %): 150 - 50 = 100 bytes to free; old goes (new is more recent).
	g.capacity.Store(750)
	if err := g.collect(); err != nil {
		t.Fatal(err)
	}
	want = []string{"example.test/new:1", "example.test/used:1", "example.test/young:1", "registry.k8s.io/pause:3.10"}
	if got := g.images(); !slices.Equal(got, want) {
		t.Fatalf("after the second collection: %q, want %q", got, want)
	}
	// 550 of 560: 112 - 10 = 102 bytes to free; only new (150) may go: young was first seen just now.
	// 400 of 400 then: 80 bytes to free, none eligible.
	g.capacity.Store(560)
	if err := g.collect(); err != nil {
		t.Fatal(err)
	}
	g.capacity.Store(400)
	err := g.collect()
	const msg = "Failed to garbage collect required amount of images. Attempted to free 80 bytes, but only found 0 bytes eligible to free."
	if err == nil || err.Error() != msg {
		t.Fatalf("collecting with nothing to free: %v", err)
	}
	want = []string{"example.test/used:1", "example.test/young:1", "registry.k8s.io/pause:3.10"}
	if got := g.images(); !slices.Equal(got, want) {
		t.Fatalf("after the collection that could not free enough: %q, want %q", got, want)
	}
	g.eventually("n1", "Warning FreeDiskSpaceFailed "+msg, 1)
	// The loop's first failure is only logged; the second in a row is ImageGCFailed too.
	gc.runOnce(t.Context())
	if evs := g.events("n1"); evs["Warning ImageGCFailed "+msg] != 0 {
		t.Errorf("ImageGCFailed after one failure: %v", evs)
	}
	gc.runOnce(t.Context())
	g.eventually("n1", "Warning ImageGCFailed "+msg, 1)

	// Once young is older than MinAge (2 min) it may go; the image in use and the pause image never.
	g.clk.Step(2 * time.Minute)
	if err := g.collect(); err != nil {
		t.Fatal(err)
	}
	want = []string{"example.test/used:1", "registry.k8s.io/pause:3.10"}
	if got := g.images(); !slices.Equal(got, want) {
		t.Fatalf("after young aged: %q, want %q", got, want)
	}
	g.capacity.Store(200)
	if err := g.collect(); err == nil {
		t.Fatal("collection freed enough with only the used and the sandbox images left")
	}
	if got := g.images(); !slices.Equal(got, want) {
		t.Fatalf("the used or the sandbox image was removed: %q", got)
	}
}

// TestImageGCLoop: the pod manager collects every period (on its clock), from the start.
func TestImageGCLoop(t *testing.T) {
	g := newGCEnv(t, ImageGCPolicy{Period: time.Minute, HighThresholdPercent: 50, LowThresholdPercent: 10})
	g.srv.AddImage("example.test/big:1", 600)
	g.srv.AddImage("example.test/small:1", 10)
	// Stepped a minute at a time: the images are first seen at the first collection (or at the start) and go
	// once older than two minutes, the big one first, which is enough.
	apitest.Eventually(t, "the big image collected", func() bool {
		g.clk.Step(time.Minute)
		return slices.Equal(g.images(), []string{"example.test/small:1"})
	})
}

// TestImageGCPolicy: defaults and validation.
func TestImageGCPolicy(t *testing.T) {
	p := ImageGCPolicy{}.withDefaults()
	if p.HighThresholdPercent != 85 || p.LowThresholdPercent != 80 || p.MinAge != 2*time.Minute || p.Period != 5*time.Minute ||
		p.SandboxImage != DefaultSandboxImage || p.FsStat == nil || p.validate() != nil {
		t.Errorf("defaults %+v", p)
	}
	for _, bad := range []ImageGCPolicy{{HighThresholdPercent: 101}, {HighThresholdPercent: 70, LowThresholdPercent: 75}, {LowThresholdPercent: -1}, {MinAge: -time.Second}} {
		if bad.withDefaults().validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if c, a, err := statfs(t.TempDir()); err != nil || c == 0 || a > c {
		t.Errorf("statfs: %d, %d, %v", c, a, err)
	}
}
