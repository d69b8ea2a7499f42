package tenancy

import (
	"sync"
	"time"
)

// ttlCache is a bounded map whose entries expire ttl after they were put. It is safe for concurrent use.
// A cache with ttl <= 0 holds nothing.
type ttlCache[K comparable, V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex // guards entries; no other lock is taken while it is held
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[K comparable, V any](ttl time.Duration, size int, now func() time.Time) *ttlCache[K, V] {
	return &ttlCache[K, V]{ttl: ttl, max: size, now: now, entries: make(map[K]ttlEntry[V])}
}

// get returns the value stored under k unless it has expired.
func (c *ttlCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores v under k for ttl. When the cache is full it first drops expired entries, then an arbitrary one.
func (c *ttlCache[K, V]) put(k K, v V) {
	if c.ttl <= 0 || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[k] = ttlEntry[V]{value: v, expires: now.Add(c.ttl)}
}

// evict makes room for one entry. Called with mu held.
func (c *ttlCache[K, V]) evict(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < c.max {
			return
		}
		delete(c.entries, k)
	}
}

// removeFunc drops every entry for which drop returns true.
func (c *ttlCache[K, V]) removeFunc(drop func(K, V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if drop(k, e.value) {
			delete(c.entries, k)
		}
	}
}

// len is the number of entries held, expired or not.
func (c *ttlCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
