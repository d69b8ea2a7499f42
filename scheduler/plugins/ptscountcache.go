package plugins

import (
	"sync"
	"sync/atomic"
)

// ptsCountShards is the number of locks of ptsCountCache: enough that the scheduler's parallel node passes
// (16 workers) rarely meet on one.
const ptsCountShards = 64

// ptsCountCache maps count keys to counts, for the spread plugin's passes over every node: two integers a key,
// sharded plain maps under read-write locks. A sync.Map boxed every key into an interface and hashed it
// through the runtime's generic path, which took 8 % of the server's CPU when 1,000 hollow nodes' pods were
// being scheduled. Past max entries it starts over empty.
type ptsCountCache struct {
	max    int64
	size   atomic.Int64
	shards [ptsCountShards]ptsCountShard
}

type ptsCountShard struct {
	mu sync.RWMutex
	m  map[ptsCountKey]int
	_  [40]byte // keeps neighbouring shards' locks off one cache line
}

func newPTSCountCache(max int64) *ptsCountCache {
	c := &ptsCountCache{max: max}
	for i := range c.shards {
		c.shards[i].m = map[ptsCountKey]int{}
	}
	return c
}

func (c *ptsCountCache) shard(k ptsCountKey) *ptsCountShard {
	h := uint64(k.gen)*0x9E3779B97F4A7C15 ^ uint64(k.question)*0xC2B2AE3D27D4EB4F
	return &c.shards[h>>(64-6)]
}

func (c *ptsCountCache) get(k ptsCountKey) (int, bool) {
	s := c.shard(k)
	s.mu.RLock()
	n, ok := s.m[k]
	s.mu.RUnlock()
	return n, ok
}

func (c *ptsCountCache) put(k ptsCountKey, n int) {
	if c.size.Add(1) > c.max {
		c.size.Store(0)
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			s.m = map[ptsCountKey]int{}
			s.mu.Unlock()
		}
	}
	s := c.shard(k)
	s.mu.Lock()
	s.m[k] = n
	s.mu.Unlock()
}
