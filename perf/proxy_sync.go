package perf

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/nft"
)

// newNFT opens the nftables backend of the node namespace ns as the agent does (its pod network's CIDR given, the
// Services spread over nft.DefaultShards tables), or, for modeNFTOne, the same layout in one table.
func newNFT(ns *netNS, mode string) (proxy.Backend, error) {
	cfg := nft.Config{NetNS: ns.h, PodCIDR: proxyPodNet}
	var b proxy.Backend
	var err error
	if mode == modeNFTOne {
		b, err = nft.New(cfg)
	} else {
		b, err = nft.NewSharded(cfg, nft.DefaultShards)
	}
	if err != nil {
		return nil, fmt.Errorf("nftables backend in %s: %w", ns.name, nftErr(err))
	}
	return b, nil
}

// fullSync times SyncReps full syncs of n Services, each into a fresh network namespace: the agent's
// proxy.Tracker fed every object and asked for the state, then the backend's first Sync (which writes the tables
// whole).
func (r *proxyRunner) fullSync(ctx context.Context, n int, mode string) ProxySyncResult {
	out := ProxySyncResult{Mode: mode, Services: n, Endpoints: r.cfg.Endpoints, Reps: r.cfg.SyncReps}
	objs := makeProxyObjects(0, n, r.cfg.Endpoints, 0)
	for rep := range r.cfg.SyncReps {
		if err := ctx.Err(); err != nil {
			out.Err = err.Error()
			break
		}
		build, sync, size, err := oneFullSync(ctx, objs, mode, fmt.Sprintf("sync-%d-%d", n, rep))
		if err != nil {
			out.Err = err.Error()
			break
		}
		out.VirtualServices = size
		out.Build, out.Sync = append(out.Build, build), append(out.Sync, sync)
		r.log.Info("full sync", "mode", mode, "services", n, "rep", rep, "build", build, "sync", sync)
	}
	out.summarize()
	return out
}

// oneFullSync builds the state and syncs it into a new namespace's backend. The namespace is emptied (the table
// deleted) before it is released, untimed, so that its teardown leaves no kernel work for the next repetition.
func oneFullSync(ctx context.Context, objs proxyObjects, mode, name string) (build, sync time.Duration, size int, err error) {
	ns, err := newNetNS(name)
	if err != nil {
		return 0, 0, 0, err
	}
	defer ns.Close()
	be, err := newNFT(ns, mode)
	if err != nil {
		return 0, 0, 0, err
	}
	defer be.Close()
	runtime.GC() // each repetition starts from the same heap; collections during it are counted
	t0 := time.Now()
	st := objs.track().State()
	t1 := time.Now()
	err = be.Sync(ctx, st)
	t2 := time.Now()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sync of %d virtual services: %w", len(st), err)
	}
	if err := be.Cleanup(ctx); err != nil {
		return 0, 0, 0, err
	}
	return t1.Sub(t0), t2.Sub(t1), len(st), nil
}

// summarize fills in the medians, minimums and maximums from the repetitions.
func (s *ProxySyncResult) summarize() {
	if len(s.Sync) == 0 {
		return
	}
	total := make([]time.Duration, len(s.Sync))
	for i, d := range s.Sync {
		total[i] = d
		if i < len(s.Build) {
			total[i] += s.Build[i]
		}
	}
	s.BuildMedian, s.SyncMedian, s.TotalMedian = medianDuration(s.Build), medianDuration(s.Sync), medianDuration(total)
	s.SyncMin, s.SyncMax = slices.Min(s.Sync), slices.Max(s.Sync)
	s.TotalMin, s.TotalMax = slices.Min(total), slices.Max(total)
}

// change programs ChangeServices Services, then ChangeReps times replaces one endpoint of one Service (a
// different one each time, after an untimed first change) and times the agent's proxy.Tracker taking the slice's
// update and giving the state (it rebuilds that Service only), and the backend's Sync of the result, as one pass of
// the agent's sync loop does.
func (r *proxyRunner) change(ctx context.Context, mode string) ProxyChangeResult {
	n := r.cfg.ChangeServices
	out := ProxyChangeResult{Mode: mode, Services: n, Endpoints: r.cfg.Endpoints, Reps: r.cfg.ChangeReps}
	if err := r.changeRuns(ctx, &out); err != nil {
		out.Err = err.Error()
	}
	out.summarize()
	return out
}

func (r *proxyRunner) changeRuns(ctx context.Context, out *ProxyChangeResult) error {
	n := out.Services
	objs := makeProxyObjects(0, n, r.cfg.Endpoints, 0)
	ns, err := newNetNS("change")
	if err != nil {
		return err
	}
	defer ns.Close()
	be, err := newNFT(ns, out.Mode)
	if err != nil {
		return err
	}
	defer be.Close()
	defer func() { _ = be.Cleanup(context.WithoutCancel(ctx)) }() // the namespace goes anyway: untimed tidiness
	tracker := objs.track()
	if err := be.Sync(ctx, tracker.State()); err != nil {
		return fmt.Errorf("initial sync of %d Services: %w", n, err)
	}
	events := tracker.Handler()
	for rep := range r.cfg.ChangeReps + 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		old, updated := objs.replaceEndpoint((rep*7919)%n, rep) // 7,919 is prime: the Services changed are spread out
		runtime.GC()
		t0 := time.Now()
		events.OnUpdate(old, updated)
		st := tracker.State()
		t1 := time.Now()
		err := be.Sync(ctx, st)
		t2 := time.Now()
		if err != nil {
			return fmt.Errorf("change %d: %w", rep, err)
		}
		if rep == 0 {
			continue // the first change after the full sync is a warm-up
		}
		out.Builds, out.Syncs = append(out.Builds, t1.Sub(t0)), append(out.Syncs, t2.Sub(t1))
	}
	r.log.Info("one endpoint change", "mode", out.Mode, "services", n, "reps", len(out.Syncs))
	return nil
}

// summarize fills in the percentiles from the repetitions.
func (c *ProxyChangeResult) summarize() {
	if len(c.Syncs) == 0 {
		return
	}
	c.Total = make([]time.Duration, len(c.Syncs))
	for i, d := range c.Syncs {
		c.Total[i] = d
		if i < len(c.Builds) {
			c.Total[i] += c.Builds[i]
		}
	}
	sorted := func(ds []time.Duration) []time.Duration { return slices.Sorted(slices.Values(ds)) }
	syncs, builds, total := sorted(c.Syncs), sorted(c.Builds), sorted(c.Total)
	c.SyncP50, c.SyncP99, c.SyncMax = medianDuration(syncs), percentile(syncs, 99), slices.Max(syncs)
	c.BuildP50, c.BuildP99 = medianDuration(builds), percentile(builds, 99)
	c.TotalP50, c.TotalP99 = medianDuration(total), percentile(total, 99)
}
