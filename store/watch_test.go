package store

import (
	"fmt"
	"testing"
	"time"
)

func TestWatchDeliversChangesInOrder(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	w, err := s.Watch(ctx, WatchOptions{Cluster: "c1", Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	k := key("c1", "ns", "a")
	c := mustCreate(t, s, k, "1")
	mustCreate(t, s, key("c2", "ns", "a"), "other cluster")
	mustCreate(t, s, Key{Cluster: "c1", Resource: "services", Namespace: "ns", Name: "a"}, "other resource")
	u, _ := s.Update(ctx, k, []byte("2"), c.Revision)
	d, _ := s.Delete(ctx, k, u.Revision)

	for _, want := range []struct {
		typ  EventType
		rev  int64
		prev int64
		val  string
	}{{Added, c.Revision, 0, "1"}, {Modified, u.Revision, c.Revision, "2"}, {Deleted, d.Revision, u.Revision, "2"}} {
		ev := nextChange(t, w)
		if ev.Type != want.typ || ev.Revision() != want.rev || ev.PrevRevision != want.prev || string(ev.Object.Value) != want.val || ev.Object.Key != k {
			t.Fatalf("event = %v rev %d prev %d %q %s; want %v rev %d prev %d %q", ev.Type, ev.Revision(), ev.PrevRevision,
				ev.Object.Value, ev.Object.Key, want.typ, want.rev, want.prev, want.val)
		}
	}
}

func TestWatchResumesFromAnyRevision(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	var revs []int64
	for i := range 30 {
		o := mustCreate(t, s, key("c1", "ns", fmt.Sprintf("p%02d", i)), "x")
		revs = append(revs, o.Revision)
	}
	for _, from := range []int{0, 10, 29} {
		w, err := s.Watch(ctx, WatchOptions{Cluster: "c1", Revision: revs[from]})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range revs[from+1:] {
			if ev := nextChange(t, w); ev.Revision() != want {
				t.Fatalf("from %d: got revision %d, want %d", revs[from], ev.Revision(), want)
			}
		}
		live := mustCreate(t, s, key("c1", "ns", fmt.Sprintf("live-%d", from)), "x")
		if ev := nextChange(t, w); ev.Revision() != live.Revision {
			t.Fatalf("after replay got %d, want live %d", ev.Revision(), live.Revision)
		}
		revs = append(revs, live.Revision)
		w.Stop()
	}
	cur, _ := s.CurrentRevision(ctx)
	_, err := s.Watch(ctx, WatchOptions{Revision: cur + 10})
	wantErr(t, err, ErrFutureRevision)
}

// A catch-up longer than one page, across clusters, with a watch over all clusters.
func TestWatchAllClustersLongReplay(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	start := mustCreate(t, s, key("c0", "ns", "first"), "x").Revision // revision 0 would mean "from now"
	const n = 2500
	for i := range n {
		mustCreate(t, s, key(fmt.Sprintf("c%d", i%3), "ns", fmt.Sprintf("p%04d", i)), "x")
	}
	w, err := s.Watch(ctx, WatchOptions{Revision: start})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	last := start
	for range n {
		ev := nextChange(t, w)
		if ev.Revision() <= last {
			t.Fatalf("revision %d after %d", ev.Revision(), last)
		}
		last = ev.Revision()
	}
}

func TestWatchBookmarks(t *testing.T) {
	s := openTest(t, func(c *Config) { c.ProgressInterval = 50 * time.Millisecond })
	ctx := t.Context()
	w, err := s.Watch(ctx, WatchOptions{Cluster: "quiet", Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Writes elsewhere move the bookmark past them although this watcher sees no event.
	o := mustCreate(t, s, key("busy", "ns", "a"), "x")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := nextEvent(t, w)
		if ev.Type != Bookmark {
			t.Fatalf("unexpected %v event", ev.Type)
		}
		if ev.Revision() >= o.Revision {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bookmarks never reached revision %d", o.Revision)
		}
	}
	noProgress, err := s.Watch(ctx, WatchOptions{Cluster: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	defer noProgress.Stop()
	mustCreate(t, s, key("quiet", "ns", "b"), "x")
	if ev := nextEvent(t, noProgress); ev.Type != Added {
		t.Fatalf("watch without progress got %v first", ev.Type)
	}
}

func TestSlowWatcherIsClosedAndOthersContinue(t *testing.T) {
	s := openTest(t, func(c *Config) { c.WatchBuffer = 16 })
	ctx := t.Context()
	slow, err := s.Watch(ctx, WatchOptions{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, WatchOptions{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	// A watcher with a buffer of its own (the watch cache's) outlasts the store's default.
	roomy, err := s.Watch(ctx, WatchOptions{Cluster: "c1", Buffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer roomy.Stop()
	// Lockstep: each write waits until the fast watcher has it, so its backlog never exceeds one event whatever
	// the machine's load, while the slow one, which never reads, overflows its 16-event buffer.
	for i := range 40 {
		o := mustCreate(t, s, key("c1", "ns", fmt.Sprintf("p%d", i)), "x")
		select {
		case ev, ok := <-fast.Events():
			if !ok {
				t.Fatalf("fast watcher closed: %v", fast.Err())
			}
			if ev.Revision() != o.Revision {
				t.Fatalf("fast watcher got %d, want %d", ev.Revision(), o.Revision)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("fast watcher stalled")
		}
	}
	// The slow one never read: after its buffer filled it was closed with ErrWatcherSlow.
	n := 0
	for range slow.Events() {
		n++
	}
	wantErr(t, slow.Err(), ErrWatcherSlow)
	if n >= 40 {
		t.Fatalf("slow watcher delivered all %d events; expected it to be cut off", n)
	}
	for i := range 40 {
		select {
		case ev, ok := <-roomy.Events():
			if !ok {
				t.Fatalf("the watcher with a 64-event buffer was closed after %d events: %v", i, roomy.Err())
			}
			if ev.Object.Key.Name != fmt.Sprintf("p%d", i) {
				t.Fatalf("event %d is %s", i, ev.Object.Key.Name)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the watcher with a 64-event buffer stalled after %d events", i)
		}
	}
}

func TestCompaction(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	k := key("c1", "ns", "a")
	o := mustCreate(t, s, k, "1")
	old := o.Revision
	for i := range 5 {
		o, _ = s.Update(ctx, k, []byte(fmt.Sprint(i)), 0)
	}
	gone := mustCreate(t, s, key("c1", "ns", "gone"), "x")
	keep := mustCreate(t, s, key("c1", "ns", "keep"), "x")
	at, _ := s.CurrentRevision(ctx)
	before, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Revision: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, at-1); err != nil { // idempotent, never goes back
		t.Fatal(err)
	}
	if c, _ := s.CompactRevision(ctx); c != at {
		t.Fatalf("compact revision %d, want %d", c, at)
	}
	wantErr(t, s.Compact(ctx, at+100), ErrFutureRevision)

	_, err = s.Watch(ctx, WatchOptions{Revision: old})
	wantErr(t, err, ErrCompacted)
	_, err = s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Revision: old})
	wantErr(t, err, ErrCompacted)

	// The state at the compaction revision is still exact.
	after, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Revision: at})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(before.Items)) != fmt.Sprint(names(after.Items)) {
		t.Fatalf("state at %d changed by compaction: %v → %v", at, names(before.Items), names(after.Items))
	}

	// A watch opened exactly at the compaction revision sees later changes, deletes with their last state.
	w, err := s.Watch(ctx, WatchOptions{Cluster: "c1", Revision: at})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	d, err := s.Delete(ctx, gone.Key, 0)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := s.Delete(ctx, k, 0)
	for _, want := range []Object{d, d2} {
		ev := nextChange(t, w)
		if ev.Type != Deleted || ev.Revision() != want.Revision || string(ev.Object.Value) != string(want.Value) {
			t.Fatalf("got %v %d %q, want DELETED %d %q", ev.Type, ev.Revision(), ev.Object.Value, want.Revision, want.Value)
		}
	}
	// History keeps exactly what reads at >= at need: one version of each live key at or below at.
	var rows int
	s.pool.QueryRow(ctx, "SELECT count(*) FROM history WHERE rev <= $1", at).Scan(&rows)
	if rows != 3 {
		t.Fatalf("%d history rows at or below the compaction revision, want 3 (a, gone, keep)", rows)
	}
	_ = keep
}

// Under constant churn with retention-based compaction, history stays bounded.
func TestRetentionBoundsHistory(t *testing.T) {
	s := openTest(t, func(c *Config) {
		c.Retention = 200 * time.Millisecond
		c.CompactInterval = 50 * time.Millisecond
	})
	ctx := t.Context()
	k := key("c1", "ns", "churn")
	mustCreate(t, s, k, "x")
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		if _, err := s.Update(ctx, k, []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatal(err)
		}
		if i < 300 {
			continue
		}
		var rows int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM history").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if c, _ := s.CompactRevision(ctx); c > 0 && rows < i/2 {
			return // the compactor runs and history is far smaller than the number of writes
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d updates history still has %d rows", i, rows)
		}
	}
}
