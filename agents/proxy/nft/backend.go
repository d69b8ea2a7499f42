package nft

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// Backend keeps a node's nftables table equal to a proxy.State. Its methods are safe for concurrent use (they run
// one at a time).
type Backend struct {
	cfg Config
	log *slog.Logger

	// mu serialises the methods and guards everything below, the socket included.
	mu   sync.Mutex
	sock *sock
	// record is what the table holds, as the backend last programmed it (drained destinations included: nftables
	// has no weights, so they are in the record only).
	record proxy.Programmed
	// hairpin counts the virtual services of record that have each endpoint address (the hairpin set's elements).
	hairpin map[netip.Addr]int
	// chains counts the virtual services of record whose map element goes to each chain (serviceChain).
	chains map[string]int
	// synced: the table is known to hold record; false before the first Sync and after a failure, so that the next
	// Sync rewrites the table whole.
	synced bool
	// gen is the ruleset generation of the backend's last transaction; another means someone else committed.
	gen uint32
	// committed is the generation the backend's last commit made (gen also moves when a check finds the table
	// as programmed after someone else's commit).
	committed uint32
	// skipped is the number of IPv6 virtual services the last Sync left out (logged when it changes).
	skipped int
	// lastBatch is the number of messages of the last transaction, readBacks the number of times the table was
	// read back (tests check that a change stays small and that syncs do not read back needlessly).
	lastBatch, readBacks int
}

// New opens a backend for cfg's namespace. It does not touch the table: the first Sync writes it whole.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s, err := openSock(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, log: cfg.Logger.With("table", cfg.Table), sock: s}, nil
}

// Close releases the backend's socket; the table stays (Cleanup removes it).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sock.close()
}

// Sync makes the table hold desired (its IPv4 virtual services) in one transaction: all of it or, on an error,
// none. The first Sync, and any after a failure or after someone else changed the table, rewrites the table
// whole; the others change only the chains and elements of the virtual services that changed. A destination that
// leaves a virtual service stops getting new connections at once (established ones go on through conntrack) and
// leaves the record at the next Sync (proxy.Diff's drain, then delete). When the kernel refuses an incremental
// change, Sync rewrites the table at once; the error it returns is a refused rewrite (or a failed read), and the
// next Sync rewrites again.
func (b *Backend) Sync(ctx context.Context, desired proxy.State) error {
	return b.sync(ctx, desired, true)
}

// sync is Sync; without check it trusts the table to be as programmed (Sharded checks the generation for all its
// tables at once).
func (b *Backend) sync(ctx context.Context, desired proxy.State, check bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	desired = b.supported(desired)
	if b.synced && check {
		if err := b.checkForeign(false); err != nil {
			return err
		}
	}
	if !b.synced {
		return b.rewrite(programmedOf(desired))
	}
	have, want := b.pending(desired)
	changes := proxy.Diff(have, want)
	if len(changes) == 0 {
		return nil
	}
	next := proxy.Apply(have, changes)
	bt, delta, err := b.incremental(next, changes)
	if err != nil {
		return err
	}
	if bt.len() > 1 { // else drained destinations were deleted: the record only
		gen, err := b.sock.commit(bt)
		if err != nil {
			b.log.Warn("nftables refused an incremental sync; rewriting the table", "error", err)
			return b.rewrite(programmedOf(desired))
		}
		b.gen, b.committed, b.lastBatch = gen, gen, bt.len()
	}
	for k := range have {
		delete(b.record, k)
	}
	maps.Copy(b.record, next)
	applyCounts(b.hairpin, delta.hairpin)
	applyCounts(b.chains, delta.chains)
	return nil
}

func applyCounts[K comparable](counts, delta map[K]int) {
	for k, d := range delta {
		if counts[k] += d; counts[k] == 0 {
			delete(counts, k)
		}
	}
}

// pending is the part of the record and of desired that differ: the virtual services Diff has work on (a full
// Diff and Apply of 10,000 services costs more than the transaction of one change).
func (b *Backend) pending(desired proxy.State) (proxy.Programmed, proxy.State) {
	have, want := proxy.Programmed{}, proxy.State{}
	for k, v := range desired {
		ps, ok := b.record[k]
		if ok && len(ps.Drained) == 0 && ps.VirtualService.Equal(v) {
			continue
		}
		want[k] = v
		if ok {
			have[k] = ps
		}
	}
	for k, ps := range b.record {
		if _, ok := desired[k]; !ok {
			have[k] = ps
		}
	}
	return have, want
}

// Resync reads the whole table back and rewrites it if it is not what the backend programmed (a rule deleted by
// hand, the table flushed). Meant to run periodically; a no-op before the first Sync.
func (b *Backend) Resync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.record == nil && !b.synced {
		return nil
	}
	if b.synced {
		if err := b.checkForeign(true); err != nil || b.synced {
			return err
		}
	}
	return b.rewrite(b.record)
}

// Programmed is what the backend last programmed (a copy): each virtual service with its active destinations
// and the drained ones.
func (b *Backend) Programmed() proxy.Programmed {
	b.mu.Lock()
	defer b.mu.Unlock()
	return proxy.Apply(b.record, nil)
}

// Cleanup removes the table (none is not an error) and forgets what was programmed.
func (b *Backend) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := newBatch(b.cfg.Table, 256) // adds the table, so that deleting it cannot fail
	bt.delTable()
	if _, err := b.sock.commit(bt); err != nil {
		return fmt.Errorf("nft: delete table %s: %w", b.cfg.Table, err)
	}
	b.record, b.hairpin, b.chains, b.synced = nil, nil, nil, false
	return nil
}

// supported drops what the table cannot hold: IPv6 virtual services (logged when their number changes), and IPv6
// destinations of IPv4 ones (the model never makes those).
func (b *Backend) supported(desired proxy.State) proxy.State {
	out, cloned := desired, false
	notIPv4 := func(d netip.AddrPort) bool { return !d.Addr().Is4() }
	for k, v := range desired {
		if k.Addr.Is4() && !slices.ContainsFunc(v.Destinations, notIPv4) {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(desired), true
		}
		if !k.Addr.Is4() {
			delete(out, k)
			continue
		}
		v.Destinations = slices.DeleteFunc(slices.Clone(v.Destinations), notIPv4)
		out[k] = v
	}
	if skipped := len(desired) - len(out); skipped != b.skipped {
		b.skipped = skipped
		b.log.Warn("IPv6 virtual services are not programmed (the table is family ip)", "count", skipped)
	}
	return out
}

// checkForeign verifies the table when the ruleset changed since the backend's last transaction (always, when
// asked to); a table that is not what the backend programmed is marked for a rewrite (synced cleared).
func (b *Backend) checkForeign(always bool) error {
	gen, err := b.sock.generation()
	if err != nil || gen == b.gen && !always {
		return err
	}
	if err := b.verify(); err != nil {
		return err
	}
	if b.synced {
		b.gen = gen
	}
	return nil
}

// verify reads the table back and compares it with the record; a difference clears synced.
func (b *Backend) verify() error {
	b.readBacks++
	got, err := b.sock.readImage(b.cfg.Table)
	if err != nil {
		return err
	}
	if diff := got.difference(expectedImage(b.cfg, b.record)); diff != "" {
		b.log.Warn("the nftables table is not what was programmed; rewriting it", "difference", diff)
		b.synced = false
	}
	return nil
}

// rewrite replaces the table with one holding p, in one transaction (so traffic never sees it half-made). The
// chains and their rules come before the map elements: a rule binding a map with elements makes the kernel walk
// them.
func (b *Backend) rewrite(p proxy.Programmed) error {
	bt := newBatch(b.cfg.Table, batchSize(p)) // adds the table, so that deleting it cannot fail
	bt.delTable()
	bt.addTable()
	for _, s := range sets {
		bt.addSet(s)
	}
	for _, c := range skeleton(b.cfg) {
		if err := bt.addChainRules(c); err != nil {
			return err
		}
	}
	keys := slices.SortedFunc(maps.Keys(p), proxy.Key.Compare)
	chains := map[string]int{}
	services, endpoints := make([]elem, 0, len(keys)), make([]elem, 0, 10*len(keys))
	for _, k := range keys {
		vs := p[k].VirtualService
		c := serviceChain(b.cfg, vs)
		if chains[c.name]++; chains[c.name] == 1 {
			if err := bt.addChainRules(c); err != nil {
				return err
			}
		}
		services = append(services, elem{key: servicesKey(k), gotoChain: c.name})
		endpoints = append(endpoints, endpointElems(vs)...)
	}
	bt.elems(false, setServices, services)
	bt.elems(false, setEndpoints, endpoints)
	hairpin := hairpinCounts(p)
	bt.elems(false, setHairpin, hairpinElems(slices.Collect(maps.Keys(hairpin))))
	gen, err := b.sock.commit(bt)
	if err != nil {
		b.synced = false
		return fmt.Errorf("nft: rewrite table %s with %d virtual services: %w", b.cfg.Table, len(p), err)
	}
	b.record, b.hairpin, b.chains, b.synced = p, hairpin, chains, true
	b.gen, b.committed, b.lastBatch = gen, gen, bt.len()
	return nil
}

// counts are changes to the backend's reference counts (hairpin set elements, chains).
type counts struct {
	hairpin map[netip.Addr]int
	chains  map[string]int
}

// incremental is the transaction that takes the table from b.record to next (the new form of the virtual services
// changes name; absent: deleted), touching only those: a chain that gains its first service is added, one that
// loses its last deleted, an own chain whose rules change rewritten, and the map elements that differ replaced (a
// drained destination's deletion changes nothing in the kernel). It returns the change to the counts too.
func (b *Backend) incremental(next proxy.Programmed, changes []proxy.Change) (*batch, counts, error) {
	bt := newBatch(b.cfg.Table, 4096)
	delta := counts{hairpin: map[netip.Addr]int{}, chains: map[string]int{}}
	var addServices, delServices, addEndpoints, delEndpoints []elem
	added := map[string]chainDef{}
	var rewritten []chainDef
	seen := map[proxy.Key]bool{}
	for _, c := range changes {
		k := c.Service.Key
		if seen[k] {
			continue
		}
		seen[k] = true
		old, had := b.record[k]
		now, has := next[k]
		for _, d := range old.Destinations {
			delta.hairpin[d.Addr()]--
		}
		for _, d := range now.Destinations {
			delta.hairpin[d.Addr()]++
		}
		var oldChain, newChain chainDef
		var oldEndpoints, newEndpoints []elem
		if had {
			oldChain, oldEndpoints = serviceChain(b.cfg, old.VirtualService), endpointElems(old.VirtualService)
		}
		if has {
			newChain, newEndpoints = serviceChain(b.cfg, now.VirtualService), endpointElems(now.VirtualService)
		}
		switch {
		case oldChain.name == newChain.name:
			if !slices.Equal(comments(oldChain.rules), comments(newChain.rules)) {
				rewritten = append(rewritten, newChain) // an own chain
			}
		default:
			if had {
				delta.chains[oldChain.name]--
				delServices = append(delServices, elem{key: servicesKey(k)})
			}
			if has {
				delta.chains[newChain.name]++
				added[newChain.name] = newChain
				addServices = append(addServices, elem{key: servicesKey(k), gotoChain: newChain.name})
			}
		}
		del, add := elemChanges(oldEndpoints, newEndpoints)
		delEndpoints, addEndpoints = append(delEndpoints, del...), append(addEndpoints, add...)
	}
	var delChains []string
	for _, name := range slices.Sorted(maps.Keys(delta.chains)) {
		switch before, after := b.chains[name], b.chains[name]+delta.chains[name]; {
		case after < 0:
			return nil, counts{}, fmt.Errorf("nft: reference count of chain %s went negative (a bug)", name)
		case before == 0 && after > 0:
			if err := bt.addChainRules(added[name]); err != nil {
				return nil, counts{}, err
			}
		case before > 0 && after == 0:
			delChains = append(delChains, name)
		}
	}
	for _, c := range rewritten {
		bt.flushChain(c.name)
		for _, r := range c.rules {
			if err := bt.addRule(c.name, r); err != nil {
				return nil, counts{}, err
			}
		}
	}
	addHairpin, delHairpin, err := b.hairpinChanges(delta.hairpin)
	if err != nil {
		return nil, counts{}, err
	}
	// Deletions first: a replaced element is deleted and added again.
	bt.elems(true, setServices, delServices)
	bt.elems(true, setEndpoints, delEndpoints)
	bt.elems(true, setHairpin, hairpinElems(delHairpin))
	bt.elems(false, setServices, addServices)
	bt.elems(false, setEndpoints, addEndpoints)
	bt.elems(false, setHairpin, hairpinElems(addHairpin))
	for _, chain := range delChains {
		bt.flushChain(chain) // older kernels refuse to delete a chain that has rules
		bt.delChain(chain)
	}
	return bt, delta, nil
}

// elemChanges are the elements of old to delete and of new to add to go from old to new (a key whose value
// changes is in both).
func elemChanges(old, new []elem) (del, add []elem) {
	was := make(map[string][]byte, len(old))
	for _, e := range old {
		was[string(e.key)] = e.data
	}
	for _, e := range new {
		data, ok := was[string(e.key)]
		if ok && bytes.Equal(data, e.data) {
			delete(was, string(e.key))
			continue
		}
		if ok {
			del = append(del, elem{key: e.key})
			delete(was, string(e.key))
		}
		add = append(add, e)
	}
	for _, e := range old {
		if _, ok := was[string(e.key)]; ok {
			del = append(del, elem{key: e.key})
		}
	}
	return del, add
}

// hairpinChanges are the addresses that enter and leave the hairpin set when the counts change by delta (whose
// zero entries it drops).
func (b *Backend) hairpinChanges(delta map[netip.Addr]int) (add, del []netip.Addr, err error) {
	for a, d := range delta {
		before := b.hairpin[a]
		switch after := before + d; {
		case d == 0:
			delete(delta, a)
		case before == 0 && after > 0:
			add = append(add, a)
		case before > 0 && after == 0:
			del = append(del, a)
		case after < 0:
			return nil, nil, fmt.Errorf("nft: hairpin count of %v went negative (a bug)", a)
		}
	}
	return add, del, nil
}

func hairpinElems(addrs []netip.Addr) []elem {
	slices.SortFunc(addrs, netip.Addr.Compare)
	out := make([]elem, len(addrs))
	for i, a := range addrs {
		out[i] = elem{key: hairpinKey(a)}
	}
	return out
}

// batchSize estimates the bytes of a transaction writing p: about 100 per map element, 300 per rule of an own
// chain.
func batchSize(p proxy.Programmed) int {
	n := 1 << 16
	for _, ps := range p {
		if n += 100 * (1 + len(ps.Destinations)); ps.Affinity > 0 {
			n += 300 * (1 + 2*len(ps.Destinations))
		}
	}
	return n
}

// programmedOf is desired as a freshly written table holds it: every destination active, none drained.
func programmedOf(desired proxy.State) proxy.Programmed {
	out := make(proxy.Programmed, len(desired))
	for k, v := range desired {
		v.Destinations = slices.Clone(v.Destinations)
		out[k] = proxy.ProgrammedService{VirtualService: v}
	}
	return out
}

// lastCommit is the generation the backend's last commit made.
func (b *Backend) lastCommit() uint32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.committed
}

// currentGeneration asks the kernel for the ruleset generation.
func (b *Backend) currentGeneration() (uint32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sock.generation()
}

// verifyNow reads the table back, when synced, and marks it for a rewrite if it is not as programmed.
func (b *Backend) verifyNow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.synced {
		return nil
	}
	return b.verify()
}

// deleteTables deletes the tables named (absent ones too) in one transaction.
func (b *Backend) deleteTables(names []string) error {
	if len(names) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := newBatch(names[0], 256*len(names)) // adds each table before deleting it, so that deleting cannot fail
	bt.delTable()
	for _, name := range names[1:] {
		bt.table = name
		bt.addTable()
		bt.delTable()
	}
	gen, err := b.sock.commit(bt)
	if err != nil {
		return fmt.Errorf("nft: delete tables %s: %w", strings.Join(names, ", "), err)
	}
	b.committed = gen
	return nil
}
