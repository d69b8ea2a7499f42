package proxy

import (
	"net/netip"
	"slices"
)

// Op is one kind of change to the kernel.
type Op string

// The changes a backend makes, in the order Diff lists them (safe to apply in that order).
const (
	AddService    Op = "add-service"         // a new virtual service (its destinations follow)
	UpdateService Op = "update-service"      // affinity or source handling changed
	AddDest       Op = "add-destination"     // a new destination, weight 1
	RestoreDest   Op = "restore-destination" // a drained destination is wanted again: weight back to 1
	DrainDest     Op = "drain-destination"   // a destination no longer wanted: weight 0, no new connections
	DeleteDest    Op = "delete-destination"  // a drained destination still unwanted at the next sync: removed
	DeleteService Op = "delete-service"      // a virtual service no longer wanted (with its destinations)
)

var opOrder = []Op{AddService, UpdateService, AddDest, RestoreDest, DrainDest, DeleteDest, DeleteService}

// Change is one change: Op on the virtual service (its desired form, or the current one when deleted) and, for
// destination changes, Dest.
type Change struct {
	Op      Op
	Service VirtualService
	Dest    netip.AddrPort
}

// Programmed is what a backend reads back from the kernel: each virtual service with its active destinations
// (in Destinations) and the drained ones (weight 0).
type Programmed map[Key]ProgrammedService

// ProgrammedService is a virtual service as the kernel holds it.
type ProgrammedService struct {
	VirtualService
	Drained []netip.AddrPort
}

// Diff is the minimal list of changes that takes the kernel from current to desired. A destination no longer
// wanted is drained first and deleted by a later Diff (removed endpoints finish their connections); a drained
// destination wanted again is restored. Changes are ordered by Op (opOrder), then by key and destination.
func Diff(current Programmed, desired State) []Change {
	var out []Change
	for k, want := range desired {
		have, ok := current[k]
		if !ok {
			out = append(out, Change{Op: AddService, Service: want})
			for _, d := range want.Destinations {
				out = append(out, Change{Op: AddDest, Service: want, Dest: d})
			}
			continue
		}
		if !sameAttributes(have.VirtualService, want) {
			out = append(out, Change{Op: UpdateService, Service: want})
		}
		for _, d := range want.Destinations {
			switch {
			case slices.Contains(have.Destinations, d):
			case slices.Contains(have.Drained, d):
				out = append(out, Change{Op: RestoreDest, Service: want, Dest: d})
			default:
				out = append(out, Change{Op: AddDest, Service: want, Dest: d})
			}
		}
		for _, d := range have.Destinations {
			if !slices.Contains(want.Destinations, d) {
				out = append(out, Change{Op: DrainDest, Service: want, Dest: d})
			}
		}
		for _, d := range have.Drained {
			if !slices.Contains(want.Destinations, d) {
				out = append(out, Change{Op: DeleteDest, Service: want, Dest: d})
			}
		}
	}
	for k, have := range current {
		if _, ok := desired[k]; !ok {
			out = append(out, Change{Op: DeleteService, Service: have.VirtualService})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int {
		if c := slices.Index(opOrder, a.Op) - slices.Index(opOrder, b.Op); c != 0 {
			return c
		}
		if c := a.Service.Key.Compare(b.Service.Key); c != 0 {
			return c
		}
		return a.Dest.Compare(b.Dest)
	})
	return out
}

// sameAttributes reports whether two forms of a virtual service need no UpdateService (destinations aside).
func sameAttributes(a, b VirtualService) bool {
	return a.Kind == b.Kind && a.Service == b.Service && a.Affinity == b.Affinity && a.KeepSource == b.KeepSource
}

// Apply is what a backend does with changes, on a read-back state (tests and the backends' own bookkeeping use
// it): the result is what the kernel holds afterwards.
func Apply(current Programmed, changes []Change) Programmed {
	out := Programmed{}
	for k, v := range current {
		v.Destinations = slices.Clone(v.Destinations)
		v.Drained = slices.Clone(v.Drained)
		out[k] = v
	}
	for _, c := range changes {
		k := c.Service.Key
		ps := out[k]
		switch c.Op {
		case AddService:
			ps = ProgrammedService{VirtualService: c.Service}
			ps.Destinations = nil
		case UpdateService:
			dests := ps.Destinations
			ps.VirtualService = c.Service
			ps.Destinations = dests
		case AddDest:
			ps.Destinations = insertSorted(ps.Destinations, c.Dest)
		case RestoreDest:
			ps.Drained = slices.DeleteFunc(ps.Drained, func(d netip.AddrPort) bool { return d == c.Dest })
			ps.Destinations = insertSorted(ps.Destinations, c.Dest)
		case DrainDest:
			ps.Destinations = slices.DeleteFunc(ps.Destinations, func(d netip.AddrPort) bool { return d == c.Dest })
			ps.Drained = insertSorted(ps.Drained, c.Dest)
		case DeleteDest:
			ps.Drained = slices.DeleteFunc(ps.Drained, func(d netip.AddrPort) bool { return d == c.Dest })
		case DeleteService:
			delete(out, k)
			continue
		}
		out[k] = ps
	}
	return out
}

func insertSorted(s []netip.AddrPort, d netip.AddrPort) []netip.AddrPort {
	i, found := slices.BinarySearchFunc(s, d, func(a, b netip.AddrPort) int { return a.Compare(b) })
	if found {
		return s
	}
	return slices.Insert(s, i, d)
}
