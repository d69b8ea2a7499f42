package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// historyEntry is what a watcher must see for one committed write.
type historyEntry struct {
	Rev  int64
	Type EventType
	Key  Key
}

// TestTorture runs two store instances (separate pools and LISTEN connections) with 16 writers each doing
// create / CAS update / delete on a small key space over three clusters. One batch holds its transaction
// open for 2 s before taking the revision lock (others commit meanwhile) and one holds it 2 s after (others
// wait). Watchers on both instances, started at several revisions, over one cluster or all, must see exactly
// the committed history: every write in revision order, no gaps, no duplicates, nothing that was not
// acknowledged. The second variant also kills the LISTEN connections mid-run, with polling switched off, so
// only reconnects can deliver.
func TestTorture(t *testing.T) {
	for _, killListen := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill LISTEN=%v", killListen), func(t *testing.T) { torture(t, killListen) })
	}
}

func torture(t *testing.T, killListen bool) {
	url := pgtest.NewDatabase(t)
	var stallBefore, stallAfter atomic.Bool
	stallBefore.Store(true)
	stallAfter.Store(true)
	poll := 100 * time.Millisecond
	if killListen {
		poll = time.Hour // delivery must come from NOTIFY on a reconnected LISTEN, not from polling
	}
	cfg := func(c *Config) { c.PollInterval = poll; c.ProgressInterval = 50 * time.Millisecond }
	a := openURL(t, url, cfg)
	b := openURL(t, url, cfg)
	a.hooks.afterBegin = func() {
		if stallBefore.CompareAndSwap(true, false) {
			time.Sleep(2 * time.Second) // transaction open, revision lock not yet taken
		}
	}
	b.hooks.beforeCommit = func() {
		if stallAfter.CompareAndSwap(true, false) {
			time.Sleep(2 * time.Second) // revision lock held: every other writer waits
		}
	}
	ctx := t.Context()
	start := mustCreate(t, a, key("c0", "ns", "start"), "x").Revision

	type watch struct {
		name string
		w    *Watcher
		opts WatchOptions
		got  []historyEntry
		done chan struct{}
	}
	var watches []*watch
	var final atomic.Int64 // set once writers are done
	startWatch := func(name string, s *Store, opts WatchOptions) {
		opts.Progress = true
		w, err := s.Watch(ctx, opts)
		if err != nil {
			t.Fatalf("watch %s: %v", name, err)
		}
		wt := &watch{name: name, w: w, opts: opts, done: make(chan struct{})}
		watches = append(watches, wt)
		go func() {
			defer close(wt.done)
			for ev := range w.Events() {
				if ev.Type != Bookmark {
					wt.got = append(wt.got, historyEntry{ev.Revision(), ev.Type, ev.Object.Key})
				}
				if f := final.Load(); f != 0 && ev.Revision() >= f {
					w.Stop()
				}
			}
		}()
	}
	startWatch("a/all", a, WatchOptions{Revision: start})
	startWatch("b/all", b, WatchOptions{Revision: start})
	startWatch("a/c1", a, WatchOptions{Cluster: "c1", Revision: start})
	startWatch("b/c2/pods", b, WatchOptions{Cluster: "c2", Resource: "pods", Revision: start})

	var acked sync.Map // revision → historyEntry, for every acknowledged write
	var wg sync.WaitGroup
	writer := func(s *Store, id int) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(id), 42))
		for i := range 120 {
			k := Key{Cluster: fmt.Sprintf("c%d", r.IntN(3)), Resource: "pods", Namespace: "ns", Name: fmt.Sprintf("k%d", r.IntN(12))}
			var o Object
			var err error
			var typ EventType
			switch r.IntN(3) {
			case 0:
				o, err = s.Create(ctx, k, fmt.Appendf(nil, "w%d-%d", id, i))
				typ = Added
			case 1:
				cur, gerr := s.Get(ctx, k)
				if gerr != nil {
					continue
				}
				o, err = s.Update(ctx, k, fmt.Appendf(nil, "w%d-%d", id, i), cur.Revision)
				typ = Modified
			default:
				o, err = s.Delete(ctx, k, 0)
				typ = Deleted
			}
			switch {
			case err == nil:
				acked.Store(o.Revision, historyEntry{o.Revision, typ, k})
			case errors.Is(err, ErrExists), errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
			default:
				t.Errorf("writer %d: %v", id, err)
				return
			}
		}
	}
	for i := range 16 {
		wg.Add(2)
		go writer(a, i)
		go writer(b, 100+i)
	}
	// Mid-run: more watchers from revisions already passed, and (variant) LISTEN connections killed.
	midDone := make(chan struct{})
	go func() {
		defer close(midDone)
		for range 4 {
			time.Sleep(300 * time.Millisecond)
			if killListen {
				if _, err := a.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE application_name = 'wheelhouse-listen' AND datname = current_database()`); err != nil {
					t.Errorf("terminate LISTEN: %v", err)
				}
			}
		}
	}()
	// Mid-run: once a few hundred writes have committed (polled, with a deadline).
	var mid int64
	for deadline := time.Now().Add(30 * time.Second); mid < start+200; {
		if time.Now().After(deadline) {
			t.Fatalf("writers made no progress: revision %d", mid)
		}
		mid, _ = a.CurrentRevision(ctx)
	}
	startWatch("b/all/mid", b, WatchOptions{Revision: mid})
	startWatch("a/c0/mid", a, WatchOptions{Cluster: "c0", Revision: (start + mid) / 2})
	wg.Wait()
	<-midDone
	if t.Failed() {
		t.FailNow()
	}
	last, err := a.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	final.Store(last)
	if stallBefore.Load() || stallAfter.Load() {
		t.Fatal("the stalled transactions never ran")
	}

	// The committed history, read back, must be exactly the acknowledged writes.
	rows, err := a.pool.Query(ctx, `SELECT rev, type, cluster, resource, namespace, name FROM history WHERE rev > $1 ORDER BY rev`, start)
	if err != nil {
		t.Fatal(err)
	}
	var committed []historyEntry
	for rows.Next() {
		var e historyEntry
		var typ int16
		if err := rows.Scan(&e.Rev, &typ, &e.Key.Cluster, &e.Key.Resource, &e.Key.Namespace, &e.Key.Name); err != nil {
			t.Fatal(err)
		}
		e.Type = EventType(typ)
		committed = append(committed, e)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var ackedList []historyEntry
	acked.Range(func(_, v any) bool { ackedList = append(ackedList, v.(historyEntry)); return true })
	sortEntries(ackedList)
	if diff := gocmp.Diff(ackedList, committed); diff != "" {
		t.Fatalf("committed history differs from acknowledged writes (-acked +committed):\n%s", diff)
	}
	if len(committed) < 1000 {
		t.Fatalf("only %d writes committed; the workload is too small to mean anything", len(committed))
	}

	// Wake the hubs (bookmarks keep flowing only if someone notices the end): one last write.
	mustCreate(t, a, key("c9", "ns", "end"), "x")
	for _, wt := range watches {
		select {
		case <-wt.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("watch %s: stalled after %d events (last %v); err %v", wt.name, len(wt.got), lastOf(wt.got), wt.w.Err())
		}
		if err := wt.w.Err(); err != nil {
			t.Fatalf("watch %s ended with %v", wt.name, err)
		}
		var want []historyEntry
		for _, e := range committed {
			if e.Rev > wt.opts.Revision && wt.opts.matches(e.Key) {
				want = append(want, e)
			}
		}
		got := wt.got
		for len(got) > 0 && got[len(got)-1].Rev > last {
			got = got[:len(got)-1] // the end marker
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Fatalf("watch %s from %d (-committed +delivered):\n%s", wt.name, wt.opts.Revision, diff)
		}
	}
}

func lastOf(es []historyEntry) any {
	if len(es) == 0 {
		return nil
	}
	return es[len(es)-1]
}

func sortEntries(es []historyEntry) {
	slices.SortFunc(es, func(a, b historyEntry) int { return cmp.Compare(a.Rev, b.Rev) })
}
