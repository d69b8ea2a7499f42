package ipvs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// syncServices reads back the backend's virtual services and applies proxy.Diff's changes to those that are not as
// recorded and desired (all of them when full). It returns one error per refusal or failed read.
func (b *Backend) syncServices(ctx context.Context, full bool) []error {
	svcs, err := b.dump.services()
	if err != nil {
		return []error{err}
	}
	var errs []error
	have := proxy.Programmed{}
	inKernel := make(map[proxy.Key]bool, len(b.record))
	var stale []proxy.Key
	skip := map[proxy.Key]bool{}
	for _, ks := range svcs {
		if !b.owns(ks.key) {
			continue
		}
		k := ks.key
		inKernel[k] = true
		isStale := ks.scheduler != b.cfg.Scheduler || ks.foreign
		if !full && !isStale && b.trusted(k, ks) {
			continue
		}
		ps, err := b.readBack(ks)
		if err != nil {
			errs = append(errs, err)
			skip[k] = true
			continue
		}
		have[k] = ps
		if _, wanted := b.desired[k]; isStale && wanted {
			stale = append(stale, k)
		}
	}
	b.last.services = len(inKernel)
	want := proxy.State{}
	for k, v := range b.desired {
		if _, read := have[k]; !skip[k] && (read || !inKernel[k]) {
			want[k] = v
		}
	}
	changes := proxy.Diff(have, want)
	for _, k := range stale { // the kernel's scheduler or flags are not the backend's: Diff does not see those
		if !slices.ContainsFunc(changes, func(c proxy.Change) bool { return c.Op == proxy.UpdateService && c.Service.Key == k }) {
			changes = append([]proxy.Change{{Op: proxy.UpdateService, Service: want[k]}}, changes...)
		}
	}
	applied, refused := b.apply(ctx, changes)
	errs = append(errs, refused...)
	b.last.changes = applied
	for k := range b.record {
		if _, read := have[k]; read || !inKernel[k] {
			delete(b.record, k) // read back (replaced below) or gone
		}
	}
	maps.Copy(b.record, proxy.Apply(have, applied))
	return errs
}

// trusted reports whether the kernel's virtual service k is as recorded and desired, so that its destinations
// need not be read back: its attributes are the record's, the record equals desired and has nothing drained.
func (b *Backend) trusted(k proxy.Key, ks kernelService) bool {
	rec, recorded := b.record[k]
	want, wanted := b.desired[k]
	return recorded && wanted && len(rec.Drained) == 0 && rec.Affinity == ks.affinity && rec.VirtualService.Equal(want)
}

// readBack is the kernel's virtual service s with its destinations; the attributes IPVS does not hold (kind,
// Service, KeepSource) are desired's, or the record's.
func (b *Backend) readBack(ks kernelService) (proxy.ProgrammedService, error) {
	k := ks.key
	s, err := toService(proxy.VirtualService{Key: k}, ks.scheduler)
	if err != nil {
		return proxy.ProgrammedService{}, err
	}
	var vs proxy.VirtualService
	if want, ok := b.desired[k]; ok {
		vs = want
	} else if rec, ok := b.record[k]; ok {
		vs = rec.VirtualService
	} else {
		vs = proxy.VirtualService{Key: k}
	}
	vs.Affinity, vs.Destinations = ks.affinity, nil
	b.last.destReads++
	dests, err := b.ipvs.GetDestinations(s)
	if err != nil {
		return proxy.ProgrammedService{}, fmt.Errorf("ipvs: read back the destinations of %v: %w", k, err)
	}
	ps := proxy.ProgrammedService{VirtualService: vs}
	for _, d := range dests {
		ap, active, ok := fromDestination(d)
		switch {
		case !ok:
		case active:
			ps.Destinations = append(ps.Destinations, ap)
		default:
			ps.Drained = append(ps.Drained, ap)
		}
	}
	slices.SortFunc(ps.Destinations, netip.AddrPort.Compare)
	slices.SortFunc(ps.Drained, netip.AddrPort.Compare)
	return ps, nil
}

// apply makes changes in order. A refused change does not stop the others, except that a virtual service the
// kernel refused to create gets no destinations. It returns the changes made and one error per refusal.
func (b *Backend) apply(ctx context.Context, changes []proxy.Change) (applied []proxy.Change, errs []error) {
	notCreated := map[proxy.Key]bool{}
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			return applied, append(errs, fmt.Errorf("ipvs: %d changes not made: %w", len(changes)-i, err))
		}
		k := c.Service.Key
		if notCreated[k] {
			continue
		}
		if err := b.change(c); err != nil {
			if c.Op == proxy.AddService {
				notCreated[k] = true
			}
			what := string(c.Op)
			if c.Dest.IsValid() {
				what += " " + c.Dest.String()
			}
			errs = append(errs, fmt.Errorf("ipvs: virtual service %v (%s): %s: %w", k, c.Service.Service, what, err))
			continue
		}
		applied = append(applied, c)
	}
	if len(errs) > 0 {
		b.log.Warn("the kernel refused changes", "refused", len(errs), "applied", len(applied), "error", errors.Join(errs...))
	}
	return applied, errs
}

// change makes one change; one already made (the virtual service or destination is there, or gone) is not an
// error.
func (b *Backend) change(c proxy.Change) error {
	s, err := toService(c.Service, b.cfg.Scheduler)
	if err != nil {
		return err
	}
	switch c.Op {
	case proxy.AddService:
		if err = b.ipvs.NewService(s); errors.Is(err, unix.EEXIST) {
			err = b.ipvs.UpdateService(s)
		}
	case proxy.UpdateService:
		err = b.ipvs.UpdateService(s)
	case proxy.AddDest:
		d := toDestination(c.Dest, weightActive)
		if err = b.ipvs.NewDestination(s, d); errors.Is(err, unix.EEXIST) {
			err = b.ipvs.UpdateDestination(s, d)
		}
	case proxy.RestoreDest:
		err = b.ipvs.UpdateDestination(s, toDestination(c.Dest, weightActive))
	case proxy.DrainDest:
		err = b.ipvs.UpdateDestination(s, toDestination(c.Dest, 0))
	case proxy.DeleteDest:
		if err = b.ipvs.DelDestination(s, toDestination(c.Dest, 0)); errors.Is(err, unix.ENOENT) {
			err = nil
		}
	case proxy.DeleteService:
		if err = b.ipvs.DelService(s); errors.Is(err, unix.ESRCH) {
			err = nil
		}
	default:
		err = fmt.Errorf("unknown change %q", c.Op)
	}
	return err
}
