package tenancy

import (
	"testing"
	"time"
)

func TestTTLCache(t *testing.T) {
	clock := newFakeClock()
	c := newTTLCache[string, int](10*time.Second, 3, clock.Now)
	c.put("a", 1)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Fatalf("get(a) = %v, %v", v, ok)
	}
	clock.Advance(9 * time.Second)
	c.put("b", 2)
	if _, ok := c.get("a"); !ok {
		t.Error("a expired before its TTL")
	}
	clock.Advance(time.Second)
	if _, ok := c.get("a"); ok {
		t.Error("a outlived its TTL")
	}
	if _, ok := c.get("b"); !ok {
		t.Error("b expired early")
	}

	// Full: expired entries go first, then arbitrary ones; the bound holds.
	c.put("c", 3)
	c.put("d", 4) // evicts expired a
	if n := c.len(); n != 3 {
		t.Errorf("len = %d after evicting the expired entry, want 3", n)
	}
	for i := range 10 {
		c.put(string(rune('e'+i)), i)
		if n := c.len(); n > 3 {
			t.Fatalf("len = %d, above the bound 3", n)
		}
	}
	if _, ok := c.get("n"); !ok {
		t.Error("the newest entry was evicted")
	}
	c.removeFunc(func(k string, _ int) bool { return k == "n" })
	if _, ok := c.get("n"); ok {
		t.Error("removeFunc kept n")
	}
}

func TestTTLCacheDisabled(t *testing.T) {
	c := newTTLCache[string, int](-1, 10, time.Now)
	c.put("a", 1)
	if _, ok := c.get("a"); ok {
		t.Error("a disabled cache returned an entry")
	}
}
