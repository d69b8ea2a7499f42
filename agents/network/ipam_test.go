package network

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

func newTestAllocator(t *testing.T, dir, cidr string) *allocator {
	t.Helper()
	a, err := newAllocator(dir, netip.MustParsePrefix(cidr))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustAllocate(t *testing.T, a *allocator, id string) string {
	t.Helper()
	ip, err := a.allocate(id)
	if err != nil {
		t.Fatalf("allocate %s: %v", id, err)
	}
	return ip.String()
}

// TestAllocatorReleaseReuse: a /29 has five pod addresses (.2 to .6); a sixth sandbox finds none; a released
// address is handed out again once the others are taken; a sandbox keeps the one it holds.
func TestAllocatorReleaseReuse(t *testing.T) {
	dir := t.TempDir()
	a := newTestAllocator(t, dir, "10.1.0.0/29")
	for i := range 5 {
		if got, want := mustAllocate(t, a, fmt.Sprint("s", i)), fmt.Sprintf("10.1.0.%d", i+2); got != want {
			t.Fatalf("s%d got %s, want %s", i, got, want)
		}
	}
	if got := mustAllocate(t, a, "s3"); got != "10.1.0.5" {
		t.Fatalf("s3 again got %s", got)
	}
	if _, err := a.allocate("s5"); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("a sixth allocation: %v, want ErrNoAddress", err)
	}
	for _, id := range []string{"s1", "s1", "unknown"} { // releasing twice, or what was never held, is fine
		if err := a.release(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustAllocate(t, a, "s5"); got != "10.1.0.3" {
		t.Fatalf("s5 got %s, want s1's released 10.1.0.3", got)
	}
	// Rotation: with two free, the next after the last handed out comes first, wrapping around.
	for _, id := range []string{"s0", "s4"} {
		if err := a.release(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustAllocate(t, a, "s6"); got != "10.1.0.6" {
		t.Fatalf("s6 got %s, want 10.1.0.6 (after the last, 10.1.0.3)", got)
	}
	if got := mustAllocate(t, a, "s7"); got != "10.1.0.2" {
		t.Fatalf("s7 got %s, want 10.1.0.2 (wrapped)", got)
	}

	// A new allocator on the same state dir (an agent restart) sees it all.
	b := newTestAllocator(t, dir, "10.1.0.0/29")
	held, err := b.allocations()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"10.1.0.2": "s7", "10.1.0.3": "s5", "10.1.0.4": "s2", "10.1.0.5": "s3", "10.1.0.6": "s6"}
	if len(held) != len(want) {
		t.Fatalf("held %v, want %v", held, want)
	}
	for ip, id := range held {
		if want[ip.String()] != id {
			t.Fatalf("held %v, want %v", held, want)
		}
	}
	// Another pod CIDR starts afresh.
	if got := mustAllocate(t, newTestAllocator(t, dir, "10.1.1.0/29"), "s0"); got != "10.1.1.2" {
		t.Fatalf("in another CIDR: %s", got)
	}
}

// TestAllocatorConcurrent: allocators on one state dir (as two processes would be) never hand out an address
// twice.
func TestAllocatorConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([][]string, 4)
	for w := range got {
		a := newTestAllocator(t, dir, "10.2.0.0/24")
		wg.Go(func() {
			for i := range 50 {
				ip, err := a.allocate(fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], ip.String())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ips := range got {
		for _, ip := range ips {
			if seen[ip] {
				t.Fatalf("%s handed out twice", ip)
			}
			seen[ip] = true
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d addresses handed out, want 200", len(seen))
	}
}

func TestAddresses(t *testing.T) {
	p := netip.MustParsePrefix("10.244.3.0/24")
	a := &allocator{cidr: p}
	first, last := a.hosts()
	for _, tc := range []struct{ name, got, want string }{
		{"gateway", gateway(p).String(), "10.244.3.1"},
		{"first", first.String(), "10.244.3.2"},
		{"last", last.String(), "10.244.3.254"},
		{"broadcast", broadcast(p).String(), "10.244.3.255"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if n := hostInterface("x"); len(n) != 14 || n == hostInterface("y") {
		t.Errorf("host interface names: %q, %q", n, hostInterface("y"))
	}
}
