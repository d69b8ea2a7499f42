package kubelet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// DefaultSandboxImage is the pause image kubelet and containerd default to; image garbage collection keeps it.
const DefaultSandboxImage = "registry.k8s.io/pause:3.10"

// ImageGCPolicy configures image garbage collection on a runtime that runs images. Zero fields take kubelet's
// defaults.
type ImageGCPolicy struct {
	// HighThresholdPercent is the usage of the image filesystem at or above which unused images are removed
	// (default 85; 100 turns collection off), down to LowThresholdPercent (default 80).
	HighThresholdPercent, LowThresholdPercent int
	// MinAge: an image first seen more recently than this is never removed (default 2 min).
	MinAge time.Duration
	// Period is how often the usage is checked, on the pod manager's clock (default 5 min).
	Period time.Duration
	// SandboxImage is the pause image, never removed (default DefaultSandboxImage); neither is an image the
	// runtime pins.
	SandboxImage string
	// FsStat reads the capacity and the available bytes of the filesystem mounted at mountpoint, the one the
	// runtime's ImageFsInfo names (CRI reports only what images use); default statfs(2).
	FsStat func(mountpoint string) (capacity, available uint64, err error)
}

func (p ImageGCPolicy) withDefaults() ImageGCPolicy {
	if p.HighThresholdPercent == 0 {
		p.HighThresholdPercent = 85
	}
	if p.LowThresholdPercent == 0 {
		p.LowThresholdPercent = 80
	}
	if p.MinAge == 0 {
		p.MinAge = 2 * time.Minute
	}
	if p.Period == 0 {
		p.Period = 5 * time.Minute
	}
	if p.SandboxImage == "" {
		p.SandboxImage = DefaultSandboxImage
	}
	if p.FsStat == nil {
		p.FsStat = statfs
	}
	return p
}

// validate checks a defaulted policy.
func (p ImageGCPolicy) validate() error {
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 || p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return fmt.Errorf("kubelet: image GC thresholds must be between 0 and 100 percent, not %d and %d", p.HighThresholdPercent, p.LowThresholdPercent)
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		return fmt.Errorf("kubelet: the image GC low threshold (%d %%) is above the high threshold (%d %%)", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if p.MinAge < 0 || p.Period < 0 {
		return errors.New("kubelet: the image GC minimum age and period must not be negative")
	}
	return nil
}

func statfs(mountpoint string) (capacity, available uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(mountpoint, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", mountpoint, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// imageGC removes unused images when the image filesystem fills up, as kubelet's image GC manager: when usage
// reaches the high threshold, images no container of the runtime uses (whatever its state) are removed, least
// recently used first, until usage is down to the low threshold. Images younger than MinAge, the sandbox image
// and pinned images stay. Events on the Node: FreeDiskSpaceFailed when not enough could be freed,
// ImageGCFailed when collection fails twice in a row, InvalidDiskCapacity.
type imageGC struct {
	svc      runtime.ImageService
	rt       runtime.ContainerManager
	policy   ImageGCPolicy
	clock    clock.WithTicker
	recorder record.EventRecorder
	node     *corev1.ObjectReference
	log      *slog.Logger

	mu      sync.Mutex // guards records
	records map[string]*imageRecord

	failed bool // the last collection failed (owned by run's goroutine)
}

// imageRecord is what the collector knows of an image, by image ID (kept in memory: after a restart every
// image is new, so none is removed before MinAge).
type imageRecord struct {
	firstSeen, lastUsed time.Time
}

// gcImage is an image as one collection sees it.
type gcImage struct {
	*runtimeapi.Image
	imageRecord
	inUse bool
}

func newImageGC(svc runtime.ImageService, rt runtime.ContainerManager, policy ImageGCPolicy, clk clock.WithTicker,
	recorder record.EventRecorder, nodeName string, log *slog.Logger) *imageGC {
	return &imageGC{svc: svc, rt: rt, policy: policy, clock: clk, recorder: recorder, log: log,
		node:    &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
		records: map[string]*imageRecord{}}
}

// used notes that a container started with the image whose ID is ref, now.
func (g *imageGC) used(ref string) {
	if ref == "" {
		return
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.records[ref]
	if r == nil {
		r = &imageRecord{firstSeen: now}
		g.records[ref] = r
	}
	r.lastUsed = now
}

// run checks the usage every period until ctx ends. Collection is off with a high threshold of 100 %.
func (g *imageGC) run(ctx context.Context) {
	if g.policy.HighThresholdPercent >= 100 {
		return
	}
	if _, err := g.detect(ctx, g.clock.Now()); err != nil && ctx.Err() == nil {
		g.log.Warn("listing the runtime's images failed", "err", err)
	}
	t := g.clock.NewTicker(g.policy.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			g.runOnce(ctx)
		}
	}
}

// runOnce collects once; a failure after a failure is an ImageGCFailed event (the first may be a runtime
// still starting), as kubelet's.
func (g *imageGC) runOnce(ctx context.Context) {
	err := g.collect(ctx)
	switch {
	case err == nil:
		g.failed = false
		return
	case ctx.Err() != nil:
		return
	case g.failed:
		g.log.Error("image garbage collection failed multiple times in a row", "err", err)
		g.recorder.Event(g.node, corev1.EventTypeWarning, "ImageGCFailed", err.Error())
	default:
		g.log.Warn("image garbage collection failed once", "err", err)
	}
	g.failed = true
}

// collect removes unused images if the image filesystem's usage is at or above the high threshold.
func (g *imageGC) collect(ctx context.Context) error {
	now := g.clock.Now()
	images, err := g.detect(ctx, now)
	if err != nil {
		return err
	}
	capacity, available, err := g.fsUsage(ctx)
	if err != nil {
		return err
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		g.recorder.Event(g.node, corev1.EventTypeWarning, "InvalidDiskCapacity", err.Error())
		return err
	}
	available = min(available, capacity)
	usage := 100 - int(available*100/capacity)
	if usage < g.policy.HighThresholdPercent {
		return nil
	}
	toFree := int64(capacity)*int64(100-g.policy.LowThresholdPercent)/100 - int64(available)
	g.log.Info("image filesystem usage is over the high threshold: removing unused images", "usage", usage,
		"highThreshold", g.policy.HighThresholdPercent, "lowThreshold", g.policy.LowThresholdPercent, "bytesToFree", toFree)
	freed, err := g.free(ctx, toFree, now, images)
	if err != nil {
		return err
	}
	if freed < toFree {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", toFree, freed)
		g.recorder.Event(g.node, corev1.EventTypeWarning, "FreeDiskSpaceFailed", msg)
		return errors.New(msg)
	}
	return nil
}

// fsUsage is the capacity and available bytes of the image filesystem.
func (g *imageGC) fsUsage(ctx context.Context) (capacity, available uint64, err error) {
	info, err := g.svc.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, err
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, errors.New("the runtime names no image filesystem")
	}
	return g.policy.FsStat(fss[0].FsId.Mountpoint)
}

// detect reads the runtime's images and containers and updates the records: an image not seen before is first
// seen now, one a container uses is used now; the records of images gone are dropped.
func (g *imageGC) detect(ctx context.Context, now time.Time) ([]gcImage, error) {
	images, err := g.svc.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	containers, err := g.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for _, c := range containers {
		for _, ref := range []string{c.ImageRef, c.GetImage().GetImage()} {
			inUse[ref], inUse[normalImage(ref)] = true, true
		}
	}
	delete(inUse, "")
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	out := make([]gcImage, 0, len(images))
	for _, img := range images {
		seen[img.Id] = true
		r := g.records[img.Id]
		if r == nil {
			r = &imageRecord{firstSeen: now}
			g.records[img.Id] = r
		}
		used := imageMatches(img, func(name string) bool { return inUse[name] || inUse[normalImage(name)] })
		if used {
			r.lastUsed = now
		}
		out = append(out, gcImage{Image: img, imageRecord: *r, inUse: used})
	}
	for id := range g.records {
		if !seen[id] {
			delete(g.records, id)
		}
	}
	return out, nil
}

// free removes unused images, least recently used first, until toFree bytes are freed, and returns how many
// were.
func (g *imageGC) free(ctx context.Context, toFree int64, now time.Time, images []gcImage) (int64, error) {
	sandbox := normalImage(g.policy.SandboxImage)
	candidates := slices.DeleteFunc(slices.Clone(images), func(im gcImage) bool {
		return im.inUse || im.Pinned || imageMatches(im.Image, func(name string) bool { return name == g.policy.SandboxImage || normalImage(name) == sandbox })
	})
	slices.SortStableFunc(candidates, func(a, b gcImage) int {
		return cmp.Or(a.lastUsed.Compare(b.lastUsed), a.firstSeen.Compare(b.firstSeen))
	})
	var freed int64
	var errs []error
	for _, im := range candidates {
		if now.Sub(im.firstSeen) < g.policy.MinAge {
			continue
		}
		if err := g.svc.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: im.Id}); err != nil {
			errs = append(errs, err)
			continue
		}
		g.log.Info("removed an unused image", "image", im.Id, "tags", im.RepoTags, "size", im.Size, "lastUsed", im.lastUsed, "firstSeen", im.firstSeen)
		g.mu.Lock()
		delete(g.records, im.Id)
		g.mu.Unlock()
		freed += int64(im.Size)
		if freed >= toFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", toFree, freed, utilerrors.NewAggregate(errs))
	}
	return freed, nil
}

// imageMatches reports whether match holds for the image's ID, a tag or a digest reference of it.
func imageMatches(img *runtimeapi.Image, match func(string) bool) bool {
	return match(img.Id) || slices.ContainsFunc(img.RepoTags, match) || slices.ContainsFunc(img.RepoDigests, match)
}

// normalImage is a reference normalized ("busybox" → docker.io/library/busybox:latest), or as it is when it
// does not parse (an image ID).
func normalImage(ref string) string {
	if n, err := parseImageName(ref); err == nil {
		return n.String()
	}
	return ref
}
