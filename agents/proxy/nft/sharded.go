package nft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// DefaultShards is the number of tables a Sharded backend spreads the virtual services over when
// NewSharded is given 0.
const DefaultShards = 8

// MaxShards bounds NewSharded's shards: every table adds its base chains to every new connection's path.
const MaxShards = 64

// Sharded spreads the virtual services over several tables (Config.Table + "-0", "-1", ...), each a Backend with
// its own hooks, by a hash of the virtual service's key. The kernel checks a whole table in every transaction that
// adds a rule or a jump (when rules were one per endpoint: ~57 ms at 10,000 services of 10 endpoints in one table;
// now a few ms): a change costs the check of its own table only, and a full sync builds the tables in parallel. A packet of a new connection passes every table's hooks (NAT chains see only a connection's first
// packet); the first masquerade applies and clears the mark, so the tables' postrouting chains do not interfere.
//
// Each table changes in its own transaction, the tables in parallel (a full sync keeps both cores busy: the
// kernel works in the sending thread): a Sync is atomic per table, not across them. Sharded checks the ruleset
// generation once per Sync for all its tables: when only its own commits happened since the last one (the
// generations they made follow each other from the one it knew), no table is read back; otherwise every table
// is, and those someone else changed are rewritten. Its methods are safe for concurrent use.
type Sharded struct {
	cfg    Config
	shards []*Backend

	mu sync.Mutex // serialises the methods and guards the fields below
	// swept: the first Sync removed the tables of another layout (a single table, or more shards).
	swept bool
	// gen is the ruleset generation after the tables' last commits, when known (none of someone else's since).
	gen   uint32
	known bool
}

// NewSharded opens a backend of n tables (0: DefaultShards) for cfg (its Table names them: Table-0 ...).
func NewSharded(cfg Config, n int) (*Sharded, error) {
	if n == 0 {
		n = DefaultShards
	}
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("nft: %d tables: want 1 to %d", n, MaxShards)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Sharded{cfg: cfg}
	for i := range n {
		c := cfg
		c.Table = shardTable(cfg.Table, i)
		b, err := New(c)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.shards = append(s.shards, b)
	}
	return s, nil
}

func shardTable(table string, i int) string { return table + "-" + strconv.Itoa(i) }

// shard is the table index of a virtual service: a multiplicative hash of its address, port and protocol (run for
// every virtual service at every Sync, so no allocation; stable across processes).
func (s *Sharded) shard(k proxy.Key) int {
	a := k.Addr.As16()
	p := uint64(k.Port)
	for i := range len(k.Protocol) {
		p = p*31 + uint64(k.Protocol[i])
	}
	h := binary.LittleEndian.Uint64(a[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(a[8:])*0xc2b2ae3d27d4eb4f ^ p*0x165667b19e3779f9
	h ^= h >> 31
	h *= 0xd6e8feb86659fd93
	h ^= h >> 32
	return int(h % uint64(len(s.shards)))
}

// split divides desired between the tables.
func (s *Sharded) split(desired proxy.State) []proxy.State {
	parts := make([]proxy.State, len(s.shards))
	for i := range parts {
		parts[i] = make(proxy.State, len(desired)/len(parts)+1)
	}
	for k, v := range desired {
		parts[s.shard(k)][k] = v
	}
	return parts
}

// Sync makes each table hold its part of desired; a table whose part did not change makes no transaction. A table
// the kernel refuses does not stop the others: the error names it, and its next Sync rewrites it.
func (s *Sharded) Sync(ctx context.Context, desired proxy.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.swept {
		if err := s.sweep(); err != nil {
			return err
		}
		s.swept = true
	}
	parts := s.split(desired)
	return s.parallel(true, func(i int, b *Backend) error { return b.sync(ctx, parts[i], false) })
}

// Resync reads every table back and rewrites those that are not what was programmed.
func (s *Sharded) Resync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known = false
	return s.parallel(false, func(_ int, b *Backend) error { return b.Resync(ctx) })
}

// parallel runs fn on every table, GOMAXPROCS at a time, and keeps track of the ruleset generation: it is read
// once before (when verify, every table is read back first unless only the tables' own commits happened since the
// last time), and known after when the tables' commits made the generations that follow it.
func (s *Sharded) parallel(verify bool, fn func(i int, b *Backend) error) error {
	start, err := s.shards[0].currentGeneration()
	if err != nil {
		return err
	}
	if verify && (!s.known || start != s.gen) {
		if err := s.run(func(_ int, b *Backend) error { return b.verifyNow() }); err != nil {
			s.known = false
			return err
		}
	}
	before := make([]uint32, len(s.shards))
	for i, b := range s.shards {
		before[i] = b.lastCommit()
	}
	err = s.run(fn)
	var made []uint32
	for i, b := range s.shards {
		if g := b.lastCommit(); g != before[i] {
			made = append(made, g)
		}
	}
	slices.Sort(made)
	s.known = true
	for j, g := range made {
		s.known = s.known && g == start+uint32(j)+1
	}
	s.gen = start + uint32(len(made))
	return err
}

// run calls fn on every table, GOMAXPROCS at a time, and joins the errors.
func (s *Sharded) run(fn func(i int, b *Backend) error) error {
	errs := make([]error, len(s.shards))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, b := range s.shards {
		g.Go(func() error { errs[i] = fn(i, b); return nil })
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// sweep removes the tables of another layout: the single table (Config.Table) and shards past this number.
func (s *Sharded) sweep() error {
	stale := []string{s.cfg.Table}
	for i := len(s.shards); i < MaxShards; i++ {
		stale = append(stale, shardTable(s.cfg.Table, i))
	}
	s.known = false
	return s.shards[0].deleteTables(stale)
}

// Programmed is what the tables hold, together.
func (s *Sharded) Programmed() proxy.Programmed {
	out := proxy.Programmed{}
	for _, b := range s.shards {
		for k, v := range b.Programmed() {
			out[k] = v
		}
	}
	return out
}

// Cleanup removes every table (of this layout and of others).
func (s *Sharded) Cleanup(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, b := range s.shards {
		errs = append(errs, b.Cleanup(ctx))
	}
	errs = append(errs, s.sweep())
	s.swept = false
	return errors.Join(errs...)
}

// Close releases the tables' sockets; the tables stay.
func (s *Sharded) Close() error {
	var errs []error
	for _, b := range s.shards {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}
