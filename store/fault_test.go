package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// When PostgreSQL cannot be reached, or does not answer, calls fail within their deadline with ErrUnavailable,
// and the store recovers by itself, watchers included, with nothing lost.
func TestUnavailableAndRecovery(t *testing.T) {
	proxy, url := newFaultProxy(t, pgtest.NewDatabase(t))
	s := openURL(t, url+"&connect_timeout=1", func(c *Config) {
		c.PollInterval = 100 * time.Millisecond
		c.QueryTimeout = time.Second
	})
	ctx := t.Context()
	first := mustCreate(t, s, key("c1", "ns", "before"), "x")
	mustCreate(t, s, key("c1", "ns", "before-2"), "x") // so a watch from first needs the database
	w, err := s.Watch(ctx, WatchOptions{Cluster: "c1", Revision: first.Revision})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := nextChange(t, w); ev.Object.Name != "before-2" { // the hub is now past first
		t.Fatalf("first event %s, want before-2", ev.Object.Name)
	}

	for _, mode := range []proxyMode{proxyRefuse, proxyBlackhole} {
		proxy.set(mode)
		for name, call := range map[string]func(context.Context) error{
			"create": func(ctx context.Context) error { _, err := s.Create(ctx, key("c1", "ns", "x"), nil); return err },
			"get":    func(ctx context.Context) error { _, err := s.Get(ctx, first.Key); return err },
			"list": func(ctx context.Context) error {
				_, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods"})
				return err
			},
			"update": func(ctx context.Context) error { _, err := s.Update(ctx, first.Key, nil, 0); return err },
			"watch": func(ctx context.Context) error {
				_, err := s.Watch(ctx, WatchOptions{Revision: first.Revision})
				return err
			},
		} {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			began := time.Now()
			err := call(cctx)
			cancel()
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("mode %d: %s: error %v, want ErrUnavailable", mode, name, err)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("mode %d: %s took %v, far past its 500ms deadline", mode, name, took)
			}
		}
	}
	proxy.set(proxyUp)
	var after Object
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		after, err = s.Create(cctx, key("c1", "ns", "after"), []byte("y"))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store did not recover: %v", err)
		}
	}
	ev := nextChange(t, w)
	if ev.Revision() != after.Revision || ev.Object.Name != "after" {
		t.Fatalf("after recovery the watcher got %v %s@%d, want ADDED after@%d", ev.Type, ev.Object.Name, ev.Revision(), after.Revision)
	}
}

// A COMMIT whose answer is lost is resolved through pg_xact_status, never reported as a failure or conflict.
func TestAmbiguousCommitIsResolved(t *testing.T) {
	proxy, url := newFaultProxy(t, pgtest.NewDatabase(t))
	s := openURL(t, url, func(c *Config) { c.Writers = 1 })
	ctx := t.Context()
	k := key("c1", "ns", "a")

	proxy.dropAfterCommit(false)
	o, err := s.Create(ctx, k, []byte("v1"))
	if err != nil {
		t.Fatalf("commit was made but reported as %v", err)
	}
	got, err := s.Get(ctx, k)
	if err != nil || got.Revision != o.Revision || string(got.Value) != "v1" {
		t.Fatalf("Get = %+v, %v; want the resolved write at %d", got, err, o.Revision)
	}

	// When even the resolution cannot reach the database, the caller gets an AmbiguousError to resolve later.
	proxy.dropAfterCommit(true)
	_, err = s.Update(ctx, k, []byte("v2"), o.Revision)
	var amb *AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("error %v, want an AmbiguousError", err)
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("ambiguous outcome reported as %v", err)
	}
	proxy.set(proxyUp)
	var committed bool
	deadline := time.Now().Add(20 * time.Second)
	for {
		committed, err = s.ResolveCommit(ctx, amb.XID)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("ResolveCommit: %v", err)
	}
	got, err = s.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if committed != (string(got.Value) == "v2") || (committed && got.Revision != amb.Revision) {
		t.Fatalf("ResolveCommit says committed=%v but the object is %q at %d (ambiguous revision %d)",
			committed, got.Value, got.Revision, amb.Revision)
	}
	if !committed {
		t.Fatalf("the COMMIT reached the server but was resolved as aborted (xid %d)", amb.XID)
	}
}
